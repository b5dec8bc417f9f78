"""PyTorch -> IR: trace a module with ``torch.fx``, read shapes from ``ShapeProp``, map
each FX node to IR nodes and the module's tensors to a payload keyed by node id.

torch is imported lazily (the core works without it).  The IR input's declared shape is
the PER-EXAMPLE shape: with ``batch_dims=k`` the first ``k`` axes of the example input are
batch axes, every torch ``dim`` is translated to a per-example axis, and an operation that
mixes examples (a reduction, concat, softmax or permutation over a batch axis) is refused.
Batch axes are inferred, not assumed (``batch_dims=None``, the default): the leading axes
of the example input marked dynamic (``torch._dynamo.mark_dynamic(x, 0)`` or
``maybe_mark_dynamic``, torch's way to say an axis has no fixed extent) are batch axes;
without marks the example is one example (``batch_dims=0``).  Give a
batch of at least 2 examples: with a batch of 1 a reshape that moves the batch axis cannot
be told from one that keeps it.  Shape arithmetic (``x.view(x.size(0), -1)``) is read from
the propagated shapes, so the graph is specialised to the example's per-example shape.

Mapping is a table lookup: ``_tables`` gives each FX target (function by identity, method
by name, module by class) a canonical name, :data:`FUNCTION_RULES`/:data:`MODULE_RULES`
give each name one rule ``f(conv, n, env, m=None) -> value``, and the network rules of
:mod:`.torch_fx_ops` take precedence for the targets they map.  Every FX node that cannot
be mapped is listed in ONE :class:`UnsupportedOpsError` with its FX name, kind and target.  Numerical notes on the mapping:

* ``Softplus(beta, threshold)``: the IR's softplus is log(1 + e^x) everywhere; torch
  switches to ``x`` when ``beta*x > threshold`` (20).  Above the switch the two functions
  differ by log1p(e^-20)/beta ~ 2.1e-9 (absolute): below half an ulp of binary32 there
  (ulp(20) = 1.9e-6), but visible in float64.  ``beta != 1`` is composed as
  softplus(beta x) / beta (torch's own evaluation).
* ``GELU``: only the exact erf form; ``approximate='tanh'`` is a different function and is
  listed as unsupported.
* ``BatchNorm`` must be in eval mode with running statistics; torch evaluates it as
  ``x*alpha + beta'`` (folded), the IR as ``(x - mean)/sqrt(var + eps)*gamma + beta``, so
  float32 results differ by rounding only.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from ..ops_shape import INTEGER_DTYPES
from ..node import Graph, fmt_shape
from ..optable import OPS
from ..payload import Payload
from .interchange import (Batched, IRBuilder, PendingConst, Unsupported, UnsupportedOpsError,
                          exact_gelu_only, pair_list, require)
from .torch_fx_ops import Refused, getitem_tensor
from .torch_fx_ops import tables as network_tables
from .torch_fx_recurrent import tables as recurrent_tables
from .torch_fx_spatial import tables as spatial_tables


# ------------------------------------------------------------------------------ values
@dataclass
class _Int:
    """A Python int computed from a shape (``x.size(0)``); ``batch`` if it is a batch extent."""
    value: int
    batch: bool = False


@dataclass
class _ShapeTuple:
    dims: tuple


_FAILED = object()


@dataclass
class TorchImport:
    """The result of :func:`import_torch`: the graph, its payload, and the state_dict
    names: ``names[key] = (node_id, param)``; ``ignored`` = state_dict keys with no IR use
    (BatchNorm's ``num_batches_tracked``)."""
    graph: Graph
    payload: Payload
    names: dict = field(default_factory=dict)
    ignored: tuple = ()


def from_torch(module, example_input, *, batch_dims=None):
    """``(Graph, Payload)`` of ``module`` traced at ``example_input`` (see module docs)."""
    r = import_torch(module, example_input, batch_dims=batch_dims)
    return r.graph, r.payload


def _np(t):
    return t.detach().cpu().double().numpy().copy()


def _tables(torch):
    """Canonical names for FX targets (functions by identity, methods by name)."""
    F = torch.nn.functional
    fn = {}

    def put(name, *objs):
        for o in objs:
            if o is not None:
                fn[o] = name

    g = getattr
    put("relu", torch.relu, F.relu)
    put("tanh", torch.tanh, g(F, "tanh", None))
    put("sigmoid", torch.sigmoid, g(F, "sigmoid", None))
    put("exp", torch.exp)
    put("log", torch.log)
    put("abs", torch.abs, operator.abs)
    put("sqrt", torch.sqrt)
    put("sin", torch.sin)
    put("cos", torch.cos)
    put("neg", torch.neg, operator.neg)
    put("gelu", F.gelu, g(torch._C._nn, "gelu", None))
    put("softplus", F.softplus, g(torch._C._nn, "softplus", None))
    put("add", torch.add, operator.add)
    put("sub", torch.sub, operator.sub)
    put("mul", torch.mul, operator.mul)
    put("div", torch.div, operator.truediv)
    put("matmul", torch.matmul, operator.matmul, torch.mm)
    put("max", torch.maximum)
    put("min", torch.minimum)
    put("pow", torch.pow, operator.pow)
    put("sum", torch.sum)
    put("mean", torch.mean)
    put("softmax", torch.softmax, F.softmax)
    put("log_softmax", torch.log_softmax, F.log_softmax)
    put("cat", torch.cat, g(torch, "concat", None), g(torch, "concatenate", None))
    put("flatten", torch.flatten)
    put("reshape", torch.reshape)
    put("permute", torch.permute)
    put("transpose", torch.transpose)
    put("squeeze", torch.squeeze)
    put("unsqueeze", torch.unsqueeze)
    put("identity", F.dropout)
    put("detach", torch.detach)
    put("linear", F.linear)
    put("max_pool2d", F.max_pool2d)
    put("avg_pool2d", F.avg_pool2d)
    put("getattr", getattr)
    put("getitem", operator.getitem)
    put("floordiv", operator.floordiv)
    put("mod", operator.mod)
    methods = {m: m for m in ("relu", "tanh", "sigmoid", "exp", "log", "abs", "sqrt", "sin",
                              "cos", "neg", "add", "sub", "mul", "div", "matmul", "sum",
                              "mean", "softmax", "log_softmax", "flatten", "reshape", "view",
                              "permute", "transpose", "squeeze", "unsqueeze", "size", "pow")}
    methods.update({"t": "transpose", "contiguous": "identity", "clone": "identity",
                    "detach": "detach",
                    "view": "reshape", "maximum": "max", "minimum": "min"})
    nn = torch.nn
    modules = {nn.Linear: "Linear", nn.Conv2d: "Conv2d", nn.BatchNorm1d: "BatchNorm",
               nn.BatchNorm2d: "BatchNorm", nn.LayerNorm: "LayerNorm", nn.ReLU: "relu",
               nn.Tanh: "tanh", nn.Sigmoid: "sigmoid", nn.GELU: "GELU", nn.Softplus: "Softplus",
               nn.Softmax: "Softmax", nn.LogSoftmax: "LogSoftmax", nn.Flatten: "Flatten",
               nn.MaxPool2d: "MaxPool2d", nn.AvgPool2d: "AvgPool2d", nn.Identity: "identity",
               nn.Dropout: "identity", nn.Embedding: "Embedding", nn.GroupNorm: "GroupNorm"}
    return fn, methods, modules


def dynamic_batch_dims(examples) -> int:
    """The number of leading axes marked dynamic on the example inputs (the same for all
    of them); GraphError when a marked axis follows an unmarked one or inputs disagree."""
    found = []
    for k, x in enumerate(examples):
        marked = set(getattr(x, "_dynamo_dynamic_indices", ()) or ()) | \
            set(getattr(x, "_dynamo_weak_dynamic_indices", ()) or ())
        n = 0
        while n in marked:
            n += 1
        if marked - set(range(n)):
            raise GraphError(f"from_torch: example input {k} marks axes {sorted(marked)} "
                             f"dynamic; only leading axes can be batch axes (pass batch_dims)")
        found.append(n)
    if len(set(found)) > 1:
        raise GraphError(f"from_torch: the example inputs mark different numbers of leading "
                         f"dynamic (batch) axes {found}; pass batch_dims")
    return found[0] if found else 0


def import_torch(module, example_input, *, batch_dims=None) -> TorchImport:
    """Trace ``module`` and map it to the IR; the full result with state_dict names."""
    torch = require("torch", "torch")
    fx = require("torch.fx", "torch")
    from torch.fx.passes.shape_prop import ShapeProp

    if not isinstance(module, torch.nn.Module):
        raise GraphError(f"from_torch: expected a torch.nn.Module, got {type(module).__name__}")
    if batch_dims is not None and (isinstance(batch_dims, bool) or
                                   not isinstance(batch_dims, int) or batch_dims < 0):
        raise GraphError(f"from_torch: batch_dims must be a non-negative int or None (infer "
                         f"from dynamic axes), got {batch_dims!r}")
    examples = tuple(example_input) if isinstance(example_input, (tuple, list)) else (example_input,)
    for k, x in enumerate(examples):
        # integer inputs (token ids for nn.Embedding) hold integers, exact in the IR
        if not isinstance(x, torch.Tensor) or x.is_complex() or x.dtype == torch.bool:
            raise GraphError(f"from_torch: example input {k} must be a floating-point or "
                             f"integer tensor, got {type(x).__name__}")
    if batch_dims is None:
        batch_dims = dynamic_batch_dims(examples)
    for k, x in enumerate(examples):
        if x.dim() < batch_dims:
            raise GraphError(f"from_torch: example input {k} has shape {list(x.shape)}, fewer "
                             f"axes than batch_dims={batch_dims}")
    batch = tuple(examples[0].shape[:batch_dims])
    try:
        gm = fx.symbolic_trace(module)
    except Exception as exc:  # torch raises many types for untraceable control flow
        raise GraphError(f"from_torch: torch.fx.symbolic_trace failed: {type(exc).__name__}: "
                         f"{exc}") from None
    try:
        with torch.no_grad():
            # the module itself first: a failure there (wrong rank for BatchNorm, ...) is a
            # cheap, clear error, where ShapeProp would print its whole interpreter trace
            module(*examples)
            ShapeProp(gm).propagate(*examples)
    except Exception as exc:
        raise GraphError(f"from_torch: running the module on the example input failed "
                         f"({type(exc).__name__}: {exc}); if the example carries a batch axis "
                         f"pass batch_dims=1") from None
    conv = _TorchConverter(torch, gm, batch)
    return conv.run()


class _TorchConverter:
    """Maps FX nodes to IR nodes, one at a time, into an :class:`IRBuilder`."""

    def __init__(self, torch, gm, batch):
        self.torch = torch
        self.gm = gm
        self.batch = batch
        self.nb = len(batch)
        self.b = IRBuilder(len(batch))
        self.names: dict = {}
        self.ignored: list = []
        fn, methods, modules = _tables(torch)
        xfn, xmethods, xmodules = network_tables(torch)
        sfn, smethods, smodules = spatial_tables(torch)
        smodules = {**smodules, **recurrent_tables(torch)[2]}
        # FX target -> rule; the network ops' rules take precedence (their GELU also maps
        # approximate='tanh', their Conv/pool modules every dimension); the spatial ones
        # (ConvTranspose, interpolate, InstanceNorm, tril/triu, cumsum, einsum) add to them
        self.fn = {**{t: FUNCTION_RULES[k] for t, k in fn.items()}, **xfn, **sfn}
        self.methods = {**{t: FUNCTION_RULES[k] for t, k in methods.items()}, **xmethods,
                        **smethods}
        self.modules = {**{t: MODULE_RULES[k] for t, k in modules.items()}, **xmodules,
                        **smodules}

    # ---------------------------------------------------------------- node loop
    def run(self) -> TorchImport:
        env = {}
        problems = []
        output = None
        for n in self.gm.graph.nodes:
            if n.op == "output":
                res = n.args[0]
                v = env.get(res) if hasattr(res, "op") else None
                if not isinstance(v, (Batched, PendingConst)):
                    if v is not _FAILED:
                        problems.append(f"{n.name} (output): the model must return one tensor, "
                                        f"got {type(res).__name__}")
                    continue
                output = self.tensor(v).id
                continue
            key = self.key(n)
            args_failed = any(env.get(a) is _FAILED for a in n.all_input_nodes)
            if key is None:
                problems.append(f"{n.name} ({n.op} {self._target_text(n)}): no IR mapping")
                env[n] = _FAILED
                continue
            if args_failed:
                env[n] = _FAILED
                continue
            try:
                env[n] = self.convert(n, key, env)
            except Unsupported as exc:
                problems.append(f"{n.name} ({n.op} {self._target_text(n)}): {exc}")
                env[n] = _FAILED
        if problems:
            raise UnsupportedOpsError("from_torch", problems)
        g, p = self.b.finish(output)
        return TorchImport(g, p, self.names, tuple(self.ignored))

    def _target_text(self, n) -> str:
        t = n.target
        if n.op == "call_module":
            return f"{t} = {type(self.gm.get_submodule(t)).__name__}"
        if callable(t):
            mod = getattr(t, "__module__", None) or ""
            return f"{mod + '.' if mod else ''}{getattr(t, '__name__', repr(t))}"
        return str(t)

    def key(self, n):
        """The rule that maps FX node ``n`` (``f(conv, n, env, m=None) -> value``), looked
        up by node kind and target; None when there is none."""
        if n.op in NODE_RULES:
            return NODE_RULES[n.op]
        if n.op == "call_function":
            try:
                return self.fn.get(n.target)
            except TypeError:          # an unhashable target
                return None
        if n.op == "call_method":
            return self.methods.get(n.target)
        if n.op == "call_module":
            return self.modules.get(type(self.gm.get_submodule(n.target)))
        return None

    # ---------------------------------------------------------------- helpers
    def meta_shape(self, n):
        tm = n.meta.get("tensor_meta")
        if tm is None or not hasattr(tm, "shape"):
            raise Unsupported("shape propagation recorded no single tensor result")
        return tuple(int(d) for d in tm.shape)

    def tensor(self, v) -> Batched:
        if isinstance(v, Batched):
            return v
        if isinstance(v, Refused):
            raise Unsupported(v.why)
        if isinstance(v, PendingConst):
            if v.id is None:
                v.id = self.b.const(_np(v.value))
                if v.name in self._state_keys():
                    self.names[v.name] = (v.id, "value")
            return Batched(v.id, 0)
        if isinstance(v, _Int):                       # x / x.size(1): a per-example extent
            if v.batch:
                raise Unsupported(f"uses a batch extent ({v.value}) as a number: the IR works "
                                  f"per example")
            v = v.value
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return Batched(self.b.const(float(v)), 0)
        raise Unsupported(f"operand {v!r} is not a tensor")

    def _state_keys(self):
        if not hasattr(self, "_keys"):
            self._keys = set(self.gm.state_dict().keys())
        return self._keys

    def out(self, n, nb_val):
        """Full ShapeProp shape of ``n`` -> per-example shape (batch axes checked)."""
        s = self.meta_shape(n)
        if nb_val:
            if s[:nb_val] != self.batch:
                raise Unsupported(f"result shape {fmt_shape(s)} does not keep the batch axes "
                                  f"{fmt_shape(self.batch)} in front")
            return s[nb_val:]
        return s

    def emit(self, n, op, parents, *, params=None, **attrs) -> Batched:
        """IR node ``op`` for FX node ``n``, its shape checked against ShapeProp's."""
        nbv = max(p.nb for p in parents) if parents else 0
        return self.b.apply(op, parents, out_shape=self.out(n, nbv), params=params, **attrs)

    def axis(self, dim, t: Batched, what="dim") -> int:
        """torch ``dim`` (an int, or a size read off a shape) as a per-example axis."""
        return self.b.axis(_plain(dim), t, what)

    def arg(self, n, env, i, name, default=None):
        if len(n.args) > i:
            a = n.args[i]
        else:
            a = n.kwargs.get(name, default)
        return self.val(a, env)

    def val(self, a, env):
        if hasattr(a, "op") and hasattr(a, "meta"):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.val(t, env) for t in a)
        return a

    # ---------------------------------------------------------------- converters
    def convert(self, n, rule, env):
        m = self.gm.get_submodule(n.target) if n.op == "call_module" else None
        return rule(self, n, env, m)

    def no_extra(self, n, allowed):
        bad = {k: v for k, v in n.kwargs.items() if k not in allowed}
        if bad:
            raise Unsupported(f"unsupported keyword arguments {bad}")

    def module_params(self, prefix: str, **fields) -> dict:
        """Payload of the node about to be added: ``field=(attribute, tensor)`` for each
        module tensor that is not None, each recorded under its state_dict key
        ``prefix + attribute`` (so checkpoints load by name)."""
        i = len(self.b.nodes)
        params = {}
        for name, (attr, tensor) in fields.items():
            if tensor is not None:
                params[name] = _np(tensor)
                self.names[prefix + attr] = (i, name)
        return params

    def softplus(self, n, x, beta, threshold):
        # threshold only switches torch to the identity; see the module docstring.
        if beta == 1:
            return self.emit(n, "softplus", [x])
        s = self.meta_shape(n)[x.nb:]
        c = self.b.const(float(beta))
        a = self.b.add("mul", [x.id, c], out_shape=s)
        y = self.b.add("softplus", [a], out_shape=s)
        return Batched(self.b.add("div", [y, c], out_shape=s), x.nb)

    def flatten(self, n, x, start, end):
        rank = self.b.rank(x)
        if rank == 0:
            return self.emit(n, "reshape", [x], shape=[1])
        a = self.axis(start, x, "start_dim")
        e = self.axis(end, x, "end_dim")
        return self.emit(n, "flatten", [x], start_axis=a, end_axis=e)

    def pool(self, n, x, key, k, stride, pad, dil, ceil, ret_idx, include_pad, divisor):
        if ceil:
            raise Unsupported("ceil_mode=True (the IR floors the output size)")
        if ret_idx:
            raise Unsupported("return_indices=True")
        attrs = dict(kernel_size=pair_list(k), stride=pair_list(stride if stride else k),
                     padding=pair_list(pad))
        if key == "MaxPool2d":
            attrs["dilation"] = pair_list(dil)
            return self.emit(n, "max_pool2d", [x], **attrs)
        if divisor is not None:
            raise Unsupported("divisor_override is not in the IR")
        if not include_pad and any(attrs["padding"]):
            raise Unsupported("count_include_pad=False with padding (the IR divides by the "
                              "full window)")
        return self.emit(n, "avg_pool2d", [x], **attrs)

    def record_name(self, p: PendingConst, node_id, param):
        if p.name in self._state_keys():
            self.names[p.name] = (node_id, param)

    def shape_tuple(self, obj):
        if isinstance(obj, PendingConst):
            return _ShapeTuple(tuple(_Int(int(d)) for d in obj.value.shape))
        s = self.b.shape(obj.id)
        return _ShapeTuple(tuple(_Int(int(d), True) for d in self.batch[:obj.nb]) +
                           tuple(_Int(int(d)) for d in s))


def _int_arith(key, a, b):
    """Python arithmetic on sizes read off shapes; a result involving a batch extent stays
    marked as one (using it as a tensor is refused)."""
    batch = any(isinstance(t, _Int) and t.batch for t in (a, b))
    x, y = _plain(a), _plain(b)
    r = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
         "div": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
         "pow": operator.pow}[key](x, y)
    return _Int(r, batch) if isinstance(r, int) else (r if not batch else _Int(r, True))


def _plain(d):
    """A dim argument as given, with a size read off a shape (``x.size(1)``) as its int."""
    return d.value if isinstance(d, _Int) else d


def _check_unsq(d, rank, nb):
    d = _plain(d)
    dd = d + rank if d < 0 else d
    if dd < nb:
        raise Unsupported(f"dim={d} inserts an axis before a batch axis")


# ------------------------------------------------------------------ the rule tables
# One rule per canonical op name (``_tables`` maps FX targets to these names):
# ``f(conv, n, env, m=None) -> value``, the shape of :mod:`.torch_fx_ops`'s mappings.
def _x(conv, n, env):
    """The first argument as a tensor."""
    return conv.tensor(conv.val(n.args[0], env))


def _placeholder(conv, n, env, m=None):
    s = conv.meta_shape(n)
    if s[:conv.nb] != conv.batch:
        raise Unsupported(f"input shape {fmt_shape(s)} does not start with the first "
                          f"input's batch axes {fmt_shape(conv.batch)}")
    # an integer example (token ids) makes an integer input: the lab's jobs hold it exact
    dtype = str(getattr(n.meta.get("tensor_meta"), "dtype", "float")).replace("torch.", "")
    attrs = {"dtype": dtype} if dtype in INTEGER_DTYPES else {}
    return Batched(conv.b.add("input", [], out_shape=s[conv.nb:], **attrs), conv.nb)


def _get_attr(conv, n, env, m=None):
    obj = conv.gm
    for part in n.target.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, conv.torch.Tensor):
        raise Unsupported("get_attr of a non-tensor")
    return PendingConst(obj, n.target)


NODE_RULES = {"placeholder": _placeholder, "get_attr": _get_attr}


# ---------------------------------------------------- functions and methods
def _shape_arith(key, tensor_rule):
    """``key`` on two sizes read off shapes (``d // heads``) is Python arithmetic; on
    tensors it is ``tensor_rule``."""
    def f(conv, n, env, m=None):
        if len(n.args) == 2:
            a, b = conv.val(n.args[0], env), conv.val(n.args[1], env)
            if all(isinstance(t, (_Int, int, float)) and not isinstance(t, bool) for t in (a, b)):
                return _int_arith(key, a, b)
        return tensor_rule(conv, n, env, m)
    return f


def _no_tensor_mapping(key):
    def f(conv, n, env, m=None):
        raise Unsupported(f"no IR mapping for {key} of tensors")
    return f


def _getattr(conv, n, env, m=None):
    obj = conv.val(n.args[0], env)
    if isinstance(obj, (Batched, PendingConst)) and n.args[1] == "shape":
        return conv.shape_tuple(obj)
    raise Unsupported(f"getattr {n.args[1]!r} of a tensor")


def _getitem(conv, n, env, m=None):
    obj = conv.val(n.args[0], env)
    if isinstance(obj, _ShapeTuple):
        return obj.dims[n.args[1]] if isinstance(n.args[1], int) else \
            _ShapeTuple(obj.dims[n.args[1]])
    if isinstance(obj, tuple) and isinstance(n.args[1], int):   # chunk/split/MHA
        return obj[n.args[1]]
    if isinstance(obj, (Batched, PendingConst)) and "slice" in OPS:
        idx = conv.val(n.args[1], env)
        return getitem_tensor(conv, n, conv.tensor(obj), idx)
    raise Unsupported("indexing/slicing a tensor (no gather op in the IR)")


def _size(conv, n, env, m=None):
    st = conv.shape_tuple(conv.val(n.args[0], env))
    d = conv.arg(n, env, 1, "dim")
    return st if d is None else st.dims[d]


def _identity(conv, n, env, m=None):
    if n.kwargs.get("training", n.args[2] if len(n.args) > 2 else True) and \
            n.op == "call_function":
        raise Unsupported("dropout with training=True")
    return _x(conv, n, env)


def _unary(key):
    def f(conv, n, env, m=None):
        conv.no_extra(n, ("inplace",))
        return conv.emit(n, key, [_x(conv, n, env)])
    return f


def _gelu(conv, n, env, m=None):
    exact_gelu_only(conv.arg(n, env, 1, "approximate", "none"), "gelu")
    return conv.emit(n, "gelu", [_x(conv, n, env)])


def _softplus(conv, n, env, m=None):
    return conv.softplus(n, _x(conv, n, env), conv.arg(n, env, 1, "beta", 1),
                         conv.arg(n, env, 2, "threshold", 20))


def _binary(key):
    def f(conv, n, env, m=None):
        a = conv.val(n.args[0], env)
        b = conv.val(n.args[1] if len(n.args) > 1 else n.kwargs["other"], env)
        alpha = n.kwargs.get("alpha", 1)
        if alpha != 1:
            raise Unsupported(f"alpha={alpha} (compose it with a mul)")
        if n.kwargs.get("rounding_mode") is not None:
            raise Unsupported(f"rounding_mode={n.kwargs['rounding_mode']!r}")
        return conv.emit(n, key, [conv.tensor(a), conv.tensor(b)])
    return f


def _pow(conv, n, env, m=None):
    x, e = conv.val(n.args[0], env), conv.val(n.args[1], env)
    if e == 2:
        t = conv.tensor(x)
        return conv.emit(n, "mul", [t, t])
    if e == 0.5:
        return conv.emit(n, "sqrt", [conv.tensor(x)])
    if "pow" not in OPS:
        raise Unsupported(f"pow with exponent {e!r} (only 2 and 0.5 map to IR ops)")
    return conv.emit(n, "pow", [conv.tensor(x), conv.tensor(e)])


def _reduce(irop):
    def f(conv, n, env, m=None):
        x = _x(conv, n, env)
        dim = conv.arg(n, env, 1, "dim")
        keep = bool(conv.arg(n, env, 2, "keepdim", False))
        if n.kwargs.get("dtype") is not None:
            raise Unsupported("dtype= conversion")
        if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
            if x.nb:         # before ShapeProp's shape check, which would fail first
                raise Unsupported("reduces over all axes, batch axes included (give dim=)")
            dims = None
        else:
            dims = [_plain(d) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
        return conv.b.reduce(irop, x, dims, keep, out_shape=conv.out(n, x.nb))
    return f


def _softmax(key):
    def f(conv, n, env, m=None):
        x = _x(conv, n, env)
        dim = conv.arg(n, env, 1, "dim")
        if n.kwargs.get("dtype") is not None:
            raise Unsupported("dtype= conversion")
        if dim is None:
            raise Unsupported("dim=None (implicit dim) is ambiguous; give dim")
        return conv.emit(n, key, [x], axis=conv.axis(dim, x))
    return f


def _cat(conv, n, env, m=None):
    parts = [conv.tensor(t) for t in conv.val(n.args[0], env)]
    dim = _plain(conv.arg(n, env, 1, "dim", 0))
    return conv.b.concat(parts, dim, out_shape=conv.out(n, max(p.nb for p in parts)))


def _flatten(conv, n, env, m=None):
    return conv.flatten(n, _x(conv, n, env), conv.arg(n, env, 1, "start_dim", 0),
                        conv.arg(n, env, 2, "end_dim", -1))


def _reshape(key):
    """reshape, squeeze, unsqueeze: the IR reshape to the propagated result shape."""
    def f(conv, n, env, m=None):
        x = _x(conv, n, env)
        if key != "reshape" and x.nb:
            d = conv.arg(n, env, 1, "dim")
            if d is None:
                raise Unsupported("squeeze() of all axes may drop a batch axis; give dim")
            rank = conv.b.rank(x) + (1 if key == "unsqueeze" else 0)
            for dd in (d if isinstance(d, (list, tuple)) else [d]):
                if key == "squeeze":
                    conv.axis(dd, x)
                else:
                    _check_unsq(dd, rank, x.nb)
        # the per-example target is the propagated result shape without batch axes
        # (a batch-preserving row-major reshape acts on each example's block alone)
        s = conv.out(n, x.nb)
        return conv.emit(n, "reshape", [x], shape=list(s))
    return f


def _permute_dims(conv, n, env, rank):
    dims = [conv.val(t, env) for t in n.args[1:]] or list(n.kwargs.get("dims", ()))
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = list(dims[0])
    return [d + rank if d < 0 else d for d in dims]


def _transpose_dims(conv, n, env, rank):
    if len(n.args) == 1:           # .t()
        d0, d1 = (0, 1) if rank == 2 else (0, 0)
    else:
        d0, d1 = conv.arg(n, env, 1, "dim0"), conv.arg(n, env, 2, "dim1")
    d0, d1 = (d0 + rank if d0 < 0 else d0), (d1 + rank if d1 < 0 else d1)
    dims = list(range(rank))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return dims


def _permute(dims_of):
    def f(conv, n, env, m=None):
        x = _x(conv, n, env)
        rank = conv.b.rank(x)
        dims = dims_of(conv, n, env, rank)
        if sorted(dims) != list(range(rank)):
            raise Unsupported(f"dims {dims} are not a permutation of {rank} axes")
        return conv.b.permute(x, dims, out_shape=conv.out(n, x.nb))
    return f


def _linear(conv, n, env, m=None):
    x = _x(conv, n, env)
    w = conv.arg(n, env, 1, "weight")
    bias = conv.arg(n, env, 2, "bias")
    if not isinstance(w, PendingConst) or not (bias is None or isinstance(bias, PendingConst)):
        raise Unsupported("F.linear with a computed weight (give module tensors)")
    i = len(conv.b.nodes)
    params = {"W": _np(w.value)}
    conv.record_name(w, i, "W")
    if bias is not None:
        params["b"] = _np(bias.value)
        conv.record_name(bias, i, "b")
    return conv.emit(n, "linear", [x], params=params)


def _max_pool2d(conv, n, env, m=None):
    return conv.pool(n, _x(conv, n, env), "MaxPool2d", conv.arg(n, env, 1, "kernel_size"),
                     conv.arg(n, env, 2, "stride"), conv.arg(n, env, 3, "padding", 0),
                     conv.arg(n, env, 4, "dilation", 1),
                     conv.arg(n, env, 5, "ceil_mode", False),
                     conv.arg(n, env, 6, "return_indices", False), True, None)


def _avg_pool2d(conv, n, env, m=None):
    return conv.pool(n, _x(conv, n, env), "AvgPool2d", conv.arg(n, env, 1, "kernel_size"),
                     conv.arg(n, env, 2, "stride"), conv.arg(n, env, 3, "padding", 0), 1,
                     conv.arg(n, env, 4, "ceil_mode", False), False,
                     conv.arg(n, env, 5, "count_include_pad", True),
                     conv.arg(n, env, 6, "divisor_override"))


#: canonical function/method name -> rule
FUNCTION_RULES = {
    **{k: _unary(k) for k in ("relu", "tanh", "sigmoid", "exp", "log", "abs", "sqrt", "sin",
                              "cos", "neg", "detach")},
    **{k: _shape_arith(k, _binary(k)) for k in ("add", "sub", "mul", "div")},
    **{k: _binary(k) for k in ("matmul", "max", "min")},
    **{k: _shape_arith(k, _no_tensor_mapping(k)) for k in ("floordiv", "mod")},
    "pow": _shape_arith("pow", _pow),
    "getattr": _getattr, "getitem": _getitem, "size": _size, "identity": _identity,
    "gelu": _gelu, "softplus": _softplus,
    "sum": _reduce("reduce_sum"), "mean": _reduce("reduce_mean"),
    "softmax": _softmax("softmax"), "log_softmax": _softmax("log_softmax"),
    "cat": _cat, "flatten": _flatten,
    **{k: _reshape(k) for k in ("reshape", "squeeze", "unsqueeze")},
    "permute": _permute(_permute_dims), "transpose": _permute(_transpose_dims),
    "linear": _linear, "max_pool2d": _max_pool2d, "avg_pool2d": _avg_pool2d,
}


# ------------------------------------------------------------------------- modules
def _m_activation(key):
    def f(conv, n, env, m):
        return conv.emit(n, key, [_x(conv, n, env)])
    return f


def _m_identity(conv, n, env, m):
    return _x(conv, n, env)


def _m_gelu(conv, n, env, m):
    x = _x(conv, n, env)
    exact_gelu_only(m.approximate, "GELU")
    return conv.emit(n, "gelu", [x])


def _m_softplus(conv, n, env, m):
    return conv.softplus(n, _x(conv, n, env), m.beta, m.threshold)


def _m_softmax(irop):
    def f(conv, n, env, m):
        x = _x(conv, n, env)
        if m.dim is None:
            raise Unsupported("dim=None (implicit dim) is ambiguous; give dim")
        return conv.emit(n, irop, [x], axis=conv.axis(m.dim, x))
    return f


def _m_flatten(conv, n, env, m):
    return conv.flatten(n, _x(conv, n, env), m.start_dim, m.end_dim)


def _m_linear(conv, n, env, m):
    x = _x(conv, n, env)
    params = conv.module_params(n.target + ".", W=("weight", m.weight), b=("bias", m.bias))
    return conv.emit(n, "linear", [x], params=params)


def _m_conv2d(conv, n, env, m):
    x = _x(conv, n, env)
    if m.padding_mode != "zeros":
        raise Unsupported(f"padding_mode={m.padding_mode!r} (the IR pads with zeros)")
    pad = m.padding
    if isinstance(pad, str):
        if pad == "valid":
            pad = (0, 0)
        else:   # 'same' with stride 1: torch pads (d*(k-1))//2 before, rest after
            tot = [d * (k - 1) for d, k in zip(m.dilation, m.kernel_size)]
            if any(t % 2 for t in tot):
                raise Unsupported("padding='same' with an even kernel extent pads "
                                  "asymmetrically; the IR pads symmetrically")
            pad = tuple(t // 2 for t in tot)
    params = conv.module_params(n.target + ".", weight=("weight", m.weight),
                                bias=("bias", m.bias))
    return conv.emit(n, "conv2d", [x], params=params, kernel_size=list(m.kernel_size),
                     out_channels=m.out_channels, stride=list(m.stride),
                     padding=list(pad), dilation=list(m.dilation), groups=m.groups)


def _m_batchnorm(conv, n, env, m):
    x = _x(conv, n, env)
    pre = n.target + "."
    if m.training:
        raise Unsupported("BatchNorm in training mode (batch statistics); call "
                          "module.eval() first")
    if m.running_mean is None:
        raise Unsupported("BatchNorm without running statistics "
                          "(track_running_stats=False)")
    params = conv.module_params(pre, mean=("running_mean", m.running_mean),
                                var=("running_var", m.running_var),
                                gamma=("weight", m.weight), beta=("bias", m.bias))
    params["eps"] = np.float64(m.eps)
    if getattr(m, "num_batches_tracked", None) is not None:
        conv.ignored.append(pre + "num_batches_tracked")
    return conv.emit(n, "batchnorm_eval", [x], params=params, axis=conv.axis(1, x))


def _m_layernorm(conv, n, env, m):
    x = _x(conv, n, env)
    k = len(m.normalized_shape)
    rank = conv.b.rank(x)
    params = conv.module_params(n.target + ".", gamma=("weight", m.weight),
                                beta=("bias", m.bias))
    params["eps"] = np.float64(m.eps)
    return conv.emit(n, "layernorm", [x], params=params, axis=conv.axis(rank - k, x))


def _m_embedding(conv, n, env, m):
    """nn.Embedding: its weight a ``const`` node, the ids the IR's ``take`` (rows)."""
    ids = _x(conv, n, env)
    if m.max_norm is not None:
        raise Unsupported("max_norm (renormalizes the looked-up rows in place)")
    params = conv.module_params(n.target + ".", value=("weight", m.weight))
    w = Batched(conv.b.add("const", [], out_shape=tuple(m.weight.shape), params=params), 0)
    return conv.emit(n, "take", [w, ids], axis=0)


def _m_groupnorm(conv, n, env, m):
    """nn.GroupNorm: per group, ``(x - mean) / sqrt(var + eps)`` (biased variance of
    ``x - mean``), then the per-channel affine map; composed from IR ops."""
    x = _x(conv, n, env)
    s = list(conv.b.shape(x.id))
    ca = 1 - x.nb                        # the channel axis of the per-example value
    if ca < 0 or len(s) < ca + 1:
        raise Unsupported(f"GroupNorm of a value of per-example shape {s}")
    G = m.num_groups
    lead, rest = s[:ca], s[ca:]
    size = int(np.prod(rest, dtype=np.int64))
    v = conv.b.apply("reshape", [x], shape=lead + [G, size // G])
    mean = conv.b.apply("reduce_mean", [v], axis=ca + 1, keepdims=True)
    d = conv.b.apply("sub", [v, mean])
    var = conv.b.apply("reduce_mean", [conv.b.apply("mul", [d, d])], axis=ca + 1,
                       keepdims=True)
    eps = conv.tensor(PendingConst(conv.torch.tensor(float(m.eps), dtype=conv.torch.float64),
                                   "eps"))
    y = conv.b.apply("div", [d, conv.b.apply("sqrt", [conv.b.apply("add", [var, eps])])])
    y = conv.b.apply("reshape", [y], shape=s)
    if m.affine:
        tail = [1] * (len(rest) - 1)
        for attr, op in (("weight", "mul"), ("bias", "add")):
            p = PendingConst(getattr(m, attr).detach().reshape([-1] + tail),
                             n.target + "." + attr)
            y = conv.b.apply(op, [y, conv.tensor(p)])
    return conv.emit(n, "reshape", [y], shape=s)


def _m_pool(key):
    def f(conv, n, env, m):
        return conv.pool(n, _x(conv, n, env), key, m.kernel_size, m.stride, m.padding,
                         getattr(m, "dilation", 1), m.ceil_mode,
                         getattr(m, "return_indices", False),
                         getattr(m, "count_include_pad", True),
                         getattr(m, "divisor_override", None))
    return f


#: canonical module name -> rule
MODULE_RULES = {
    **{k: _m_activation(k) for k in ("relu", "tanh", "sigmoid")},
    "identity": _m_identity, "GELU": _m_gelu, "Softplus": _m_softplus,
    "Softmax": _m_softmax("softmax"), "LogSoftmax": _m_softmax("log_softmax"),
    "Flatten": _m_flatten, "Linear": _m_linear, "Conv2d": _m_conv2d,
    "BatchNorm": _m_batchnorm, "LayerNorm": _m_layernorm, "Embedding": _m_embedding,
    "GroupNorm": _m_groupnorm,
    "MaxPool2d": _m_pool("MaxPool2d"), "AvgPool2d": _m_pool("AvgPool2d"),
}
