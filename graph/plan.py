"""Kernel planning: capsules, providers, policies, plans and bindings.

A :class:`Capsule` is metadata only — which provider implements which backend op on which
device, how far it is trusted, who owns its reverse rule and in which order it reduces.
Four separate questions, four separate steps (the seed's "registered != selectable !=
executable != proved"):

* registered — :func:`register_capsule` put it in the registry;
* selectable — :func:`plan` found it admissible under a :class:`Policy` (provider listed,
  device, trust level, number format);
* executable — :func:`bind` found its provider available and got a callable;
* proved — outside this module: the tests compare each capsule against the reference.

Planning never falls back silently: a node with no admissible capsule is a
:class:`PlanError` naming the node, op, device and what is missing.  ``input``, ``const``
and ``detach`` need no runtime work (their op record has no capsule) and are not planned.

The reference provider is built here from the op table: one CPU capsule per backend op
(``OpRecord.capsule``), running the op's forward rule in the policy's context.  Other
providers register from their own packages (``cuda_kernels.provider``), found lazily by
:func:`load_providers`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Optional

from scalarlab import scalars
from scalarlab.scalars.errors import ContextError, ScalarLabError

from .errors import GraphError
from .fold import denote_all, node_args, rule_for  # noqa: F401  (node_args: for provider comparisons)
from .node import fmt_shape
from .optable import OPS

TRUST_LEVELS = ("checked", "sampled", "trusted")   # strongest first
DEVICES = ("cpu", "cuda")
PROVIDER_MODULES = ("scalarlab.cuda_kernels.provider",)


class PlanError(ScalarLabError):
    """A plan or binding cannot be made: no admissible capsule, unknown or unavailable
    provider, bad policy.  Deliberately not a GraphError: the graph is fine, the backend
    boundary is not."""


@dataclass(frozen=True)
class Capsule:
    """One kernel contract.  ``op`` is the backend op (the suffix of the op table's
    reference capsule name: the IR's ``sum`` and ``reduce_sum`` are both ``reduce_sum``).

    ``trust``: ``checked`` (bit-compared with the reference in the tests), ``sampled``
    (compared within a documented ULP bound on sampled inputs), ``trusted`` (taken on
    faith).  ``reduction``: ``n/a``, a named order (``sequential``, ``tree(256)``) or
    ``context`` (whatever the run's scalar context does).  ``fmt``: the context the capsule
    computes in, ``*`` for any.
    """

    name: str
    op: str
    provider: str
    device: str
    trust: str = "checked"
    vjp: str = "tape"
    reduction: str = "n/a"
    fmt: str = "*"
    note: str = ""

    def reduction_in(self, ctx) -> str:
        """The reduction order actually used when running in ``ctx`` (``+fma``: the
        context's dot products round once per multiply-add)."""
        if self.reduction != "context":
            return self.reduction
        red = str(ctx.reduction)
        if is_dot(self.op) and ctx.fma_dot:
            red += "+fma"
        return red

    def line(self, op: Optional[str] = None, ctx=None) -> str:
        """The ``--show-backend`` line, e.g.
        ``relu: reference.relu provider=reference trust=checked vjp=tape reduction=n/a``."""
        red = self.reduction if ctx is None else self.reduction_in(ctx)
        return (f"{op or self.op}: {self.name} provider={self.provider} trust={self.trust} "
                f"vjp={self.vjp} reduction={red}")


@dataclass(frozen=True)
class Provider:
    """A kernel provider.  ``availability()`` returns None when it can run here, else the
    reason it cannot; ``binder(capsule, graph_op, ctx)`` returns a callable
    ``f(args, attrs, nb) -> value`` with the op table's forward calling convention."""

    name: str
    device: str
    availability: Callable[[], Optional[str]]
    binder: Callable
    description: str = ""


_PROVIDERS: dict[str, Provider] = {}
_CAPSULES: dict[str, Capsule] = {}


def register_provider(p: Provider) -> Provider:
    if p.device not in DEVICES:
        raise ValueError(f"provider {p.name}: unknown device {p.device!r}")
    _PROVIDERS[p.name] = p
    return p


def register_capsule(c: Capsule) -> Capsule:
    if c.trust not in TRUST_LEVELS:
        raise ValueError(f"capsule {c.name}: trust must be one of {TRUST_LEVELS}, got {c.trust!r}")
    if c.device not in DEVICES:
        raise ValueError(f"capsule {c.name}: unknown device {c.device!r}")
    old = _CAPSULES.get(c.name)
    if old is not None and old != c:
        raise ValueError(f"capsule {c.name} registered twice with different contracts")
    _CAPSULES[c.name] = c
    return c


def providers() -> dict:
    load_providers()
    return dict(_PROVIDERS)


def capsules(op: Optional[str] = None, provider: Optional[str] = None) -> list:
    """Registered capsules, optionally for one backend op and/or provider (sorted by name)."""
    load_providers()
    return sorted((c for c in _CAPSULES.values()
                   if (op is None or c.op == op) and (provider is None or c.provider == provider)),
                  key=lambda c: c.name)


def get_capsule(name: str) -> Capsule:
    load_providers()
    try:
        return _CAPSULES[name]
    except KeyError:
        raise PlanError(f"unknown capsule {name!r}") from None


# --------------------------------------------------------------- the reference provider
def backend_op(op: str) -> Optional[str]:
    """The backend op an IR op is planned as (None: no runtime work)."""
    rec = OPS.get(op)
    if rec is None or rec.capsule is None:
        return None
    return rec.capsule.split(".", 1)[1]


def _records_of(bop: str) -> list:
    """The op records planned as backend op ``bop`` (reshape and flatten share one)."""
    return [rec for rec in OPS.values() if rec.capsule is not None
            and rec.capsule.split(".", 1)[1] == bop]


def is_dot(bop: str) -> bool:
    """Does backend op ``bop`` sum dot products (``OpRecord.dot``)?"""
    return any(rec.dot for rec in _records_of(bop))


def reduces(bop: str) -> bool:
    """Does backend op ``bop`` sum, so that its order matters (``OpRecord.reduces``)?"""
    return any(rec.reduces for rec in _records_of(bop))


def _reference_binder(capsule: Capsule, graph_op: str, ctx):
    # the rule the fold runs in ctx (an op's own interval rule in interval contexts)
    rule = rule_for(OPS[graph_op], ctx)

    def run(args, attrs, nb):
        return rule(ctx, args, attrs, nb)
    return run


def _register_reference() -> None:
    register_provider(Provider("reference", "cpu", lambda: None, _reference_binder,
                               "the op table's forward rules in the policy's scalar context"))
    for name, rec in sorted(OPS.items()):
        if rec.capsule is None:
            continue
        prov, bop = rec.capsule.split(".", 1)
        if prov != "reference" or rec.capsule in _CAPSULES:   # shared: reshape/flatten
            continue
        register_capsule(Capsule(rec.capsule, bop, "reference", "cpu", trust="checked",
                                 vjp="tape", reduction="context" if reduces(bop) else "n/a",
                                 fmt="*"))


_LOADED = False


def load_providers() -> None:
    """Register the reference provider and import every provider package (once)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    _register_reference()
    for mod in PROVIDER_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod and not mod.startswith(str(exc.name)):
                raise


# ------------------------------------------------------------------------------ policy
@dataclass(frozen=True)
class Policy:
    """What a plan may use: ``device`` (cpu|cuda), ``providers`` in order of preference,
    the weakest acceptable ``trust`` level, and the scalar ``context`` the run computes in."""

    device: str = "cpu"
    providers: tuple = ("reference",)
    trust: str = "trusted"
    context: str = "binary32"

    def __post_init__(self):
        if isinstance(self.providers, str):
            object.__setattr__(self, "providers", (self.providers,))
        else:
            object.__setattr__(self, "providers", tuple(self.providers))

    def accepts_trust(self, trust: str) -> bool:
        return TRUST_LEVELS.index(trust) <= TRUST_LEVELS.index(self.trust)


DEFAULT_PROVIDERS = {"cpu": ("reference",), "cuda": ("numba_cuda",)}


def default_policy(device: str = "cpu", context: str = "binary32") -> Policy:
    """The policy ``--device`` selects: the reference on cpu, numba-cuda on cuda."""
    if device not in DEFAULT_PROVIDERS:
        raise PlanError(f"unknown device {device!r}; known devices: {', '.join(DEVICES)}")
    return Policy(device=device, providers=DEFAULT_PROVIDERS[device], context=context)


def _fmt_ok(capsule: Capsule, context: str) -> bool:
    if capsule.fmt == "*":
        return True
    return context in capsule.fmt.split("|")


def _check_policy(policy: Policy) -> None:
    if not isinstance(policy, Policy):
        raise PlanError(f"plan: expected a Policy, got {type(policy).__name__}")
    if policy.device not in DEVICES:
        raise PlanError(f"plan: policy device {policy.device!r} is unknown; known devices: "
                        f"{', '.join(DEVICES)}")
    if policy.trust not in TRUST_LEVELS:
        raise PlanError(f"plan: policy trust {policy.trust!r} is unknown; levels: "
                        f"{', '.join(TRUST_LEVELS)}")
    if not policy.providers:
        raise PlanError("plan: policy lists no provider")
    for p in policy.providers:
        if p not in _PROVIDERS:
            raise PlanError(f"plan: policy asks for provider {p!r}, which is not registered; "
                            f"registered providers: {', '.join(sorted(_PROVIDERS))}")
        if _PROVIDERS[p].device != policy.device:
            raise PlanError(f"plan: policy asks for provider {p!r} on device {policy.device}, "
                            f"but {p} runs on {_PROVIDERS[p].device}")
    try:
        scalars.get(policy.context)
    except ContextError as exc:
        raise PlanError(f"plan: policy context: {exc}") from None


# -------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class PlanEntry:
    node_id: int
    op: str              # the IR op
    capsule: Capsule


@dataclass(frozen=True)
class KernelPlan:
    """The selected capsule of every runtime node, in node order (node identity kept)."""

    entries: tuple
    policy: Policy
    n_nodes: int = 0

    def node_ids(self) -> list:
        return [e.node_id for e in self.entries]

    def capsule_names(self) -> list:
        return [e.capsule.name for e in self.entries]

    def pairs(self) -> tuple:
        """``([1, 2, 3, 4, 5], ["reference.linear", ...])``, the seed's form."""
        return self.node_ids(), self.capsule_names()

    def __iter__(self):
        return iter(self.entries)

    def __len__(self):
        return len(self.entries)


def _select(node_id: int, op: str, bop: str, policy: Policy) -> Capsule:
    cands = [c for c in _CAPSULES.values() if c.op == bop]
    for prov in policy.providers:
        mine = [c for c in cands if c.provider == prov]
        for c in sorted(mine, key=lambda c: (TRUST_LEVELS.index(c.trust), c.name)):
            if c.device == policy.device and policy.accepts_trust(c.trust) \
                    and _fmt_ok(c, policy.context):
                return c
    # Say precisely what is missing.
    mine = [c for c in cands if c.provider in policy.providers]
    if not mine:
        why = f"no capsule for backend op {bop!r} from provider(s) {', '.join(policy.providers)}"
    else:
        reasons = []
        for c in mine:
            r = []
            if c.device != policy.device:
                r.append(f"device {c.device}")
            if not policy.accepts_trust(c.trust):
                r.append(f"trust {c.trust} is weaker than the policy's {policy.trust}")
            if not _fmt_ok(c, policy.context):
                r.append(f"computes in {c.fmt}, not {policy.context}")
            reasons.append(f"{c.name} ({'; '.join(r)})")
        why = "no admissible capsule: " + ", ".join(reasons)
    others = [c.name for c in cands if c.provider not in policy.providers]
    extra = f"; registered elsewhere: {', '.join(sorted(others))}" if others else ""
    raise PlanError(f"plan: node {node_id} (op {op}) on device {policy.device}: {why}{extra}")


def plan(graph, policy: Optional[Policy] = None) -> KernelPlan:
    """Select one capsule per runtime node, or fail naming the node and what is missing.

    Only the op tags are read (the graph need not have a payload); an unknown op is a
    GraphError, as in validation, everything about the backend is a PlanError.
    """
    load_providers()
    policy = policy or Policy()
    _check_policy(policy)
    entries = []
    for node in graph.nodes:
        op = node.kind.op
        if op not in OPS:
            raise GraphError(f"plan: node {node.id}: unknown op {op!r}")
        bop = backend_op(op)
        if bop is None:
            continue
        entries.append(PlanEntry(node.id, op, _select(node.id, op, bop, policy)))
    return KernelPlan(tuple(entries), policy, len(graph.nodes))


# -------------------------------------------------------------------------------- bind
@dataclass
class BoundPlan:
    """A plan whose capsules have callables: ``kernels[node_id](args, attrs, nb)``."""

    plan: KernelPlan
    ctx: object
    kernels: dict = field(default_factory=dict)

    def lines(self) -> list:
        """One ``--show-backend`` line per IR op, the first time it is selected."""
        seen, out = set(), []
        for e in self.plan.entries:
            if e.op not in seen:
                seen.add(e.op)
                out.append(e.capsule.line(e.op, self.ctx))
        return out


def bind(kplan: KernelPlan) -> BoundPlan:
    """Callables for every planned node; an unavailable provider is a PlanError saying why."""
    load_providers()
    ctx = scalars.get(kplan.policy.context)
    bound = BoundPlan(kplan, ctx)
    checked: dict = {}
    for e in kplan.entries:
        prov = _PROVIDERS.get(e.capsule.provider)
        if prov is None:
            raise PlanError(f"bind: node {e.node_id} (op {e.op}): provider "
                            f"{e.capsule.provider!r} of {e.capsule.name} is not registered")
        if prov.name not in checked:
            checked[prov.name] = prov.availability()
        why = checked[prov.name]
        if why is not None:
            raise PlanError(f"bind: node {e.node_id} (op {e.op}): {e.capsule.name} cannot run: "
                            f"provider {prov.name} is unavailable: {why}")
        bound.kernels[e.node_id] = prov.binder(e.capsule, e.op, ctx)
    return bound


# ----------------------------------------------------------------------------- execute
def _checked(kernel, node, ctx):
    """``kernel`` with its value's shape checked: a provider returning the wrong shape is
    a PlanError (the backend boundary), not a GraphError."""
    want = tuple(node.out_shape)

    def run(args, attrs, nb):
        y = kernel(args, attrs, nb)
        ys = tuple(ctx.shape(y))
        expect = tuple(ctx.shape(args[0]))[:nb] + want
        if ys != expect:
            raise PlanError(f"the kernel's value has shape {fmt_shape(ys)}, expected "
                            f"{fmt_shape(expect)}")
        return y
    return run


def run_planned(graph, payload, x, policy: Optional[Policy] = None, *, show_backend=None,
                bound: Optional[BoundPlan] = None) -> list:
    """Evaluate ``graph`` through the bound plan: the value table.

    This is the fold (:func:`graph.denote_all`: inputs with leading batch axes, payload
    converted into the policy's context, defaults of optional params) with the bound plan's
    kernels as its per-node kernel hook: every runtime node runs its selected capsule, and
    ``input``/``const``/``detach`` (no runtime work) run the op table's bookkeeping rules.
    ``show_backend`` (a callable taking one string) gets one line per IR op the first
    time it is selected, before anything runs.
    """
    if bound is None:
        bound = bind(plan(graph, policy))
    if show_backend is not None:
        for line in bound.lines():
            show_backend(line)
    kernels = {i: _checked(k, graph.nodes[i], bound.ctx) for i, k in bound.kernels.items()}
    return denote_all(graph, payload, x, bound.ctx, kernels=kernels, label="run")
