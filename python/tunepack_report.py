"""Report a trial's metrics to tunepack from Python (standard library only).

Under tunepack, ``report()`` writes one JSON object per call, one line, to the file
descriptor named by ``TUNEPACK_REPORT_FD``; outside tunepack it prints one line of
``name=value`` pairs on stdout instead, so the same script runs unchanged from a terminal.

Example::

    import sys, pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
    from tunepack_report import params, report

    lr = float(params().get("lr", 0.1))
    for epoch in range(1, 21):
        loss, acc = train_one_epoch(lr)
        report(step=epoch, val_loss=loss, val_acc=acc)

Budget, checkpoints and pause requests (docs/checkpoints.md)::

    from tunepack_report import budget, checkpoint_dir, handle_pause_signal, report, should_pause

    handle_pause_signal()                     # optional: SIGUSR1 also asks to pause
    epochs = int(budget(default=20))          # TUNEPACK_BUDGET: train until this epoch
    ckpt = os.path.join(checkpoint_dir() or ".", "model.ckpt")
    epoch = load(ckpt) if os.path.exists(ckpt) else 0     # resume where it stopped
    while epoch < epochs:
        epoch += 1
        report(step=epoch, val_acc=train_one_epoch())
        save(ckpt, epoch)                     # write a temp file, then os.replace()
        if should_pause():                    # tunepack wants the slot back
            break                             # exit 0 with the checkpoint saved = paused
"""

import json
import math
import os
import select
import signal
import sys

__all__ = ["report", "params", "trial_dir", "checkpoint_dir", "budget", "should_pause",
           "handle_pause_signal", "configs", "dropped"]

_UNSET = object()
_fd = _UNSET  # TUNEPACK_REPORT_FD, parsed on the first report(): an int, or None when unset


def _report_fd():
    """Return the report file descriptor (int), or None when TUNEPACK_REPORT_FD is unset.

    Raises ValueError when the variable is set but is not a non-negative integer.
    """
    global _fd
    if _fd is _UNSET:
        text = os.environ.get("TUNEPACK_REPORT_FD", "")
        if text == "":
            _fd = None
        else:
            try:
                fd = int(text, 10)
            except ValueError:
                fd = -1
            if fd < 0:
                raise ValueError(
                    "TUNEPACK_REPORT_FD=%r is not a file descriptor number" % text)
            _fd = fd
    return _fd


def _metric_value(name, value):
    """Return value as a float; raise TypeError when float() does not take it."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError("metric %r must be a number, got %r" % (name, value)) from None


def report(step=None, config=None, **metrics):
    """Report metrics for one step (epoch, iteration, ...); step=None leaves the step out.

    In a fused process (``fuse:`` in the experiment, several configurations in one process:
    see configs()), config is the index of the configuration the metrics are about::

        report(step=3, config=2, loss=0.4)      # {"step": 3, "config": 2, "loss": 0.4}

    Metric values must be numbers (int, float, numpy scalars, 0-d tensors: anything
    ``float()`` accepts); NaN and infinities are reported as null (JSON has no NaN).

    Example::

        report(step=3, val_acc=0.91, loss=0.2)  # {"step": 3, "val_acc": 0.91, "loss": 0.2}
        report(val_loss=float("nan"))           # {"val_loss": null}

    Outside tunepack (TUNEPACK_REPORT_FD unset) the first call prints one line on stdout
    (non-finite values appear as nan or inf there)::

        step=3 val_acc=0.91 loss=0.2

    all on one line, since tunepack ties the step and the other metrics to the objective
    only when they share its line. For that form keep metric names to letters, digits and
    _ . - / (first a letter or _).

    The JSON line is written with os.write on the raw descriptor, whole, in one call when the
    kernel takes it (a line up to 4096 bytes goes into a pipe atomically), so reports never
    interleave with other output. Raises TypeError for a value that is not a number and
    OSError when the descriptor cannot be written.
    """
    fd = _report_fd()
    values = {name: _metric_value(name, value) for name, value in metrics.items()}
    if step is not None:
        step = int(step)
    if config is not None:
        config = int(config)

    if fd is None:
        pairs = [] if config is None else ["config=%d" % config]
        pairs.extend([] if step is None else ["step=%d" % step])
        pairs.extend("%s=%r" % (name, value) for name, value in values.items())
        if pairs:
            sys.stdout.write(" ".join(pairs) + "\n")
            sys.stdout.flush()
        return

    record = {} if step is None else {"step": step}
    if config is not None:
        record["config"] = config
    record.update((name, value if math.isfinite(value) else None)
                  for name, value in values.items())
    data = (json.dumps(record, allow_nan=False) + "\n").encode("utf-8")
    while data:
        written = os.write(fd, data)
        data = data[written:]


def trial_dir():
    """Return this trial's directory (TUNEPACK_TRIAL_DIR), or None outside tunepack.

    Example::

        out = trial_dir() or "."    # e.g. where to save a checkpoint
    """
    return os.environ.get("TUNEPACK_TRIAL_DIR") or None


def params():
    """Return this trial's parameters as a dict, read from $TUNEPACK_TRIAL_DIR/params.json.

    Returns {} outside tunepack (TUNEPACK_TRIAL_DIR unset) or when the file does not exist.

    Example::

        p = params()                # e.g. {"lr": 0.0123, "hidden": 64}
        lr = float(p.get("lr", 0.1))
    """
    directory = trial_dir()
    if directory is None:
        return {}
    try:
        with open(os.path.join(directory, "params.json"), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def checkpoint_dir():
    """Return this trial's persistent checkpoint directory, or None outside tunepack.

    It is TUNEPACK_CHECKPOINT_DIR, kept across the trial's attempts and jobs (a promotion
    to a larger budget, a resume after a pause): a trial that finds a checkpoint there
    resumes from it.

    Example::

        ckpt = os.path.join(checkpoint_dir() or ".", "model.pt")
    """
    return os.environ.get("TUNEPACK_CHECKPOINT_DIR") or None


def configs():
    """Return the configurations of a fused process as a list of dicts, or None if not fused.

    With ``fuse: {max: K}`` in the experiment, one process runs up to K configurations of
    the same shape; tunepack gives them in TUNEPACK_CONFIGS_JSON (and the command's
    ``{configs_json}`` placeholder) as ``[{"config": 0, "trial": 12, "params": {...},
    "checkpoint_dir": "...", "trial_dir": "..."}, ...]``. Report each one's metrics with
    ``report(step, config=i, ...)``, keep each one's checkpoint in its checkpoint_dir, and
    stop training index i once dropped() holds it. python/tunepack_fuse.py does all of that
    for PyTorch models.

    Example::

        for c in configs() or [{"config": 0, "params": params()}]:
            lr = float(c["params"]["lr"])
    """
    text = os.environ.get("TUNEPACK_CONFIGS_JSON", "")
    if text == "":
        return None
    value = json.loads(text)
    if not isinstance(value, list):
        raise ValueError("TUNEPACK_CONFIGS_JSON is not a JSON list of configurations")
    return value


def budget(default=None):
    """Return the budget this job must reach (TUNEPACK_BUDGET) as a float, else default.

    Train until step == budget, then exit 0. The same number arrives through the command's
    placeholder (``{epochs}`` for ``budget: {name: epochs, ...}``). default is returned
    when the variable is unset or is not a finite number > 0.

    Example::

        epochs = int(budget(default=20))
    """
    text = os.environ.get("TUNEPACK_BUDGET", "")
    try:
        value = float(text)
    except ValueError:
        return default
    if not math.isfinite(value) or value <= 0:
        return default
    return value


class _PauseState:
    """What should_pause() has seen: the sticky flag and a control line being read."""

    def __init__(self):
        self.requested = False  # a pause was asked for (stays True)
        self.dropped = set()    # configuration indexes a fused process was told to drop
        self.done = False       # the control fd reached EOF or failed: poll it no more
        self.partial = b""      # bytes of a control line not yet ended by a newline
        self.skipping = False   # the current line is too long: drop it at its newline


_pause = _PauseState()
_CONTROL_LINE_MAX = 64  # longer control lines are skipped


def _on_pause_signal(signum, frame):
    _pause.requested = True


def handle_pause_signal(signum=signal.SIGUSR1):
    """Make SIGUSR1 (or signum) a pause request that should_pause() reports.

    For experiments that say ``checkpoint: {signal: SIGUSR1}``. The handler only sets a
    flag, so the signal never interrupts training midway; check should_pause() at the end
    of an epoch or batch. Call it from the main thread (Python's rule for signal handlers).
    Returns the previous handler.
    """
    return signal.signal(signum, _on_pause_signal)


def _feed(data):
    """Add bytes read from the control fd; set the flag on a line that is exactly b"pause".

    Lines longer than _CONTROL_LINE_MAX bytes are skipped whole, as the C helper does.
    """
    lines = (_pause.partial + data).split(b"\n")
    _pause.partial = lines.pop()
    for line in lines:
        line = line.rstrip(b"\r")
        if not _pause.skipping and line == b"pause":
            _pause.requested = True
        elif not _pause.skipping and line.startswith(b"drop ") and line[5:].isdigit():
            _pause.dropped.add(int(line[5:]))
        _pause.skipping = False
    if len(_pause.partial) > _CONTROL_LINE_MAX:
        _pause.partial = b""
        _pause.skipping = True


def should_pause():
    """Return True when tunepack asked this trial to checkpoint and exit, else False.

    A request is a line ``pause`` on the file descriptor named by TUNEPACK_CONTROL_FD (a
    pipe; the variable is absent when the run does not support it), or SIGUSR1 once
    handle_pause_signal() is installed. Never blocks: the descriptor is polled with a zero
    timeout and only what is there is read. Once True, always True. On True, save a
    checkpoint and exit with status 0 soon (exit 0 after a request means paused, not
    completed); a trial that ignores it is stopped after a grace period and later resumed
    from its last checkpoint. Cost: one poll (and a read when data waits): call it at
    epoch or batch ends.
    """
    if _pause.requested:
        return True
    _drain(stop_at_pause=True)
    return _pause.requested


def dropped():
    """Return the set of configuration indexes this fused process was told to drop.

    tunepack's scheduler stopped those configurations early ("drop <i>" lines on the
    control channel); stop training them and go on with the others (their checkpoints may
    stay). Never blocks; costs what should_pause() costs. Outside tunepack: an empty set.
    """
    _drain(stop_at_pause=False)
    return set(_pause.dropped)


def _drain(stop_at_pause):
    """Read what waits on the control fd (never blocking) into _pause."""
    if _pause.done:
        return
    text = os.environ.get("TUNEPACK_CONTROL_FD", "")
    if text == "":
        return
    try:
        fd = int(text, 10)
    except ValueError:
        fd = -1
    if fd < 0:
        _pause.done = True
        return
    while not (stop_at_pause and _pause.requested):
        try:
            ready, _, _ = select.select([fd], [], [], 0)
        except (OSError, ValueError):
            _pause.done = True
            break
        if not ready:
            break
        try:
            data = os.read(fd, 256)
        except BlockingIOError:
            break
        except OSError:
            _pause.done = True
            break
        if not data:  # EOF: tunepack closed its end
            _pause.done = True
            break
        _feed(data)
