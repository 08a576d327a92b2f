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
"""

import json
import math
import os
import sys

__all__ = ["report", "params", "trial_dir"]

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


def report(step=None, **metrics):
    """Report metrics for one step (epoch, iteration, ...); step=None leaves the step out.

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

    if fd is None:
        pairs = [] if step is None else ["step=%d" % step]
        pairs.extend("%s=%r" % (name, value) for name, value in values.items())
        if pairs:
            sys.stdout.write(" ".join(pairs) + "\n")
            sys.stdout.flush()
        return

    record = {} if step is None else {"step": step}
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
