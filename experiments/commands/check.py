"""``scalarlab check GRAPH``: both validation levels and the payload check; ``ok`` or the error.

Non-finite weights (NaN, +-inf) are an error (exit 1) naming the entry, the field and the
first bad position; ``--allow-nonfinite`` turns that into a warning on stderr.
"""
from __future__ import annotations

import sys

from .. import argtypes as T
from . import help_of
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
np = lazy("numpy")
graph = lazy("scalarlab.graph")
examples = lazy("scalarlab.graph.examples")
_errors = lazy("scalarlab.graph.errors")

NAME = "check"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("graph", metavar="GRAPH",
                   help=f"built-in graph ({', '.join(D.EXAMPLE_NAMES)}) or a graph file")
    p.add_argument("--payload", type=T.existing_file(".npz"), default=None, metavar="P.npz",
                   help="check against this payload instead of the graph's own")
    p.add_argument("--allow-nonfinite", action="store_true",
                   help="report NaN/inf weights as a warning instead of an error")


def _finite_mask(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind in "fc":
        return np.isfinite(a)
    if a.dtype.kind in "iub":
        return np.ones(a.shape, bool)

    def one(t):
        if isinstance(t, str):
            try:
                return bool(np.isfinite(float(t)))
            except ValueError:
                return True                       # p/q text: an exact rational
        try:
            return bool(np.isfinite(float(t)))
        except (TypeError, ValueError, OverflowError):
            return True
    return np.vectorize(one, otypes=[bool])(a) if a.size else np.ones(a.shape, bool)


def _bad_string(a):
    """``(position, text, reason)`` of the first payload string that is no number literal
    (``"banana"``, ``"1/0"``, more than 4000 digits), or None.  Read by the lab's bounded
    literal reader, so a huge exponent costs nothing here; ``inf``/``nan`` spellings are
    left to the non-finite check."""
    from scalarlab.scalars.kernels import literals
    a = np.asarray(a)
    if a.dtype.kind not in "OU" or a.size == 0:
        return None
    for pos, t in np.ndenumerate(a):
        if not isinstance(t, str):
            continue
        try:
            literals.for_rounding(t)
        except literals.NotALiteral as exc:
            try:
                float(t)                         # inf, -inf, nan: the non-finite check's
                continue
            except ValueError:
                return pos, t, str(exc)
        except literals.LiteralError as exc:
            return pos, t, str(exc)
    return None


def unreadable_strings(payload) -> list[str]:
    """One description per payload field holding a string that is not a number."""
    out = []
    for k, name, tag, arr in _fields(payload):
        bad = _bad_string(arr)
        if bad is not None:
            pos, t, why = bad
            shown = t if len(t) <= 40 else t[:37] + "..."
            out.append(f"payload entry {k} field {name!r}{' ' + tag if tag else ''}: "
                       f"{shown!r} at {[int(i) for i in pos]} is not a number ({why})")
    return out


def _fields(payload):
    """``(entry, field, "lo"/"hi"/"", array)`` for every array of a payload (an interval
    field gives its two ends)."""
    for k, params in graph.Payload(payload).items():
        for name, v in params.items():
            parts = [("lo", v.lo), ("hi", v.hi)] if hasattr(v, "lo") else [("", v)]
            for tag, arr in parts:
                yield k, name, tag, arr


def nonfinite_weights(payload) -> list[str]:
    """One description per payload field holding NaN or infinite values."""
    out = []
    for k, name, tag, arr in _fields(payload):
        ok = _finite_mask(arr)
        if not ok.all():
            first = tuple(int(i) for i in np.argwhere(~ok)[0])
            val = np.asarray(arr)[first] if first else np.asarray(arr).item()
            out.append(f"payload entry {k} field {name!r}{' ' + tag if tag else ''}: "
                       f"{int((~ok).sum())} non-finite value(s), first at "
                       f"{list(first)}: {val}")
    return out


def run(args) -> int:
    g, payload, _ = examples.resolve(args.graph)
    if args.payload:
        payload = graph.fileformat.load_npz(args.payload)
    graph.check_well_formed(g)
    graph.check_shapes(g)
    graph.check_payload(g, payload)
    unreadable = unreadable_strings(payload) if payload is not None else []
    if unreadable:       # never a warning: no context can evaluate such an entry
        more = f" (and {len(unreadable) - 1} more field(s))" if len(unreadable) > 1 else ""
        raise _errors.GraphError(unreadable[0] + more)
    bad = nonfinite_weights(payload) if payload is not None else []
    if bad and not args.allow_nonfinite:
        more = f" (and {len(bad) - 1} more field(s))" if len(bad) > 1 else ""
        raise _errors.GraphError(bad[0] + more)
    for b in bad:
        print(f"scalarlab check: warning: {b}", file=sys.stderr)
    print("ok" if not bad else f"ok (with {len(bad)} non-finite weight field(s))")
    return 0
