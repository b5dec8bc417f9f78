"""FPCore 2.0 reader: ``(FPCore (x y) :name "..." :pre (...) body)`` -> IR graphs.

:func:`read_fpcore` parses a file (or text) holding any number of FPCores and translates
each real-valued program into a graph of scalar nodes:

* one ``input`` node of shape ``[]`` per argument, ids ``0..k-1`` in argument order (the
  fold already takes several inputs: ``{input_id: value}`` or a list in id order);
* literals and the standard's constants become ``const`` nodes whose payload is an EXACT
  string (decimal, ``p/q`` for rationals and hexfloats; the constants as 120 correct
  decimal digits), so every context rounds each of them once, correctly, into its own
  format -- the FPCore meaning of a constant in a rounding context;
* ``let``/``let*`` bind names to nodes (no node is duplicated); the arithmetic and libm
  operations map to op-table ops of the same name (``+ - * /`` -> ``add sub mul div``,
  unary ``-`` -> ``neg``, ``fabs`` -> ``abs``), comparisons to ``lt le gt ge eq ne``
  (chains become ``and`` of pairs; ``!=`` means pairwise distinct), ``and or not``, the
  predicates ``isfinite isinf isnan isnormal signbit``, and
  ``if`` to ``select(cond, then, else)`` (both branches evaluated);
* a literal annotated ``(! :precision P c)`` is rounded to P (round to nearest even);
  an annotation that changes the precision of a computation is refused (the graph is
  evaluated in ONE context).

What cannot be translated is not an error: the program is returned with ``skip`` set to
the reason (``while``/``while*``: the IR has no loop node and unrolling a data-dependent
trip count is not the same program; ``array``/tensor forms; ``cast``; an op missing from
the op table: ``op X not supported``).  Malformed text (unbalanced parentheses, a bad
number, an FPCore without a body) raises :class:`FPCoreError` naming the line.

The precondition is kept as an expression and also split (:func:`precondition_boxes`)
into per-argument bounds (a conjunct ``(<= lo x hi)`` with constant ``lo``/``hi``) and the
rest, which samplers check by rejection.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from fractions import Fraction

from ..errors import GraphError
from ..node import Graph, Node, OpKind
from ..payload import Payload

__all__ = ["FPCoreError", "FPCoreProgram", "Sym", "Num", "Str", "parse_sexprs",
           "read_fpcore", "read_fpcore_file", "precondition_boxes", "const_value",
           "CONSTANTS", "OP_NAMES", "program_graph"]


class FPCoreError(GraphError):
    """Malformed FPCore text (the message names the source and line)."""


class Untranslatable(Exception):
    """One FPCore cannot become a graph; the message is the skip reason."""


# ----------------------------------------------------------------------------- atoms
@dataclass(frozen=True)
class Sym:
    name: str
    line: int = 0

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class Num:
    """A numeric literal: its exact value (Fraction) and its spelling."""
    value: Fraction
    text: str
    line: int = 0

    def __str__(self):
        return self.text


@dataclass(frozen=True)
class Str:
    text: str
    line: int = 0

    def __str__(self):
        return '"' + self.text.replace('"', '\\"') + '"'


def to_text(e) -> str:
    """An s-expression back as FPCore text (one line)."""
    if isinstance(e, list):
        return "(" + " ".join(to_text(t) for t in e) + ")"
    return str(e)


# ---------------------------------------------------------------------------- tokens
_TOKEN = re.compile(r"""
    (?P<ws>\s+) | (?P<comment>;[^\n]*) | (?P<block>\#\|.*?\|\#) |
    (?P<open>[(\[]) | (?P<close>[)\]]) |
    (?P<str>"(?:[^"\\]|\\.)*") |
    (?P<atom>[^\s()\[\]";]+)
""", re.VERBOSE | re.DOTALL)

_DEC = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$", re.IGNORECASE)
_RAT = re.compile(r"^[+-]?\d+/\d+$")
_HEX = re.compile(r"^([+-]?)0x([0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(p[+-]?\d+)?$", re.IGNORECASE)


def parse_number(text: str):
    """The exact value of an FPCore number token, or None when it is not a number."""
    if _DEC.match(text):
        return Fraction(text)
    if _RAT.match(text):
        n, d = text.split("/")
        if int(d) == 0:
            raise ValueError(f"rational {text} has a zero denominator")
        return Fraction(int(n), int(d))
    m = _HEX.match(text)
    if m:
        sign, mant, exp = m.groups()
        whole, _, frac = mant.partition(".")
        v = Fraction(int(whole or "0", 16)) + (Fraction(int(frac, 16), 16 ** len(frac))
                                               if frac else 0)
        e = int(exp[1:]) if exp else 0
        v *= Fraction(2) ** e
        return -v if sign == "-" else v
    return None


def parse_sexprs(text: str, source: str = "<string>") -> list:
    """Every top-level s-expression of ``text`` (lists, :class:`Sym`, :class:`Num`,
    :class:`Str`); ``[`` ``]`` are parentheses, ``;`` and ``#| |#`` comments."""
    stack: list = [[]]
    opens: list = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:                                 # pragma: no cover - regex is total
            raise FPCoreError(f"{source}:{line}: cannot read {text[pos:pos + 20]!r}")
        kind, tok = m.lastgroup, m.group()
        if kind == "open":
            stack.append([])
            opens.append((line, tok))
        elif kind == "close":
            if len(stack) == 1:
                raise FPCoreError(f"{source}:{line}: unbalanced {tok!r} (nothing is open)")
            o_line, o_tok = opens.pop()
            if (o_tok, tok) not in (("(", ")"), ("[", "]")):
                raise FPCoreError(f"{source}:{line}: {tok!r} closes {o_tok!r} opened on "
                                  f"line {o_line}")
            done = stack.pop()
            stack[-1].append(done)
        elif kind == "str":
            body = tok[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            stack[-1].append(Str(body, line))
        elif kind == "atom":
            try:
                v = parse_number(tok)
            except ValueError as exc:
                raise FPCoreError(f"{source}:{line}: {exc}") from None
            stack[-1].append(Num(v, tok, line) if v is not None else Sym(tok, line))
        line += tok.count("\n")
        pos = m.end()
    if len(stack) != 1:
        raise FPCoreError(f"{source}: {opens[-1][1]!r} opened on line {opens[-1][0]} is never "
                          f"closed")
    return stack[0]


# ------------------------------------------------------------------------- constants
#: The standard's named constants as functions of an mpmath context.
_CONST_DEFS = {
    "E": lambda mp: mp.e, "LOG2E": lambda mp: 1 / mp.log(2), "LOG10E": lambda mp: 1 / mp.log(10),
    "LN2": lambda mp: mp.log(2), "LN10": lambda mp: mp.log(10), "PI": lambda mp: mp.pi,
    "PI_2": lambda mp: mp.pi / 2, "PI_4": lambda mp: mp.pi / 4, "M_1_PI": lambda mp: 1 / mp.pi,
    "M_2_PI": lambda mp: 2 / mp.pi, "M_2_SQRTPI": lambda mp: 2 / mp.sqrt(mp.pi),
    "SQRT2": lambda mp: mp.sqrt(2), "SQRT1_2": lambda mp: 1 / mp.sqrt(2),
}
#: Digits carried for the irrational constants: 120 decimal digits (~398 bits) are far
#: more than any binary format or the 200-bit oracle holds, and none of these constants
#: lies within 10^-120 of a rounding boundary of a format of <= 113 bits (tested), so
#: rounding the string once equals rounding the real constant once.
CONST_DIGITS = 120
CONSTANTS = tuple(_CONST_DEFS) + ("INFINITY", "NAN", "TRUE", "FALSE")
_CONST_CACHE: dict = {}


def const_value(name: str):
    """Exact payload value of a named constant: a decimal string (correctly rounded to
    :data:`CONST_DIGITS` digits), or a float for INFINITY/NAN."""
    if name == "INFINITY":
        return float("inf")
    if name == "NAN":
        return float("nan")
    if name not in _CONST_CACHE:
        import mpmath
        mp = mpmath.MPContext()
        mp.prec = 4 * CONST_DIGITS
        _CONST_CACHE[name] = mpmath.nstr(_CONST_DEFS[name](mp), CONST_DIGITS,
                                         min_fixed=-1, max_fixed=-1, strip_zeros=False)
    return _CONST_CACHE[name]


# ------------------------------------------------------------------------------- ops
#: FPCore operation -> op-table op name (identical names are not listed).
OP_NAMES = {"+": "add", "*": "mul", "/": "div", "fabs": "abs", "<": "lt", "<=": "le",
            ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
_UNARY = {"fabs", "exp", "exp2", "expm1", "log", "log10", "log2", "log1p", "sqrt", "cbrt",
          "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
          "acosh", "atanh", "erf", "erfc", "tgamma", "lgamma", "ceil", "floor", "trunc",
          "round", "nearbyint"}
_BINARY = {"+", "*", "/", "pow", "hypot", "atan2", "fmod", "remainder", "fmax", "fmin",
           "fdim", "copysign"}
_TERNARY = {"fma"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}
_BOOL_OPS = {"and", "or", "not"}
_PREDICATES = {"isfinite", "isinf", "isnan", "isnormal", "signbit"}
_TENSOR = {"array", "dim", "size", "ref", "for", "for*", "tensor", "tensor*"}
_FORMATS = {"binary16", "binary32", "binary64", "binary128", "binary80", "bfloat16"}


# ---------------------------------------------------------------------------- program
@dataclass
class FPCoreProgram:
    """One FPCore: its arguments, properties, body and (when translatable) its graph.

    ``graph``/``payload``: the IR (input node ``i`` = argument ``i``); ``skip``: why there
    is no graph (None when there is one).  ``properties`` maps each property name
    (without the colon) to its FPCore text; ``pre`` is the precondition expression.
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
        """``(bounds, residual)``: see :func:`precondition_boxes`."""
        return precondition_boxes(self.pre, self.arguments)


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
                arg_skip = arg_skip or f"tensor argument {to_text(a)} (array forms not supported)"
                a = a[0]
            else:
                raise FPCoreError(f"{where}: bad argument {to_text(a)}")
        if not isinstance(a, Sym):
            raise FPCoreError(f"{where}: argument {to_text(a)} is not a name")
        args.append(a.name)
        if props:
            arg_props[a.name] = props
    props, body = _properties(rest, where)
    if body is None:
        raise FPCoreError(f"{where}: no body expression")
    prog = FPCoreProgram(index, source, args, {k: _prop_text(v) for k, v in props.items()},
                         body, props.get("pre"), ident, arg_props)
    prog.skip = arg_skip
    if len(set(args)) != len(args):
        raise FPCoreError(f"{where}: an argument name is repeated in {to_text(raw_args)}")
    return prog


def _properties(items, where):
    """``(:k v :k2 v2 ... body)`` -> (dict, body); properties may precede the body."""
    props, body, i = {}, None, 0
    while i < len(items):
        t = items[i]
        if isinstance(t, Sym) and t.name.startswith(":"):
            if i + 1 >= len(items):
                raise FPCoreError(f"{where}: property {t.name} has no value")
            props[t.name[1:]] = items[i + 1]
            i += 2
            continue
        if body is not None:
            raise FPCoreError(f"{where}: more than one body expression ({to_text(body)} and "
                              f"{to_text(t)})")
        body = t
        i += 1
    return props, body


def _annotation(form, where):
    """``(! :p v ... expr)`` -> (props, expr)."""
    props, body = _properties(form[1:], where)
    if body is None:
        raise FPCoreError(f"{where}: annotation {to_text(form)} has no expression")
    return props, body


# -------------------------------------------------------------------------- translator
class _Builder:
    def __init__(self, prog: FPCoreProgram, ops):
        self.prog = prog
        self.ops = ops
        self.nodes: list = []
        self.text: list = []
        self.payload = Payload()
        self.boolean: set = set()
        self.consts: dict = {}
        self.precision = prog.precision          # binary64 when the program names none

    def node(self, op, parents, text, **attrs) -> int:
        if op not in self.ops:
            raise Untranslatable(f"op {op} not supported")
        i = len(self.nodes)
        self.nodes.append(Node(i, list(parents), OpKind(op, **attrs), []))
        self.text.append(text)
        return i

    def const(self, key, value, text) -> int:
        if key in self.consts:
            return self.consts[key]
        i = self.node("const", [], text)
        self.payload.set(i, {"value": value}, op="const")
        self.consts[key] = i
        return i

    def literal(self, v: Fraction, text: str) -> int:
        s = str(v) if v.denominator != 1 or "/" in str(v) else str(v.numerator)
        return self.const(("num", v), s, text)

    # -------------------------------------------------------------- expressions
    def expr(self, e, env) -> int:
        if isinstance(e, Num):
            return self.literal(e.value, e.text)
        if isinstance(e, Sym):
            if e.name in env:
                return env[e.name]
            if e.name in CONSTANTS:
                if e.name in ("TRUE", "FALSE"):
                    i = self.const(("bool", e.name), "1" if e.name == "TRUE" else "0", e.name)
                    self.boolean.add(i)
                    return i
                return self.const(("const", e.name), const_value(e.name), e.name)
            raise Untranslatable(f"unbound name {e.name}")
        if isinstance(e, Str):
            raise Untranslatable(f"string {e} in an expression")
        if not e:
            raise Untranslatable("empty expression ()")
        head = e[0]
        if isinstance(head, list) or not isinstance(head, Sym):
            raise Untranslatable(f"{to_text(e)} is not an operation")
        op, args = head.name, e[1:]
        text = to_text(e)
        if op in ("let", "let*"):
            return self.let(op, args, env, text)
        if op in ("while", "while*"):
            raise Untranslatable(f"{op} loop (the IR has no loop node; see README)")
        if op in _TENSOR:
            raise Untranslatable(f"{op} (array/tensor forms not supported)")
        if op == "cast":
            raise Untranslatable("cast (mixed precision: the graph runs in one context)")
        if op == "digits":
            if len(args) != 3 or not all(isinstance(a, Num) for a in args):
                raise Untranslatable(f"bad digits form {text}")
            m, ex, b = (a.value for a in args)
            return self.literal(m * Fraction(b) ** int(ex), text)
        if op == "!":
            return self.annotated(e, env)
        if op == "if":
            if len(args) != 3:
                raise Untranslatable(f"if takes 3 arguments: {text}")
            c = self.boolean_expr(args[0], env)
            a, b = self.real(args[1], env), self.real(args[2], env)
            return self.node("select", [c, a, b], text)
        if op in _COMPARE:
            return self.compare(op, args, env, text)
        if op in _BOOL_OPS:
            return self.logic(op, args, env, text)
        if op in _PREDICATES:                 # boolean-valued tests of one number
            if len(args) != 1:
                raise Untranslatable(f"{op} takes 1 argument: {text}")
            return self._bool(op, [self.real(args[0], env)], text)
        if op == "-":
            if len(args) == 1:
                return self.node("neg", [self.real(args[0], env)], text)
            if len(args) == 2:
                return self.node("sub", [self.real(a, env) for a in args], text)
            raise Untranslatable(f"- takes 1 or 2 arguments: {text}")
        n = 1 if op in _UNARY else 2 if op in _BINARY else 3 if op in _TERNARY else None
        if n is None:
            raise Untranslatable(f"op {op} not supported (not an FPCore real operation)")
        if len(args) != n:
            raise Untranslatable(f"{op} takes {n} argument{'s' if n > 1 else ''}: {text}")
        return self.node(OP_NAMES.get(op, op), [self.real(a, env) for a in args], text)

    def real(self, e, env) -> int:
        i = self.expr(e, env)
        if i in self.boolean:
            raise Untranslatable(f"boolean {to_text(e)} used as a number")
        return i

    def boolean_expr(self, e, env) -> int:
        i = self.expr(e, env)
        if i not in self.boolean:
            raise Untranslatable(f"number {to_text(e)} used as a condition")
        return i

    def let(self, op, args, env, text) -> int:
        if len(args) != 2 or not isinstance(args[0], list):
            raise Untranslatable(f"bad {op} form: {text}")
        inner = dict(env)
        for b in args[0]:
            if not (isinstance(b, list) and len(b) == 2 and isinstance(b[0], Sym)):
                raise Untranslatable(f"bad {op} binding {to_text(b)}")
            inner[b[0].name] = self.expr(b[1], inner if op == "let*" else env)
        return self.expr(args[1], inner)

    def annotated(self, e, env) -> int:
        props, body = _annotation(e, self.prog.source)
        props = {k: _prop_text(v) for k, v in props.items()}
        rnd = props.get("round")
        if rnd not in (None, "nearestEven"):
            raise Untranslatable(f"rounding mode annotation :round {rnd}")
        prec = props.get("precision")
        if prec is None or prec == self.precision:
            return self.expr(body, env)
        if isinstance(body, Num) and prec in _FORMATS and prec not in ("binary80", "binary128"):
            from scalarlab.scalars import formats
            v = formats.round_fraction(body.value, prec, "nearest_even")
            return self.literal(Fraction(float(v)), to_text(e))
        raise Untranslatable(f"precision annotation (! :precision {prec} ...) inside the body "
                             f"(mixed precision: the graph runs in one context)")

    def compare(self, op, args, env, text) -> int:
        if len(args) < 2:
            raise Untranslatable(f"{op} needs 2 or more arguments: {text}")
        ids = [self.real(a, env) for a in args]
        name = OP_NAMES[op]
        if op == "!=":
            pairs = [(ids[i], ids[j]) for i in range(len(ids)) for j in range(i + 1, len(ids))]
        else:
            pairs = list(zip(ids, ids[1:]))
        out = None
        for a, b in pairs:
            c = self.node(name, [a, b], text if len(pairs) == 1 else f"({op} ...)")
            self.boolean.add(c)
            out = c if out is None else self._bool("and", [out, c], text)
        return out

    def _bool(self, name, parents, text) -> int:
        i = self.node(name, parents, text)
        self.boolean.add(i)
        return i

    def logic(self, op, args, env, text) -> int:
        if op == "not":
            if len(args) != 1:
                raise Untranslatable(f"not takes 1 argument: {text}")
            return self._bool("not", [self.boolean_expr(args[0], env)], text)
        if not args:
            return self.expr(Sym("TRUE" if op == "and" else "FALSE"), env)
        ids = [self.boolean_expr(a, env) for a in args]
        out = ids[0]
        for b in ids[1:]:
            out = self._bool(op, [out, b], text)
        return out


def program_graph(prog: FPCoreProgram, ops=None):
    """Translate ``prog`` in place: sets ``graph``/``payload`` or ``skip``; returns prog."""
    if ops is None:
        from ..optable import OPS as ops
    if prog.skip:
        return prog
    bad = [f"{a} has :precision {p['precision']}" for a, p in prog.arg_properties.items()
           if "precision" in p and _prop_text(p["precision"]) != prog.precision]
    if bad:
        prog.skip = f"argument precision annotation ({'; '.join(bad)})"
        return prog
    b = _Builder(prog, ops)
    try:
        env = {a: b.node("input", [], a) for a in prog.arguments}
        out = b.expr(prog.body, env)
        if out in b.boolean:
            raise Untranslatable("the body is a boolean, not a real number")
    except Untranslatable as exc:
        prog.skip = str(exc)
        return prog
    except RecursionError:
        prog.skip = "expression nested too deeply"
        return prog
    from ..validate import check_payload, check_shapes
    g = Graph(b.nodes, out)
    check_shapes(g)
    check_payload(g, b.payload)
    prog.graph, prog.payload, prog.node_text = g, b.payload, b.text
    return prog


def read_fpcore(src, *, source: str | None = None, translate: bool = True) -> list:
    """Every FPCore in ``src`` (a path to a ``.fpcore`` file, or FPCore text), in order.

    Each item is an :class:`FPCoreProgram`; with ``translate`` its ``graph`` and
    ``payload`` are filled, or ``skip`` says why not.  Malformed text raises
    :class:`FPCoreError`.
    """
    text = src
    if isinstance(src, os.PathLike) or (isinstance(src, str) and "(" not in src):
        path = os.fspath(src)
        try:
            with open(path) as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise FPCoreError(f"FPCore file {path}: cannot read: {exc}") from None
        source = source or path
    source = source or "<string>"
    progs = []
    for form in parse_sexprs(text, source):
        if not (isinstance(form, list) and form and isinstance(form[0], Sym)
                and form[0].name == "FPCore"):
            raise FPCoreError(f"{source}: top-level form {to_text(form)[:60]} is not an FPCore")
        prog = _parse_fpcore(form, len(progs), source)
        if translate:
            program_graph(prog)
        progs.append(prog)
    return progs


def read_fpcore_file(path, index: int = 0):
    """``(Graph, Payload)`` of FPCore number ``index`` of a file (the CLI's graph loader);
    an untranslatable program is a :class:`GraphError` with the reason."""
    progs = read_fpcore(os.fspath(path))
    if not progs:
        raise FPCoreError(f"FPCore file {path}: holds no FPCore")
    if not 0 <= index < len(progs):
        raise FPCoreError(f"FPCore file {path}: has {len(progs)} FPCores, no #{index + 1}")
    p = progs[index]
    if p.graph is None:
        raise FPCoreError(f"FPCore file {path}: {p.name!r} cannot be translated: {p.skip}")
    return p.graph, p.payload


# ----------------------------------------------------------------------- precondition
def _const_eval(e):
    """Value of a constant expression as a Fraction, or None: exact rational arithmetic
    for literals and + - * /, mpmath at 400 bits for constants and other functions."""
    import mpmath
    mp = mpmath.MPContext()
    mp.prec = 400
    fns = {"+": lambda a, b: a + b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
           "sqrt": mp.sqrt, "exp": mp.exp, "log": mp.log, "fabs": abs, "pow": mp.power}

    def mpv(v):
        return mp.mpf(v.numerator) / v.denominator if isinstance(v, Fraction) else v

    def ev(t):
        if isinstance(t, Num):
            return t.value
        if isinstance(t, Sym):
            if t.name in _CONST_DEFS:
                return _CONST_DEFS[t.name](mp)
            if t.name == "INFINITY":
                return mp.inf
            raise Untranslatable(t.name)
        if isinstance(t, list) and t and isinstance(t[0], Sym):
            op, args = t[0].name, [ev(a) for a in t[1:]]
            exact = all(isinstance(a, Fraction) for a in args)
            if op == "-":
                return -args[0] if len(args) == 1 else args[0] - args[1]
            if op in ("+", "*", "/") and exact and len(args) == 2:
                return fns[op](*args)
            if op in fns:
                return fns[op](*[mpv(a) for a in args])
        raise Untranslatable(to_text(t))
    try:
        v = ev(e)
    except (Untranslatable, ValueError, ZeroDivisionError, TypeError):
        return None
    if isinstance(v, Fraction):
        return v
    if mp.isinf(v) or mp.isnan(v):
        return None
    return _mpf_fraction(v)


def _mpf_fraction(v) -> Fraction:
    sign, man, exp, _ = v._mpf_          # man_exp drops the sign
    q = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -q if sign else q


@dataclass
class Bound:
    """Per-argument interval from the precondition: ``lo``/``hi`` exact (None = open
    to infinity), ``lo_strict``/``hi_strict`` for ``<``."""
    lo: Fraction | None = None
    hi: Fraction | None = None
    lo_strict: bool = False
    hi_strict: bool = False

    def lower(self, v, strict):
        if self.lo is None or v > self.lo or (v == self.lo and strict):
            self.lo, self.lo_strict = v, strict

    def upper(self, v, strict):
        if self.hi is None or v < self.hi or (v == self.hi and strict):
            self.hi, self.hi_strict = v, strict

    @property
    def finite(self) -> bool:
        return self.lo is not None and self.hi is not None


def _conjuncts(e) -> list:
    if isinstance(e, list) and e and isinstance(e[0], Sym) and e[0].name == "and":
        out = []
        for t in e[1:]:
            out.extend(_conjuncts(t))
        return out
    return [e]


def precondition_boxes(pre, arguments) -> tuple:
    """``(bounds, residual)``: ``bounds`` maps every argument to a :class:`Bound` drawn
    from the conjuncts of ``pre`` that compare an argument with constants; ``residual`` is
    the list of conjuncts that are not fully captured by those bounds (samplers keep a
    sample only when all of them hold)."""
    bounds = {a: Bound() for a in arguments}
    residual = []
    if pre is None:
        return bounds, residual
    flip = {">": "<", ">=": "<="}
    for c in _conjuncts(pre):
        if isinstance(c, Sym) and c.name == "TRUE":
            continue
        if not (isinstance(c, list) and len(c) >= 3 and isinstance(c[0], Sym)
                and c[0].name in ("<", "<=", ">", ">=", "==")):
            residual.append(c)
            continue
        op, terms = c[0].name, list(c[1:])
        if op in flip:
            op, terms = flip[op], terms[::-1]
        vals = [None if isinstance(t, Sym) and t.name in bounds else _const_eval(t)
                for t in terms]
        captured = True
        for (a, va), (b, vb) in zip(zip(terms, vals), zip(terms[1:], vals[1:])):
            strict = op == "<"
            if va is not None and isinstance(b, Sym) and b.name in bounds:
                bounds[b.name].lower(va, strict)
                if op == "==":
                    bounds[b.name].upper(va, False)
            elif vb is not None and isinstance(a, Sym) and a.name in bounds:
                bounds[a.name].upper(vb, strict)
                if op == "==":
                    bounds[a.name].lower(vb, False)
            else:
                captured = False
        if not captured:
            residual.append(c)
    return bounds, residual
