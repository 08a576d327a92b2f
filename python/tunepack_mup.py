"""Width-scaled PyTorch models in muP, so hyperparameters tuned on a narrow model hold on the
wide one (tunepack's `surrogate:`; docs/search.md).

Under the standard parametrisation (PyTorch's defaults) the best learning rate drifts as a
model widens, so tuning a narrow surrogate says little about the full model. muP (Yang et al.
2021, "Tensor Programs V", table 3) scales each layer's initialisation and learning rate with
its fan-in and fan-out so that activations and their updates stay O(1) at every width; then
the optimum transfers. This module applies it to an ordinary ``nn.Module`` (Debian's
python3-torch; run with /usr/bin/python3):

    import tunepack_mup as mup
    width = float(params()["width_mult"])          # 0.125 in the search, 1 when promoted
    model, opt = mup.build(lambda w: Net(hidden=round(512 * w)), width, "adam", lr=lr)

``build`` makes the model at ``width`` and, to see which dimensions grow with the width, a
second one at half of it (discarded). Every dimension that differs is "infinite" and is taken
to scale as width / base (base = 1.0: the full model is where muP equals PyTorch's own
initialisation, so the numbers a search finds are the full model's). Each parameter of a
Linear, Conv2d, Embedding, LayerNorm or BatchNorm layer then falls in one row:

    role      weight shape (out, in)      init                      Adam LR   SGD LR
    input     finite in, infinite out     PyTorch's default         lr        lr * m
    hidden    infinite in and out         PyTorch's default         lr / m    lr
    output    infinite in, finite out     default / sqrt(m) (or 0)  lr / m    lr / m
    vector    biases, norm gains/biases   zero bias, unit gain      lr        lr * m_out
    fixed     nothing infinite            PyTorch's default         lr        lr

with m = width / base (the fan-in multiplier for hidden and output, the fan-out multiplier for
input and vector parameters; m_out is 1 for the output layer's bias). PyTorch's default
variance is ~1/fan_in, so hidden weights keep it (table 3: 1/fan_in), input weights have a
finite fan-in (constant), and the output weights get 1/fan_in^2 (the extra 1/m). A parameter
with an infinite dimension in any other layer is refused: say how it scales or keep it fixed.

``param_groups(model, roles, optimizer, lr)`` gives the groups alone, for an optimizer of your
own (AdamW: weight decay is decoupled and left as given). ``roles(model, delta)`` is the table
for inspection. Hydro (S-Lab-System-Group/Hydro) ships the same idea for fx-traced models; its
SGD rule divides the hidden layers' learning rate by m as its Adam rule does (muP keeps it
constant under SGD when fan-in and fan-out grow together), which this module does not copy.
"""

import math

import torch
from torch import nn

SUPPORTED = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Embedding, nn.LayerNorm,
             nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
NORMS = (nn.LayerNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


class Role:
    """One parameter's place in the muP table: role name, m (its width multiplier)."""

    __slots__ = ("name", "role", "m")

    def __init__(self, name, role, m):
        self.name, self.role, self.m = name, role, m

    def __repr__(self):
        return "Role(%r, %r, m=%g)" % (self.name, self.role, self.m)


def _weight_role(shape, delta_shape):
    """input | hidden | output | fixed from (out, in, ...) against the delta model's shape."""
    out_inf = shape[0] != delta_shape[0]
    in_inf = len(shape) > 1 and shape[1] != delta_shape[1]
    if out_inf and in_inf:
        return "hidden"
    if out_inf:
        return "input"
    if in_inf:
        return "output"
    return "fixed"


def roles(model, delta, width_mult, base_mult=1.0):
    """{parameter name: Role} for model against delta (the same builder at another width).
    Raises ValueError for a width-scaled parameter of a layer type muP is not defined for
    here. O(parameters)."""
    m = width_mult / base_mult
    dmods = dict(delta.named_modules())
    out = {}
    for mname, mod in model.named_modules():
        own = list(mod.named_parameters(recurse=False))
        if not own:
            continue
        dmod = dmods.get(mname)
        if dmod is None or type(dmod) is not type(mod):
            raise ValueError("tunepack_mup: module %r is not in the model built at another width; "
                             "the builder must make the same layers at every width" % mname)
        dparams = dict(dmod.named_parameters(recurse=False))
        for pname, p in own:
            full = "%s.%s" % (mname, pname) if mname else pname
            dshape = tuple(dparams[pname].shape)
            inf = tuple(p.shape) != dshape
            if not isinstance(mod, SUPPORTED):
                if inf:
                    raise ValueError(
                        "tunepack_mup: %s (%s) grows with the width, but muP is defined here for "
                        "Linear, Conv, Embedding, LayerNorm and BatchNorm only; keep its shape "
                        "fixed or build it from those layers" % (full, type(mod).__name__))
                out[full] = Role(full, "fixed", 1.0)
                continue
            if isinstance(mod, NORMS) or pname == "bias":
                out[full] = Role(full, "vector" if inf else "fixed", m if inf else 1.0)
            elif isinstance(mod, nn.Embedding):  # (vocabulary, dim): vocabulary is the fan-in
                role = "input" if p.shape[1] != dshape[1] else "fixed"
                out[full] = Role(full, role, m if role == "input" else 1.0)
            else:
                role = _weight_role(tuple(p.shape), dshape)
                out[full] = Role(full, role, 1.0 if role == "fixed" else m)
    return out


def init(model, table, zero_output=False):
    """muP initialisation in place: output weights scaled by 1/sqrt(m) (or zeroed), biases of
    width-scaled layers zeroed, norm gains 1; other weights keep PyTorch's default."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, r in table.items():
            p = params[name]
            if r.role == "output":
                if zero_output:
                    p.zero_()
                else:
                    p.mul_(1.0 / math.sqrt(r.m))
            elif r.role == "vector":
                if name.endswith("bias"):
                    p.zero_()
                else:
                    p.fill_(1.0)
    return model


# learning-rate multiplier per role and optimizer kind, as functions of m
_LR = {
    "adam": {"input": lambda m: 1.0, "hidden": lambda m: 1.0 / m, "output": lambda m: 1.0 / m,
             "vector": lambda m: 1.0, "fixed": lambda m: 1.0},
    "sgd": {"input": lambda m: m, "hidden": lambda m: 1.0, "output": lambda m: 1.0 / m,
            "vector": lambda m: m, "fixed": lambda m: 1.0},
}


def lr_multiplier(role, m, optimizer):
    """The factor on the base learning rate for a parameter of this role (see the table)."""
    kind = "sgd" if optimizer == "sgd" else "adam"
    return _LR[kind][role](m)


def param_groups(model, table, optimizer, lr):
    """Parameter groups with per-layer learning rates (one group per distinct rate, in model
    order); each group also has "mup_roles", the roles it holds."""
    groups = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        r = table[name]
        rate = lr * lr_multiplier(r.role, r.m, optimizer)
        g = groups.setdefault(rate, {"params": [], "lr": rate, "mup_roles": set()})
        g["params"].append(p)
        g["mup_roles"].add(r.role)
    return list(groups.values())


def build(make, width_mult, optimizer="adam", lr=1e-3, base_mult=1.0, zero_output=False,
          **optimizer_args):
    """(model, optimizer): make(width_mult) in muP, with per-layer learning rates. make is
    called once more at width_mult / 2 to learn which dimensions grow (the result is
    discarded). optimizer: adam, adamw or sgd (extra keyword arguments go to it: momentum,
    weight_decay, betas, ...). The random state after build is the one after make(width_mult)
    and the muP initialisation, whatever the delta model drew."""
    if optimizer not in OPTIMIZERS:
        raise ValueError("tunepack_mup: optimizer %r: use one of %s"
                         % (optimizer, ", ".join(sorted(OPTIMIZERS))))
    if not width_mult > 0:
        raise ValueError("tunepack_mup: width_mult must be > 0, got %r" % (width_mult,))
    model = make(width_mult)
    state = torch.get_rng_state()
    delta = make(width_mult / 2)
    torch.set_rng_state(state)
    table = roles(model, delta, width_mult, base_mult)
    del delta
    init(model, table, zero_output=zero_output)
    opt = OPTIMIZERS[optimizer](param_groups(model, table, optimizer, lr), lr=lr,
                                **optimizer_args)
    return model, opt
