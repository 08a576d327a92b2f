"""Make a PyTorch training script fusable: K models of the same shape in one process.

With ``fuse: {max: K}`` in the experiment, tunepack runs up to K configurations of the same
shape (the parameters of ``fuse.shape``) in one process and gives them in
TUNEPACK_CONFIGS_JSON (also the command's ``{configs_json}`` placeholder). This helper
builds one model per configuration, steps all of them on the same batch from one shared
data loader (one optimizer, one parameter group per model carrying that model's lr,
weight decay, momentum, ...), reports each one's metrics with its index, keeps each one's
checkpoint in its own checkpoint directory, and stops training a configuration that
tunepack drops (an early stop of that one) while the others go on. Outside tunepack (no
TUNEPACK_CONFIGS_JSON) it runs one model from params() or the defaults given, so the same
script runs from a terminal.

Example (examples/fuse/train.py is a complete one)::

    from tunepack_fuse import Fused

    fused = Fused(lambda p: make_model(int(p["hidden"])), optimizer="sgd",
                  defaults={"lr": 0.1, "hidden": 64})
    first = fused.load_checkpoints()          # epochs already done, per configuration
    for epoch in range(first + 1, epochs + 1):
        for x, y in loader:                   # one loader for all K models
            fused.train_step(x, y, loss_fn)
        fused.report(epoch, val_acc=fused.evaluate(xv, yv, accuracy))
        fused.save_checkpoints(epoch)
        if fused.poll() or not fused.live:    # paused, or every configuration dropped
            break

Needs torch (Debian's python3-torch; run the script with /usr/bin/python3).
"""

import json
import os

import torch

import tunepack_report

__all__ = ["Fused"]

# Per-model optimizer settings read from a configuration's params, by optimizer.
_HPARAMS = {
    "sgd": {"lr": 0.01, "momentum": 0.0, "weight_decay": 0.0, "nesterov": False},
    "adam": {"lr": 1e-3, "weight_decay": 0.0},
    "adamw": {"lr": 1e-3, "weight_decay": 0.01},
}
_OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}


class Fused:
    """K models of one shape trained together on the same batches.

    build(params) returns a torch.nn.Module for one configuration's params (the shape
    parameters are the same for all of them). optimizer is "sgd", "adam" or "adamw"; each
    model gets its own parameter group whose lr, weight_decay, momentum (sgd) come from its
    params under those names (``hparams`` maps a setting to another parameter name, e.g.
    ``{"weight_decay": "wd"}``), else the optimizer's default. defaults: params used when
    not fused and params() is empty (a run from a terminal).

    Attributes: configs (what tunepack gave, a list of dicts), models (one per
    configuration), live (indexes still trained, in order).
    """

    def __init__(self, build, optimizer="sgd", hparams=None, defaults=None, device="cpu",
                 configs=None):
        if optimizer not in _OPTIMIZERS:
            raise ValueError("optimizer must be one of %s, got %r"
                             % (", ".join(sorted(_OPTIMIZERS)), optimizer))
        if isinstance(configs, str):  # the text of {configs_json}, given in argv
            configs = json.loads(configs)
        if configs is None:
            configs = tunepack_report.configs()
        if configs is None:  # not fused: one configuration, the trial's own or the defaults
            params = tunepack_report.params() or dict(defaults or {})
            configs = [{"config": 0, "params": params,
                        "checkpoint_dir": tunepack_report.checkpoint_dir()}]
        self.configs = configs
        self.device = device
        self.models = [build(c["params"]).to(device) for c in configs]
        names = dict(hparams or {})
        groups = []
        for c, model in zip(configs, self.models):
            group = {"params": list(model.parameters())}
            for setting, default in _HPARAMS[optimizer].items():
                value = c["params"].get(names.get(setting, setting), default)
                group[setting] = type(default)(value)
            groups.append(group)
        self.optimizer = _OPTIMIZERS[optimizer](groups)
        self.live = list(range(len(configs)))
        self.done = [0] * len(configs)  # epochs each configuration has finished
        self.last = [{} for _ in configs]  # each one's last reported metrics

    # ---- training -------------------------------------------------------------------

    def _training(self, epoch):
        """Indexes trained in this epoch: live, and not past it (resumed further)."""
        return [i for i in self.live if self.done[i] < epoch]

    def train_step(self, x, y, loss_fn, epoch=None):
        """One optimizer step of every live model on the batch (x, y). Returns the losses
        as a dict {index: float}. With epoch, configurations already past it (a resumed
        one that had gone further) sit it out."""
        x, y = x.to(self.device), y.to(self.device)
        which = self.live if epoch is None else self._training(epoch)
        self.optimizer.zero_grad(set_to_none=True)
        losses = [loss_fn(self.models[i](x), y) for i in which]
        if not losses:
            return {}
        stacked = torch.stack(losses)
        stacked.sum().backward()  # the models share no parameter: one backward, K gradients
        self.optimizer.step()  # groups of models not in `which` have no gradient
        # one copy to the host for all K (on a GPU, one synchronisation per step, not K)
        return dict(zip(which, stacked.detach().tolist()))

    @torch.no_grad()
    def evaluate(self, x, y, metric_fn):
        """metric_fn(outputs, y) of every live model on (x, y): {index: float}."""
        x, y = x.to(self.device), y.to(self.device)
        out = {}
        for i in self.live:
            self.models[i].eval()
            out[i] = float(metric_fn(self.models[i](x), y))
            self.models[i].train()
        return out

    # ---- reports, checkpoints, control ------------------------------------------------

    def report(self, step, **metrics):
        """One report line per live configuration that reached step; each metric is a
        dict {index: value} (from train_step/evaluate) or one number for all."""
        for i in self.live:
            if self.done[i] >= step:
                continue
            values = {name: (v[i] if isinstance(v, dict) else v) for name, v in metrics.items()
                      if not isinstance(v, dict) or i in v}
            self.last[i] = {name: float(v) for name, v in values.items()}
            tunepack_report.report(step=step, config=self.configs[i]["config"], **values)

    def _path(self, i):
        directory = self.configs[i].get("checkpoint_dir")
        return os.path.join(directory, "fused.pt") if directory else None

    def save_checkpoints(self, epoch, extra=None):
        """Each live configuration that trained in this epoch: its model, its optimizer
        state and the epoch, to its own checkpoint directory (a temp file, then
        os.replace)."""
        for i in self._training(epoch):
            path = self._path(i)
            self.done[i] = epoch
            if path is None:
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            state = {p: self.optimizer.state[p] for p in self.models[i].parameters()
                     if p in self.optimizer.state}
            blob = {"epoch": epoch, "model": self.models[i].state_dict(), "metrics": self.last[i],
                    "optimizer": [state.get(p, {}) for p in self.models[i].parameters()],
                    "extra": extra}
            torch.save(blob, path + ".tmp")
            os.replace(path + ".tmp", path)

    def load_checkpoints(self, epochs=None):
        """Load each configuration's checkpoint where there is one; returns the smallest
        epoch done (0 when some start afresh): train from there, the others sit out the
        epochs they already have. With epochs (the budget), a configuration already there
        (its process killed before its result was seen) reports its last metrics again."""
        for i in range(len(self.configs)):
            path = self._path(i)
            if path is None or not os.path.exists(path):
                continue
            blob = torch.load(path, map_location=self.device)
            self.models[i].load_state_dict(blob["model"])
            for p, st in zip(self.models[i].parameters(), blob["optimizer"]):
                if st:
                    self.optimizer.state[p] = st
            self.done[i] = int(blob["epoch"])
            self.last[i] = dict(blob.get("metrics") or {})
            if epochs is not None and self.done[i] >= epochs and self.last[i]:
                tunepack_report.report(step=self.done[i], config=self.configs[i]["config"],
                                       **self.last[i])
        return min(self.done) if self.done else 0

    def poll(self):
        """Drop the configurations tunepack dropped (no more training or reports for them)
        and return True when it asks the process to pause (checkpoint and exit 0)."""
        gone = tunepack_report.dropped()
        if gone:
            keep = []
            for i in self.live:
                if self.configs[i]["config"] in gone:
                    for p in self.models[i].parameters():  # free its optimizer state
                        self.optimizer.state.pop(p, None)
                else:
                    keep.append(i)
            self.live = keep
        return tunepack_report.should_pause()
