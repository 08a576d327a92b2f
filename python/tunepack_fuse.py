"""Make a PyTorch training script fusable: K models of the same shape in one process.

With ``fuse: {max: K}`` in the experiment, tunepack runs up to K configurations of the same
shape (the parameters of ``fuse.shape``) in one process and gives them in
TUNEPACK_CONFIGS_JSON (also the command's ``{configs_json}`` placeholder). This helper
builds one model per configuration, steps all of them on the same batch from one shared
data loader, each with its own lr, weight decay, momentum, ... and optimizer state, reports
each one's metrics with its index, keeps each one's checkpoint in its own checkpoint
directory, and stops training a configuration that tunepack drops (an early stop of that one)
while the others go on. Outside tunepack (no
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

Horizontal fusion: where the K models can be batched, their parameters are stacked into one
[K, P] tensor and the K models step as one batched model (grouped matmuls for an MLP, vmap
over functional_call for other models: one forward, one backward and one optimizer update in
one set of kernels for all K, with per-model hyperparameters as [K] tensors). Where they
cannot (BatchNorm running statistics or other buffers changed in forward, a model vmap
rejects, a custom optimizer, one configuration) the models step one after the other.
``mode`` says which ("horizontal" or "sequential") and ``why`` why not horizontal (also said
once on stderr). Both give the same numbers, within floating-point rounding, and the same
checkpoints.

Needs torch (Debian's python3-torch; run the script with /usr/bin/python3).
"""

import copy
import json
import os
import sys

import torch
import torch.nn.functional as nn_f

import tunepack_report

_FUNC = []  # (vmap, functional_call), once imported


def _vmap(*args, **kwargs):
    return _func()[0](*args, **kwargs)


def _functional_call(*args, **kwargs):
    return _func()[1](*args, **kwargs)


def _func():
    """torch.func's vmap and functional_call (PyTorch >= 2), or functorch's and torch.nn.utils
    .stateless's (Debian's 1.13), imported on first use: functorch takes 0.7 CPU s to import
    on 1.13, which an MLP with cross-entropy (grouped matmuls) and an unfused trial never
    need. Raises RuntimeError where there are neither (a model that needs vmap then steps
    one after the other)."""
    if not _FUNC:
        try:  # PyTorch >= 2.0
            from torch.func import functional_call, vmap
        except ImportError:
            try:  # PyTorch 1.13: functorch is a package of its own
                from functorch import vmap
                from torch.nn.utils.stateless import functional_call
            except ImportError:
                raise RuntimeError("this PyTorch (%s) has neither torch.func nor functorch"
                                   % torch.__version__) from None
        _FUNC.append((vmap, functional_call))
    return _FUNC[0]

__all__ = ["Fused"]

# Per-model optimizer settings read from a configuration's params, by optimizer.
_HPARAMS = {
    "sgd": {"lr": 0.01, "momentum": 0.0, "weight_decay": 0.0, "nesterov": False},
    "adam": {"lr": 1e-3, "weight_decay": 0.0},
    "adamw": {"lr": 1e-3, "weight_decay": 0.01},
}
_OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
_BETAS, _EPS = (0.9, 0.999), 1e-8  # torch's defaults for Adam and AdamW
# Modules that act on each element alone: the same on one model's outputs or K models'.
_ELEMENTWISE = (torch.nn.ReLU, torch.nn.LeakyReLU, torch.nn.Tanh, torch.nn.Sigmoid,
                torch.nn.GELU, torch.nn.SiLU, torch.nn.ELU, torch.nn.Identity)


class Fused:
    """K models of one shape trained together on the same batches.

    build(params) returns a torch.nn.Module for one configuration's params (the shape
    parameters are the same for all of them). optimizer is "sgd", "adam" or "adamw" (each
    model's lr, weight_decay, momentum and nesterov (sgd) come from its params under those
    names, ``hparams`` mapping a setting to another parameter name, e.g.
    ``{"weight_decay": "wd"}``, else the optimizer's default), or a torch.optim.Optimizer
    class (or any callable of a list of parameter groups) of your own, whose groups carry the
    settings that ``hparams`` names and the params have; that one steps the models one after
    the other. defaults: params used when not fused and params() is empty (a run from a
    terminal). horizontal=False steps the models one after the other even where they could
    be batched (to compare).

    Attributes: configs (what tunepack gave, a list of dicts), models (one per
    configuration; batched, their tensors are views of the stacked ones and show the current
    weights), live (indexes still trained, in order), mode ("horizontal": the live models step
    as one batched model; "sequential": one after the other), why (why not horizontal, or
    None), optimizer (the torch optimizer, sequential only).
    """

    def __init__(self, build, optimizer="sgd", hparams=None, defaults=None, device="cpu",
                 configs=None, horizontal=True):
        custom = not isinstance(optimizer, str)
        if not custom and optimizer not in _OPTIMIZERS:
            raise ValueError("optimizer must be one of %s or an optimizer class, got %r"
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
        table = {s: None for s in names} if custom else _HPARAMS[optimizer]
        self._settings = []  # per model: {setting: value}
        for c in configs:
            group = {}
            for setting, default in table.items():
                value = c["params"].get(names.get(setting, setting), default)
                if value is not None:
                    group[setting] = value if default is None else type(default)(value)
            self._settings.append(group)
        self._kind = None if custom else optimizer
        self._make_optimizer = optimizer if custom else _OPTIMIZERS[optimizer]
        self.live = list(range(len(configs)))
        self.done = [0] * len(configs)  # epochs each configuration has finished
        self.last = [{} for _ in configs]  # each one's last reported metrics
        self.optimizer = None
        self.mode, self.why = "horizontal", None
        self._members = []  # horizontal: the configurations stacked, in stacking order
        self._checked = False  # horizontal: the first batched step succeeded
        why = self._cannot_batch(optimizer if custom else None) if horizontal else \
            "asked for (horizontal=False)"
        if why:
            self._sequential(why, quiet=len(configs) == 1 or not horizontal)
        else:
            self._template = copy.deepcopy(self.models[0])  # functional_call's module
            self._stack(self.live)
            self._plan = self._matmul_plan()

    # ---- horizontal fusion: the K models as one batched model ---------------------------

    def _cannot_batch(self, custom):
        """Why the models cannot be stacked (None when they can), from what is known before
        the first step; train_step finds the rest (vmap errors, buffers changed)."""
        if len(self.models) < 2:
            return "one configuration: nothing to batch"
        if custom is not None:
            return "a custom optimizer (%s): only sgd, adam and adamw are batched" \
                % getattr(custom, "__name__", type(custom).__name__)

        def signature(m):
            return ([(n, p.shape, p.dtype, p.requires_grad) for n, p in m.named_parameters()] +
                    [(n, b.shape, b.dtype) for n, b in m.named_buffers()])
        first = signature(self.models[0])
        for i, m in enumerate(self.models[1:], 1):
            if signature(m) != first:
                return "the model of configuration %d differs in its parameters or buffers " \
                    "from that of configuration 0" % i
        seen = set()
        for m in self.models:
            for p in list(m.parameters()) + list(m.buffers()):
                if id(p) in seen:
                    return "the models share a parameter or buffer"
                seen.add(id(p))
        for name, mod in self.models[0].named_modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and \
                    mod.track_running_stats:
                return "%s (%s) updates its running statistics in forward" \
                    % (name or "the model", type(mod).__name__)
        trained = [p for p in self.models[0].parameters() if p.requires_grad]
        if not trained:
            return "the model has no trainable parameter"
        if len({p.dtype for p in trained}) > 1:
            return "the model's parameters are of several dtypes"
        return None

    def _stack(self, members):
        """Stack the models of `members` (configuration indexes): their trainable parameters
        into one [K, P] tensor whose row k is model members[k] flattened, the other
        parameters and buffers into [K, ...] tensors; each model's tensors become views of
        its row. Optimizer state starts empty (zeros, no step)."""
        self._members = list(members)
        k = len(members)
        if not k:
            self._flat = None
            return
        first = dict(self.models[members[0]].named_parameters())
        trained = [n for n, p in first.items() if p.requires_grad]
        self._spans = {}  # name -> (start, end, shape) in a row
        at = 0
        for n in trained:
            self._spans[n] = (at, at + first[n].numel(), first[n].shape)
            at += first[n].numel()
        dtype = first[trained[0]].dtype
        flat = torch.empty(k, at, dtype=dtype, device=self.device)
        fixed = {}
        with torch.no_grad():
            for row, i in enumerate(members):
                tensors = dict(self.models[i].named_parameters())
                flat[row] = torch.cat([tensors[n].detach().reshape(-1) for n in trained])
            for n, t in list(first.items()) + list(self.models[members[0]].named_buffers()):
                if n not in self._spans:
                    fixed[n] = torch.stack([self._tensor(i, n).detach() for i in members])
        self._flat, self._fixed, self._grad = flat, fixed, None
        # what functional_call gets: leaves requiring grad that alias the stacked rows
        self._views = {n: flat[:, a:b].view(k, *shape).detach().requires_grad_()
                       for n, (a, b, shape) in self._spans.items()}
        for row, i in enumerate(members):
            for n, (a, b, shape) in self._spans.items():
                self._tensor(i, n).data = flat[row, a:b].view(shape)
            for n, t in fixed.items():
                self._tensor(i, n).data = t[row]

        def column(setting):
            return torch.tensor([float(self._settings[i].get(setting, 0.0)) for i in members],
                                dtype=torch.float64, device=self.device).view(k, 1)
        self._hyper = {s: column(s) for s in _HPARAMS[self._kind]}
        self._cast = {s: v.to(dtype) for s, v in self._hyper.items()}
        self._any = {s: bool((v != 0).any()) for s, v in self._hyper.items()}
        self._steps = torch.zeros(k, 1, dtype=torch.float64, device=self.device)
        slots = ("momentum_buffer",) if self._kind == "sgd" else ("exp_avg", "exp_avg_sq")
        self._state = {s: torch.zeros_like(flat) for s in slots}

    def _tensor(self, i, name):
        """Model i's parameter or buffer called name."""
        owner, _, attr = name.rpartition(".")
        module = self.models[i].get_submodule(owner) if owner else self.models[i]
        return getattr(module, attr)

    def _unlink(self, members):
        """Give the models of `members` tensors of their own again (copies of their rows)."""
        for i in members:
            for t in list(self.models[i].parameters()) + list(self.models[i].buffers()):
                t.data = t.data.clone()

    def _state_of(self, i):
        """Stacked model i's optimizer state as the torch optimizer keeps it: a list, one
        dict per parameter of models[i].parameters() ({} before its first step)."""
        row = self._members.index(i)
        steps = float(self._steps[row])
        out = []
        for n, _ in self.models[i].named_parameters():
            if n not in self._spans or steps == 0:
                out.append({})
                continue
            a, b, shape = self._spans[n]
            st = {s: t[row, a:b].view(shape).clone() for s, t in self._state.items()}
            if self._kind != "sgd":
                st["step"] = torch.tensor(steps)
            out.append(st)
        return out

    def _load_state(self, i, states):
        """Put model i's optimizer state (as _state_of gives it) into its stacked row."""
        row = self._members.index(i)
        with torch.no_grad():
            for (n, _), st in zip(self.models[i].named_parameters(), states):
                if n not in self._spans or not st:
                    continue
                a, b, _ = self._spans[n]
                for s, t in self._state.items():
                    if st.get(s) is not None:
                        t[row, a:b] = st[s].reshape(-1).to(t)
                step = st.get("step")
                self._steps[row] = float(step) if step is not None else \
                    max(float(self._steps[row]), 1.0)

    def _restack(self, members):
        """Stack `members` anew (a dropped configuration leaves), keeping their state."""
        states = {i: self._state_of(i) for i in members}
        self._unlink(self._members)
        self._stack(members)
        for i in members:
            self._load_state(i, states[i])

    def _sequential(self, why, quiet=False):
        """Step the models one after the other from now on (today's stepping): unstack them,
        one torch optimizer with a parameter group per model, each one's state kept."""
        states = {}
        if self._members:
            states = {i: self._state_of(i) for i in self._members}
            self._unlink(self._members)
        self._members, self._flat = [], None
        groups = [dict(s, params=list(m.parameters())) for s, m in zip(self._settings, self.models)]
        self.optimizer = self._make_optimizer(groups)
        for i, st in states.items():
            for p, s in zip(self.models[i].parameters(), st):
                if s:
                    self.optimizer.state[p] = s
        self.mode, self.why = "sequential", why
        if not quiet:
            print("tunepack_fuse: the %d models step one after the other, not batched: %s"
                  % (len(self.models), why), file=sys.stderr, flush=True)

    def _matmul_plan(self):
        """The model as grouped matmuls where it is an nn.Sequential of Linear layers and
        elementwise activations (the common MLP): a list of ("linear", weight, bias) and
        ("apply", module) steps, else None (vmap then runs it). Fewer and larger kernels
        than vmap's, and less Python per step."""
        model = self._template
        if type(model) is not torch.nn.Sequential:
            return None
        plan = []
        for name, mod in model.named_children():
            if type(mod) is torch.nn.Linear:
                bias = name + ".bias" if mod.bias is not None else None
                if name + ".weight" not in self._views or (bias and bias not in self._views):
                    return None
                plan.append(("linear", name + ".weight", bias))
            elif type(mod) in _ELEMENTWISE:
                plan.append(("apply", mod))
            else:
                return None
        return plan if any(step[0] == "linear" for step in plan) else None

    def _forward(self, x):
        """The outputs of the K stacked models on x: [K, ...] as one model's, batched."""
        if self._plan is not None and x.dim() == 2:
            h, k = x, len(self._members)
            for step in self._plan:
                if step[0] == "apply":
                    h = step[1](h)
                    continue
                w = self._views[step[1]].transpose(1, 2)  # [K, in, out]
                if h.dim() == 2:  # the shared input: every model reads the same x
                    h = h.unsqueeze(0).expand(k, *h.shape)
                h = torch.bmm(h, w) if step[2] is None else \
                    torch.baddbmm(self._views[step[2]].unsqueeze(1), h, w)
            return h
        template = self._template

        def one(views, fixed, x):
            return _functional_call(template, dict(views, **fixed), (x,))
        return _vmap(one, in_dims=(0, 0, None), randomness="different")(
            self._views, self._fixed, x)

    @staticmethod
    def _losses(loss_fn, out, y):
        """loss_fn of each model's outputs out[k] against y: [K]. Cross-entropy (the
        function, or nn.CrossEntropyLoss without class weights) over [K, N, C] outputs is one
        call over the K*N rows; any other loss is vmapped."""
        ce = nn_f.cross_entropy
        if (loss_fn is ce or (type(loss_fn) is torch.nn.CrossEntropyLoss and
                              loss_fn.weight is None and loss_fn.reduction == "mean")) \
                and out.dim() == 3 and y.dim() == 1 and not y.is_floating_point():
            ignore = getattr(loss_fn, "ignore_index", -100)
            k, n = out.shape[0], out.shape[1]
            each = ce(out.reshape(k * n, -1), y.repeat(k), reduction="none",
                      ignore_index=ignore, label_smoothing=getattr(loss_fn, "label_smoothing", 0.0))
            # the mean over the targets not ignored, as reduction="mean" takes it
            return each.view(k, n).sum(1) / (y != ignore).sum()
        return _vmap(loss_fn, in_dims=(0, None), randomness="different")(out, y)

    def _step_horizontal(self, x, y, loss_fn, which):
        k, members = len(self._members), self._members
        active = [row for row, i in enumerate(members) if i in which]
        probe = not self._checked
        if probe:  # the first step: does vmap take the model, and forward leave buffers be?
            saved = {n: t.clone() for n, t in self._fixed.items()}
        try:
            out = self._forward(x)
            losses = self._losses(loss_fn, out, y)
            if len(active) < k:
                mask = torch.zeros(k, dtype=losses.dtype, device=losses.device)
                mask[active] = 1
                total = (losses * mask).sum()
            else:
                total = losses.sum()
            views = list(self._views.values())
            grads = torch.autograd.grad(total, views, allow_unused=True)
        except Exception as e:  # noqa: BLE001 - whatever vmap rejects, the models still train
            if not probe:
                raise
            text = (str(e).strip().splitlines() or [""])[0][:200]
            self._sequential("vmap rejects the model: %s: %s" % (type(e).__name__, text))
            return None
        if probe:
            changed = [n for n, t in saved.items() if not torch.equal(t, self._fixed[n])]
            if changed:
                with torch.no_grad():
                    for n in changed:
                        self._fixed[n].copy_(saved[n])
                self._sequential("forward changes its buffers (%s)" % ", ".join(changed))
                return None
            self._checked = True
        if self._grad is None:  # one buffer for every step's gradient (no allocation)
            self._grad = torch.empty_like(self._flat)
        grad = torch.cat([(g if g is not None else torch.zeros_like(v)).reshape(k, -1)
                          for g, v in zip(grads, views)], 1, out=self._grad)
        self._update(grad, active)
        values = losses.detach().tolist()  # one copy to the host for all K
        return {members[row]: values[row] for row in active}

    @torch.no_grad()
    def _update(self, grad, active):
        """One optimizer step of the stacked rows in `active`, as torch's SGD, Adam or AdamW
        steps each model, with the per-model settings as [K, 1] columns."""
        k = len(self._members)
        tensors = [self._flat, self._steps] + list(self._state.values())
        idle = [row for row in range(k) if row not in active]
        kept = [t[idle].clone() for t in tensors] if idle else None
        # in place where torch's optimizers are (grad is this step's own buffer): no
        # temporaries of the parameters' size but nesterov's
        w, h, c, st = self._flat, self._hyper, self._cast, self._state
        self._steps += 1
        if self._kind == "sgd":
            if self._any["weight_decay"]:
                grad.addcmul_(w, c["weight_decay"])
            d = grad
            if self._any["momentum"]:
                buf = st["momentum_buffer"]
                buf.mul_(c["momentum"]).add_(grad)
                if self._any["nesterov"]:
                    d = torch.where(c["nesterov"] != 0, grad.addcmul_(buf, c["momentum"]), buf)
                else:
                    d = buf
            w.addcmul_(d, c["lr"], value=-1)
        else:
            b1, b2 = _BETAS
            if self._kind == "adamw":
                w.mul_((1 - h["lr"] * h["weight_decay"]).to(w.dtype))
            elif self._any["weight_decay"]:
                grad.addcmul_(w, c["weight_decay"])
            st["exp_avg"].mul_(b1).add_(grad, alpha=1 - b1)
            st["exp_avg_sq"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
            step_size = (h["lr"] / (1 - b1 ** self._steps)).to(w.dtype)
            root = torch.sqrt(1 - b2 ** self._steps).to(w.dtype)
            denom = torch.sqrt(st["exp_avg_sq"], out=grad)  # grad is spent: its buffer serves
            denom.div_(root).add_(_EPS)
            torch.div(st["exp_avg"], denom, out=denom)
            w.addcmul_(denom, step_size, value=-1)
        if kept:
            for t, old in zip(tensors, kept):
                t[idle] = old

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
        if not which:
            return {}
        if self.mode == "horizontal":
            out = self._step_horizontal(x, y, loss_fn, which)
            if out is not None:
                return out
        self.optimizer.zero_grad(set_to_none=True)
        losses = [loss_fn(self.models[i](x), y) for i in which]
        stacked = torch.stack(losses)
        stacked.sum().backward()  # the models share no parameter: one backward, K gradients
        self.optimizer.step()  # groups of models not in `which` have no gradient
        # one copy to the host for all K (on a GPU, one synchronisation per step, not K)
        return dict(zip(which, stacked.detach().tolist()))

    @torch.no_grad()
    def evaluate(self, x, y, metric_fn):
        """metric_fn(outputs, y) of every live model on (x, y): {index: float}."""
        x, y = x.to(self.device), y.to(self.device)
        if self.mode == "horizontal" and self._members:
            self._template.eval()
            try:
                outs = self._forward(x)
            except Exception as e:  # noqa: BLE001 - as in train_step
                if self._checked:
                    raise
                text = (str(e).strip().splitlines() or [""])[0][:200]
                self._sequential("vmap rejects the model: %s: %s" % (type(e).__name__, text))
            else:
                return {i: float(metric_fn(outs[row], y))
                        for row, i in enumerate(self._members) if i in self.live}
            finally:
                self._template.train()
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
        os.replace). The same format batched or not: blob["model"] is the state_dict of one
        model, blob["optimizer"] one state dict per parameter, as the torch optimizer keeps
        it."""
        for i in self._training(epoch):
            path = self._path(i)
            self.done[i] = epoch
            if path is None:
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if i in self._members:  # views of the stacked tensors: copies of its own
                model = {n: t.clone() for n, t in self.models[i].state_dict().items()}
                optimizer = self._state_of(i)
            else:
                model = self.models[i].state_dict()
                state = {p: self.optimizer.state[p] for p in self.models[i].parameters()
                         if p in self.optimizer.state}
                optimizer = [state.get(p, {}) for p in self.models[i].parameters()]
            blob = {"epoch": epoch, "model": model, "metrics": self.last[i],
                    "optimizer": optimizer, "extra": extra}
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
            self.models[i].load_state_dict(blob["model"])  # in place: into its stacked row
            if i in self._members:
                self._load_state(i, blob["optimizer"])
            else:
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
        """Drop the configurations tunepack dropped (no more training or reports for them;
        batched, the others are stacked anew without them) and return True when it asks the
        process to pause (checkpoint and exit 0)."""
        gone = tunepack_report.dropped()
        if gone:
            keep = [i for i in self.live if self.configs[i]["config"] not in gone]
            if self._members:
                self._restack(keep)
            else:
                for i in self.live:
                    if i not in keep:
                        for p in self.models[i].parameters():  # free its optimizer state
                            self.optimizer.state.pop(p, None)
            self.live = keep
        return tunepack_report.should_pause()
