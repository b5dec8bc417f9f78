"""The Python API: ``scalarlab.compare``, ``gaps``, ``sweep`` and ``fpbench`` as functions
that return the command's table as a pandas DataFrame.

Each function runs the command's own code (``experiments.commands.<cmd>.table``), so a
DataFrame holds exactly the columns and rows of the CSV that ``--out FILE.csv`` writes,
and ``df.attrs["meta"]`` is the ``meta`` of the command's ``--json`` document.  Keyword
arguments are the command's flags (``samples=`` for ``--samples``, ``inputs=`` for
``--input``); a keyword left out (or None) takes the command's default, and every value
is checked by the flag's own parser: a bad one raises :class:`ExperimentError` naming
the keyword.  Nothing is printed and no file is written.

Graphs are a built-in name (``"six-node"``), a graph file (JSON, ONNX, FPCore), a
:class:`~scalarlab.graph.Graph` (with ``payload=`` and ``inputs=`` where it has weights
or no built-in input) or a ``(graph, payload[, x0])`` tuple.  Contexts are names
(aliases included: ``"fp32"``) or context objects.
"""
from __future__ import annotations

import argparse
from fractions import Fraction

import numpy as np
import pandas as pd

from scalarlab.scalars.base import Context

from . import outputs
from .cases import GraphCase, load_case
from .cli import _Parser, command_module
from .errors import ExperimentError

__all__ = ["compare", "gaps", "sweep", "fpbench", "bound", "libm_audit"]


class _KeywordParser(_Parser):
    """A command's parser whose errors are exceptions naming the keyword, not exits."""

    def error(self, message):
        message = " ".join(str(message).split())
        for flag, key in getattr(self, "keywords", {}).items():
            message = message.replace(f"argument {flag}:", f"{key}=:")
        raise ExperimentError(f"{self.prog}(): {message}")


def _text(value, key: str) -> str:
    """One keyword value as the flag's text (numbers as the decimals they print as)."""
    if isinstance(value, (bool, np.bool_)):
        raise ExperimentError(f"{key}={value!r}: expected a number, a name or a list")
    if isinstance(value, Context):
        return value.name
    if isinstance(value, (list, tuple, np.ndarray)):
        items = np.asarray(value, dtype=object).reshape(-1) if isinstance(value, np.ndarray) \
            else value
        return ",".join(_text(v, key) for v in items)
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (int, np.integer, Fraction, str)):
        return str(value)
    if hasattr(value, "__fspath__"):
        import os
        return os.fspath(value)
    raise ExperimentError(f"{key}={value!r}: expected a number, a name, a path or a list")


def _args(command: str, options: dict, positional=()) -> argparse.Namespace:
    """The command's flags as its CLI parser reads them from ``options`` (None = the
    command's default)."""
    parser = _KeywordParser(prog=f"scalarlab.{command}")
    command_module(command).add_arguments(parser)
    flags = {a.dest: a for a in parser._actions if a.option_strings}
    argv, parser.keywords = [], {}
    for key, value in options.items():
        if value is None:
            continue
        dest = "input" if key == "inputs" else key
        action = flags.get(dest)
        if action is None:                                  # pragma: no cover - API bug
            raise TypeError(f"{command}() got an unexpected keyword argument {key!r}")
        flag = action.option_strings[-1]
        parser.keywords[flag] = key
        if action.nargs == 0:
            if value:
                argv.append(flag)
            continue
        argv.append(f"{flag}={_text(value, key)}")
    # options first, then "--": a file name that starts with "-" stays a file name
    return parser.parse_args([*argv, *(["--", *map(str, positional)] if positional else [])])


def _case(graph, payload, what: str) -> GraphCase:
    """A :class:`GraphCase` from a name/path, a Graph (+ payload) or a tuple."""
    if isinstance(graph, GraphCase):
        return graph
    if graph is None or isinstance(graph, str) or hasattr(graph, "__fspath__"):
        import os
        if payload is not None:
            raise ExperimentError(f"{what}: payload= goes with a Graph object; a graph "
                                  f"file or built-in name carries its own")
        return load_case(None if graph is None else os.fspath(graph))
    x0 = None
    if isinstance(graph, tuple):
        if len(graph) not in (2, 3):
            raise ExperimentError(f"{what}: a graph tuple is (graph, payload[, x0]), got "
                                  f"{len(graph)} items")
        graph, payload, x0 = (*graph, None)[:3]
    if not hasattr(graph, "nodes"):
        raise ExperimentError(f"{what}: graph must be a built-in name, a graph file, a "
                              f"Graph or a (graph, payload[, x0]) tuple, got "
                              f"{type(graph).__name__}")
    from scalarlab.graph.payload import as_payload
    return GraphCase("graph", graph, as_payload(payload if payload is not None else {}), x0)


def _frame(kind: str, rows: pd.DataFrame, meta: dict, **extra) -> pd.DataFrame:
    """``rows`` with ``attrs["meta"]`` = the JSON document's meta (and ``extra`` attrs)."""
    df = rows.copy()
    df.attrs["meta"] = outputs.document(kind, meta)["meta"]
    if df.attrs["meta"].get("command") is None:       # not run from the command line
        df.attrs["meta"]["command"] = f"scalarlab.{kind}() (Python API)"
    for k, v in extra.items():
        df.attrs[k] = outputs.json_safe(v)
    return df


def _set_graph(args, case: GraphCase, graph) -> None:
    """The GRAPH argument the meta records: the name or path given, else the case name."""
    import os
    if isinstance(graph, str) or hasattr(graph, "__fspath__"):
        args.graph = os.fspath(graph)
    elif graph is not None:
        args.graph = case.name


def compare(graph=None, contexts=None, *, samples=None, inputs=None, payload=None,
            radius=None, seed=None, box=None, input_file=None, sampling=None,
            reference=None, threshold=None, oracle_limit=None, check_samples=None,
            quiet=True, divergence_ulps=None) -> pd.DataFrame:
    """The discrepancy table of ``scalarlab compare``: one row per node x context with
    max/mean absolute, relative, ULP and bits of error against the oracle, and the
    vector figures (``normwise_ulps``, ``max_rel_err_nontiny``, ``underflow``, ...).

    ``contexts``: names or context objects (default float64, binary32, bfloat16,
    binary16, e4m3); ``samples=N`` draws N inputs from the box of ``radius`` around
    ``inputs`` (decimals as a string or a list; default the graph's x0);
    ``input_file=`` a .npy of samples, ``box=`` per-entry bounds.  ``df.attrs["meta"]``
    holds the run's meta, ``df.attrs["verdicts"]`` the per-context verdicts.

    >>> import scalarlab
    >>> df = scalarlab.compare("six-node", contexts=["float64", "fp32"])
    >>> sorted(set(df["context"]))
    ['binary32', 'float64']
    >>> df.attrs["meta"]["contexts"]
    ['float64', 'binary32']
    """
    ctxs = None
    if contexts is not None:
        from scalarlab import scalars
        items = [contexts] if isinstance(contexts, (str, Context)) else list(contexts)
        if isinstance(contexts, str):
            items = contexts.split(",")
        try:
            ctxs = [scalars.get(c) for c in items]
        except Exception as exc:
            raise ExperimentError(f"scalarlab.compare(): contexts=: {exc}") from None
    case = _case(graph, payload, "scalarlab.compare()")
    args = _args("compare", dict(samples=samples, inputs=inputs, radius=radius, seed=seed,
                                 box=box, input_file=input_file, sampling=sampling,
                                 reference=reference, threshold=threshold,
                                 oracle_limit=oracle_limit, check_samples=check_samples,
                                 quiet=quiet, divergence_ulps=divergence_ulps))
    if ctxs is not None:
        args.contexts = ctxs
    _set_graph(args, case, graph)
    rows, meta, res = command_module("compare").table(args, case)
    return _frame("compare", rows, meta, verdicts=list(res.verdicts.values()))


def gaps(graph=None, context=None, *, samples=None, inputs=None, payload=None,
         radius=None, seed=None, sampling=None, node=None, box=None, input_file=None,
         reference=None, oracle_limit=None, check_samples=None,
         quiet=True) -> pd.DataFrame:
    """The summary table of ``scalarlab gaps``: percentiles, mean and max of the output's
    ULP distance and bits of error (and of the per-sample normwise figure and the
    relative error where the exact value is not tiny: rows ``normwise_ulps``,
    ``rel_err_nontiny``) in one ``context`` (default binary32) over ``samples``
    inputs (default 2000) drawn around ``inputs`` (default the graph's x0).
    ``df.attrs["histogram"]`` holds the ULP histogram.

    >>> import scalarlab
    >>> df = scalarlab.gaps("six-node", context="half", samples=200)
    >>> list(df["metric"])[:2]
    ['ulps', 'bits']
    >>> df.attrs["meta"]["context"], df.attrs["meta"]["samples"]
    ('binary16', 200)
    """
    case = _case(graph, payload, "scalarlab.gaps()")
    args = _args("gaps", dict(context=context, samples=samples, inputs=inputs, radius=radius,
                              seed=seed, sampling=sampling, node=node, box=box,
                              input_file=input_file, reference=reference,
                              oracle_limit=oracle_limit, check_samples=check_samples,
                              quiet=quiet))
    _set_graph(args, case, graph)
    summary, meta, res, _ = command_module("gaps").table(args, case)
    return _frame("gaps", summary, meta, histogram=res.histogram())


def sweep(graph="six-node", contexts=None, *, radii=None, samples=None, inputs=None,
          payload=None, center_file=None, box=None, method=None, seed=None,
          shard_size=None, workers=None, scheduler=None, connect_timeout=None,
          quiet=True) -> pd.DataFrame:
    """The containment table of ``scalarlab sweep``: one row per radius x context x
    sample count (x method) with the IBP box, the sampled range and the violations.

    ``contexts``: point contexts (names or objects; boxes in ``interval:<ctx>``),
    ``radii`` and ``samples``: numbers or lists; ``inputs``: the box centre (default the
    graph's x0), or ``center_file=`` a .npy, or ``box=`` per-entry bounds.  ``payload``:
    a Graph object's payload (or a .npz path for a graph file without one).

    >>> import scalarlab
    >>> df = scalarlab.sweep("six-node", contexts=["bf16"], radii=[0.01], samples=50)
    >>> df[["context", "samples", "violations"]].values.tolist()
    [['bfloat16', 50, 0]]
    """
    file_payload = payload if isinstance(payload, str) or hasattr(payload, "__fspath__") \
        else None
    case = _case(graph, None if file_payload is not None else payload, "scalarlab.sweep()")
    args = _args("sweep", dict(contexts=contexts, radii=radii, samples=samples,
                               inputs=inputs, payload=file_payload, center_file=center_file,
                               box=box, method=method, seed=seed, shard_size=shard_size,
                               workers=workers, scheduler=scheduler,
                               connect_timeout=connect_timeout, quiet=quiet))
    _set_graph(args, case, graph)
    rows, meta = command_module("sweep").table(args, case)
    return _frame("sweep", rows, meta)


def fpbench(files, contexts=None, *, samples=None, sampling=None, seed=None,
            threshold=None, reference_bits=None, only=None, input_file=None, alts=False,
            scheduler=None, connect_timeout=None, quiet=True) -> pd.DataFrame:
    """The table of ``scalarlab fpbench``: per FPCore benchmark x binary-format context,
    mean/max bits of error against the Arb oracle, max ULPs, where error starts.

    ``files``: one FPCore path or a list of them; ``contexts``: binary-format contexts
    (names or objects).

    >>> import pathlib, scalarlab
    >>> _ = pathlib.Path("cancel.fpcore").write_text(
    ...     "(FPCore (x) :name \\"cancel\\" :pre (<= 1 x 2) (- (+ x 1e-8) x))")
    >>> df = scalarlab.fpbench("cancel.fpcore", contexts=["fp32"], samples=64)
    >>> df[["benchmark", "context", "samples"]].values.tolist()
    [['cancel', 'binary32', 64]]
    """
    import os
    paths = [files] if isinstance(files, str) or hasattr(files, "__fspath__") else list(files)
    if not paths:
        raise ExperimentError("scalarlab.fpbench(): files=: no FPCore file named")
    args = _args("fpbench", dict(contexts=contexts, samples=samples, sampling=sampling,
                                 seed=seed, threshold=threshold,
                                 reference_bits=reference_bits, only=only,
                                 input_file=input_file, alts=alts, scheduler=scheduler,
                                 connect_timeout=connect_timeout, quiet=quiet),
                 positional=[os.fspath(p) for p in paths])
    rows, meta = command_module("fpbench").table(args)
    return _frame("fpbench", rows, meta)


def bound(source, formats=None, *, box=None, only=None, samples=None, seed=0,
          real_inputs=False, budget_s=None, tol=None) -> pd.DataFrame:
    """The table of ``scalarlab bound``: per program x format, a sound upper bound on
    |format execution - exact real result| over the input box, the largest sampled error
    and their ratio (:func:`scalarlab.experiments.bound.bound`; ``df.attrs["meta"]`` as
    the ``--json`` meta).

    >>> import pathlib, scalarlab
    >>> _ = pathlib.Path("sum.fpcore").write_text(
    ...     "(FPCore (x y) :name \\"sum\\" :pre (and (<= 1 x 2) (<= 1 y 2)) (+ x y))")
    >>> df = scalarlab.bound("sum.fpcore", formats=["binary64"], samples=64)
    >>> round(float(df["bound_abs"][0]) / 2.0**-53, 9)     # |x + y| <= 4: 4 u, outward
    4.0
    >>> int(df["violations"][0])
    0
    """
    from . import bound as B
    kw = dict(box=box, only=only, seed=seed, real_inputs=real_inputs)
    for key, value, default in (("samples", samples, B.DEFAULT_SAMPLES),
                                ("budget_s", budget_s, B.DEFAULT_BUDGET_S),
                                ("tol", tol, B.DEFAULT_TOL)):
        kw[key] = default if value is None else value
    rows, meta = B.bound(source, formats=formats or B.DEFAULT_FORMATS, **kw)
    return _frame("bound", rows, meta)


def libm_audit(*args, **kwargs) -> pd.DataFrame:
    """The table of ``scalarlab libm``: how far numpy's, torch's, the C library's (and
    the lab's) functions are from correctly rounded (:func:`scalarlab.experiments.
    libm_audit.libm_audit`, whose arguments it takes).

    >>> import scalarlab
    >>> df = scalarlab.libm_audit(["exp"], ["lab"], "bfloat16", exhaustive=True)
    >>> df[["library", "function", "max_ulps", "not_cr"]].values.tolist()
    [['lab', 'exp', 0.5, 0]]
    """
    from .libm_audit import libm_audit as audit
    return audit(*args, **kwargs)
