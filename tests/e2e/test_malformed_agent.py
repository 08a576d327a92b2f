#!/usr/bin/env python3
"""An agent whose messages do not decode (a member of the wrong type) is a protocol error,
named by the message's kind and member, and the agent is taken for lost: the run neither
guesses what it meant nor waits for it for ever (docs/protocol.md)."""

import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, main, yaml_str

# A stand-in agent on the wire (docs/protocol.md, "Framing"): it answers the orchestrator's
# hello with a hello whose cpus is a string, then reads until it is killed or its input ends.
AGENT = r'''
import json, struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
def frame(head):
    js = json.dumps(head).encode()
    body = struct.pack(">I", len(js)) + js
    out.write(struct.pack(">I", len(body)) + body)
    out.flush()
while True:
    size = inp.read(4)
    if len(size) < 4:
        sys.exit(0)
    body = inp.read(struct.unpack(">I", size)[0])
    head = json.loads(body[4:4 + struct.unpack(">I", body[:4])[0]])
    if head["type"] == "hello":
        frame({"type": "hello", "protocol": 1, "node": "n1", "cpus": "eight", "reaped": 0,
               "gpus": [], "nvml": "absent", "mps_control": False})
'''


class MalformedAgent(E2E):

    def test_a_hello_with_a_member_of_the_wrong_type_loses_the_agent_and_says_why(self):
        agent = self.write("agent.py", AGENT)
        exp = self.experiment(
            "name: malformed\n"
            "command: [sh, -c, \"echo acc=1\"]\n"
            "metric: {name: acc, mode: max}\n"
            "search: {algorithm: random, trials: 1}\n"
            "cluster: {command: {nodes: [n1], shared: true,\n"
            "  argv: [%s, %s, \"{node}\"]}}\n" % (yaml_str(PY), yaml_str(agent)))
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        # lost at each try (1 s, 2 s, 4 s apart), then no node is left: exit 7
        self.assertExit(r, 7)
        self.assertIn('protocol error from the agent: protocol: hello: member "cpus" must be '
                      'an integer, not a string', r.stderr)
        self.assertFalse([l for l in r.stderr.splitlines() if "agent speaks protocol" in l],
                         r.stderr)
        with self.store(run_dir) as s:
            self.assertEqual([t["state"] for t in s.trials() if t["state"] == "completed"], [])
            self.assertGreaterEqual(len(s.events(kind="agent-lost")), 1)


if __name__ == "__main__":
    main()
