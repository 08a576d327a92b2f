"""A binary, interactive round trip through a process's stdin and stdout (cat through srun or
ssh): the harness tests' proof that a transport carries the agent protocol unchanged."""

import os
import select
import time


def ping_pong(proc, rounds=50, size=100, timeout=10):
    """Write `size` random bytes (no newline at the end) to proc's stdin and read them back
    from its stdout before sending the next, `rounds` times; return the round-trip times,
    or None if an answer did not come within timeout seconds."""
    times = []
    for _ in range(rounds):
        msg = os.urandom(size).replace(b"\n", b"x")
        t = time.monotonic()
        os.write(proc.stdin.fileno(), msg)
        got = b""
        while len(got) < size:
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            got += chunk
        times.append(time.monotonic() - t)
        if got != msg:
            raise AssertionError("the echo came back changed")
    return times
