"""FPCore 2.0 reader: ``(FPCore name (x y) :name "..." :pre (...) body)`` -> IR graphs.

:func:`read_fpcore` parses a file (or text) holding any number of FPCores and translates
each real-valued program into a graph of scalar nodes with the one translator of
:mod:`.fpcore_build` (inputs = arguments in order, exact constants, ``let``, ``if``,
variadic ``+ - *``, chained comparisons, calls of the file's other named FPCores inlined,
annotations recorded).  The pieces:

* :mod:`.fpcore_parse` -- text -> s-expressions, exact numbers (hostile literals decided
  from their spelling: ``1e999999999999`` is +inf in milliseconds, never a huge integer);
* :mod:`.fpcore_build` -- expressions -> graphs (programs, ``:alt`` forms, conditions);
* :mod:`.fpcore_pre` -- ``:pre`` -> per-argument sampling bounds and residual conditions
  (graphs the fold decides exactly or with intervals).

What cannot be translated is not an error: the program is returned with ``skip`` set to
the reason (loops -- ``while``, ``while*``, ``for``, ``for*``: the IR has no loop node;
tensors; mixed precision; recursion; an op missing from the op table: ``op X not
supported``).  Malformed text (unbalanced parentheses, a bad number, an FPCore without a
body) raises :class:`FPCoreError` naming the line.  Each ``:alt`` form becomes a program of
its own in ``prog.alts`` (same arguments and precondition).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..fileformat import read_text
from ..node import Graph
from ..payload import Payload
from .fpcore_build import (CONST_DIGITS, CONSTANTS, OP_NAMES, Builder, build_expression,
                           const_value)
from .fpcore_parse import (FPCoreError, Num, Str, Sym, Untranslatable, parse_number,
                           parse_sexprs, to_text)
from .fpcore_pre import Bound, Condition, compile_condition, precondition_boxes

__all__ = ["FPCoreError", "FPCoreProgram", "Sym", "Num", "Str", "parse_sexprs",
           "parse_number", "read_fpcore", "read_fpcore_file", "precondition_boxes",
           "const_value", "CONSTANTS", "CONST_DIGITS", "OP_NAMES", "program_graph",
           "Bound", "Condition", "Builder", "to_text"]


# ---------------------------------------------------------------------------- program
@dataclass
class FPCoreProgram:
    """One FPCore: its arguments, properties, body and (when translatable) its graph.

    ``graph``/``payload``: the IR (input node ``i`` = argument ``i``); ``skip``: why there
    is no graph (None when there is one).  ``properties`` maps each property name
    (without the colon) to its FPCore text; ``pre`` is the precondition expression.
    ``alts``: the ``:alt`` forms, translated (same arguments); ``annotations``: every
    ``(! ...)`` of the body as ``(text, {prop: text})``; ``notes``: literals beyond every
    format's range taken as +-inf/+-0; ``functions``: the named
    FPCores of the file (shared), which calls are inlined from.
    """
    index: int
    source: str
    arguments: list
    properties: dict
    body: object
    pre: object = None
    ident: str | None = None
    arg_properties: dict = field(default_factory=dict)
    graph: Graph | None = None
    payload: Payload | None = None
    skip: str | None = None
    node_text: list = field(default_factory=list)   # per node: the FPCore subexpression
    alts: list = field(default_factory=list)
    alt_exprs: list = field(default_factory=list)
    annotations: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    functions: dict = field(default_factory=dict, repr=False)
    arg_skip: str | None = None
    _boxes: tuple | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.properties.get("name") or self.ident or f"FPCore #{self.index + 1}"

    @property
    def precision(self) -> str:
        """The program's ``:precision`` (``binary64`` when it declares none)."""
        return self.properties.get("precision", "binary64")

    @property
    def input_ids(self) -> list:
        return list(range(len(self.arguments)))

    def boxes(self):
        """``(bounds, residual)``: see :func:`fpcore_pre.precondition_boxes` (residual:
        :class:`Condition` s); a precondition the translator refuses raises
        :class:`FPCoreError`.  Computed once."""
        if self._boxes is None:
            self._boxes = precondition_boxes(self.pre, self.arguments, self.functions,
                                             self.precision)
        bounds, residual = self._boxes
        return {k: Bound(b.lo, b.hi, b.lo_strict, b.hi_strict) for k, b in bounds.items()}, \
            list(residual)

    def precondition(self) -> Condition | None:
        """The whole ``:pre`` as one :class:`Condition` (None without one)."""
        if self.pre is None:
            return None
        return compile_condition(self.pre, self.arguments, functions=self.functions,
                                 precision=self.precision)


def _prop_text(v) -> str:
    return v.text if isinstance(v, Str) else to_text(v)


def _parse_fpcore(form, index: int, source: str) -> FPCoreProgram:
    where = f"{source}: FPCore #{index + 1}"
    line = next((t.line for t in form if not isinstance(t, list)), 0)
    where += f" (line {line})" if line else ""
    rest = form[1:]
    ident = None
    if rest and isinstance(rest[0], Sym):
        ident, rest = rest[0].name, rest[1:]
    if not rest or not isinstance(rest[0], list):
        raise FPCoreError(f"{where}: expected an argument list after FPCore")
    raw_args, rest = rest[0], rest[1:]
    args, arg_props, arg_skip = [], {}, None
    for a in raw_args:
        props = {}
        if isinstance(a, list) and a and isinstance(a[0], Sym) and a[0].name == "!":
            props, a = _annotation(a, where)
        if isinstance(a, list):         # (x n m): a tensor argument
            if a and isinstance(a[0], Sym):
                arg_skip = arg_skip or f"tensor argument {to_text(a)}: tensors are not " \
                                       f"supported (array forms)"
                a = a[0]
            else:
                raise FPCoreError(f"{where}: bad argument {to_text(a)}")
        if not isinstance(a, Sym):
            raise FPCoreError(f"{where}: argument {to_text(a)} is not a name")
        args.append(a.name)
        if props:
            arg_props[a.name] = props
    props, body, alts = _properties(rest, where)
    if body is None:
        raise FPCoreError(f"{where}: no body expression")
    if len(set(args)) != len(args):
        raise FPCoreError(f"{where}: an argument name is repeated in {to_text(raw_args)}")
    prog = FPCoreProgram(index, source, args, {k: _prop_text(v) for k, v in props.items()},
                         body, props.get("pre"), ident, arg_props)
    prog.alt_exprs = alts
    bad = [f"{a} has :precision {_prop_text(p['precision'])}"
           for a, p in arg_props.items()
           if "precision" in p and _prop_text(p["precision"]) != prog.precision]
    if bad and not arg_skip:
        arg_skip = f"argument precision annotation ({'; '.join(bad)}): mixed precision"
    prog.arg_skip = arg_skip
    prog.skip = arg_skip
    return prog


def _properties(items, where):
    """``(:k v :k2 v2 ... body)`` -> (dict, body, alts); properties may precede the body;
    ``:alt`` may repeat (every one is kept, in order)."""
    props, body, alts, i = {}, None, [], 0
    while i < len(items):
        t = items[i]
        if isinstance(t, Sym) and t.name.startswith(":"):
            if i + 1 >= len(items):
                raise FPCoreError(f"{where}: property {t.name} has no value")
            if t.name == ":alt":
                alts.append(items[i + 1])
                props.setdefault("alt", items[i + 1])
            else:
                props[t.name[1:]] = items[i + 1]
            i += 2
            continue
        if body is not None:
            raise FPCoreError(f"{where}: more than one body expression ({to_text(body)} and "
                              f"{to_text(t)})")
        body = t
        i += 1
    return props, body, alts


def _annotation(form, where):
    """``(! :p v ... expr)`` -> (props, expr)."""
    props, body, _ = _properties(form[1:], where)
    if body is None:
        raise FPCoreError(f"{where}: annotation {to_text(form)} has no expression")
    return props, body


# -------------------------------------------------------------------------- translator
def _translate(prog: FPCoreProgram, ops) -> None:
    if prog.skip:
        return
    try:
        b, out = build_expression(prog.body, prog.arguments, precision=prog.precision,
                                  functions=prog.functions, boolean=False, ops=ops,
                                  ident=prog.ident)
    except Untranslatable as exc:
        prog.skip = str(exc)
        return
    prog.annotations = b.annotations
    prog.notes = prog.notes + b.notes
    prog.graph, prog.payload = b.graph(out)
    prog.node_text = b.text


def program_graph(prog: FPCoreProgram, ops=None):
    """Translate ``prog`` and its ``:alt`` forms in place: sets ``graph``/``payload`` or
    ``skip``; returns prog."""
    _translate(prog, ops)
    prog.alts = []
    for j, e in enumerate(prog.alt_exprs):
        props = dict(prog.properties)
        props["name"] = f"{prog.name} (alt {j + 1})"
        props.pop("alt", None)
        alt = FPCoreProgram(prog.index, prog.source, list(prog.arguments), props, e,
                            prog.pre, None, dict(prog.arg_properties),
                            functions=prog.functions, arg_skip=prog.arg_skip)
        alt.skip = prog.arg_skip
        alt._boxes = None
        _translate(alt, ops)
        prog.alts.append(alt)
    return prog


def read_fpcore(src, *, source: str | None = None, translate: bool = True) -> list:
    """Every FPCore in ``src`` (a path to a ``.fpcore`` file, or FPCore text), in order.

    Each item is an :class:`FPCoreProgram`; with ``translate`` its ``graph`` and
    ``payload`` are filled, or ``skip`` says why not.  Malformed text raises
    :class:`FPCoreError`.
    """
    text = src
    # a path that exists is a file, whatever its name holds ("prog (1).fpcore"); other text
    # is FPCore source when it holds a form, else a path that does not exist (one error)
    if isinstance(src, os.PathLike) or (isinstance(src, str) and (
            "(" not in src or ("\n" not in src and os.path.lexists(src)))):
        path = os.fspath(src)
        text = read_text(path, "FPCore file", FPCoreError)
        source = source or path
    source = source or "<string>"
    progs, functions = [], {}
    for form in parse_sexprs(text, source):
        if not (isinstance(form, list) and form and isinstance(form[0], Sym)
                and form[0].name == "FPCore"):
            raise FPCoreError(f"{source}: top-level form {to_text(form)[:60]} is not an FPCore")
        prog = _parse_fpcore(form, len(progs), source)
        prog.functions = functions               # one table per file, shared
        if prog.ident is not None:
            if prog.ident in functions:          # calls keep meaning the first one
                prog.notes.append(f"the name {prog.ident} is already defined by FPCore "
                                  f"#{functions[prog.ident].index + 1}; calls of "
                                  f"{prog.ident} mean that one")
            else:
                functions[prog.ident] = prog
        progs.append(prog)
    if translate:
        for prog in progs:                       # after reading all: calls may go forward
            program_graph(prog)
    return progs


def read_fpcore_file(path, index: int = 0):
    """``(Graph, Payload)`` of FPCore number ``index`` of a file (the CLI's graph loader);
    an untranslatable program is a :class:`GraphError` with the reason."""
    from pathlib import Path
    progs = read_fpcore(Path(os.fspath(path)))   # a path, never taken for FPCore text
    if not progs:
        raise FPCoreError(f"FPCore file {path}: holds no FPCore")
    if not 0 <= index < len(progs):
        raise FPCoreError(f"FPCore file {path}: has {len(progs)} FPCores, no #{index + 1}")
    p = progs[index]
    if p.graph is None:
        raise FPCoreError(f"FPCore file {path}: {p.name!r} cannot be translated: {p.skip}")
    return p.graph, p.payload
