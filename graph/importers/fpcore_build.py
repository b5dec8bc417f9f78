"""The one FPCore expression -> IR translator, shared by program bodies, ``:alt`` forms,
preconditions and the constant bounds samplers read from them.

* one ``input`` node of shape ``[]`` per name the caller binds (a program's arguments);
* literals and the standard's constants become ``const`` nodes whose payload is EXACT
  (``p/q`` strings, a Fraction for very long ones; the irrational constants as 120 correct
  decimal digits), so every context rounds each of them once, correctly, into its own
  format -- the FPCore meaning of a constant in a rounding context.  With
  ``exact_constants`` (conditions decided in interval contexts) the irrational constants
  are computed by the graph instead (``PI`` = 4 atan 1, ``E`` = exp 1, ...), so an interval
  context encloses the real constant itself, not its 120-digit decimal;
* ``let``/``let*`` bind names to nodes (no node is duplicated); calls of other named
  FPCores of the same file are inlined (arity checked; recursion is refused, since
  inlining it would not end); ``+ - * /`` take any number of arguments (``/`` two or more),
  folded left to right as FPCore 2.0 specifies (``(* x)`` is x; ``-`` of one argument
  is ``neg``); comparisons chain
  (``!=`` means pairwise distinct); ``and or not``, the predicates and ``if`` (``select``)
  are IR ops with 0/1 truth values;
* ``(! props e)`` annotations are recorded; a ``:precision`` equal to the enclosing one
  is transparent, a literal annotated with another binary precision is rounded to it
  (nearest even), any other change of precision is refused (the graph runs in ONE
  context); ``cast`` is then the identity.

What cannot be translated raises :class:`Untranslatable` with the reason (loops, tensors,
mixed precision, an op the table lacks, ...).
"""
from __future__ import annotations

from fractions import Fraction

from ..node import Graph, Node, OpKind
from ..payload import Payload
from .fpcore_parse import (LITERAL_EXP2_LIMIT, Num, Str, Sym, Untranslatable, digits_value,
                           to_text)

__all__ = ["CONSTANTS", "CONST_DIGITS", "OP_NAMES", "const_value", "Builder",
           "build_expression", "annotation_parts"]

# ------------------------------------------------------------------------- constants
#: The standard's named constants as functions of an mpmath context.
_CONST_DEFS = {
    "E": lambda mp: mp.e, "LOG2E": lambda mp: 1 / mp.log(2), "LOG10E": lambda mp: 1 / mp.log(10),
    "LN2": lambda mp: mp.log(2), "LN10": lambda mp: mp.log(10), "PI": lambda mp: mp.pi,
    "PI_2": lambda mp: mp.pi / 2, "PI_4": lambda mp: mp.pi / 4, "M_1_PI": lambda mp: 1 / mp.pi,
    "M_2_PI": lambda mp: 2 / mp.pi, "M_2_SQRTPI": lambda mp: 2 / mp.sqrt(mp.pi),
    "SQRT2": lambda mp: mp.sqrt(2), "SQRT1_2": lambda mp: 1 / mp.sqrt(2),
}
#: The same constants as IR expressions over exact literals (``exact_constants``): an
#: interval context then encloses the real constant (atan, exp, log, sqrt are enclosed
#: with directed endpoints), never a decimal approximation of it.
_CONST_EXPRS = {
    "E": "(exp 1)", "LOG2E": "(/ 1 (log 2))", "LOG10E": "(/ 1 (log 10))", "LN2": "(log 2)",
    "LN10": "(log 10)", "PI": "(* 4 (atan 1))", "PI_2": "(* 2 (atan 1))", "PI_4": "(atan 1)",
    "M_1_PI": "(/ 1 (* 4 (atan 1)))", "M_2_PI": "(/ 1 (* 2 (atan 1)))",
    "M_2_SQRTPI": "(/ 1 (sqrt (atan 1)))", "SQRT2": "(sqrt 2)", "SQRT1_2": "(/ 1 (sqrt 2))",
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
OP_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "div", "fabs": "abs", "<": "lt",
            "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
_UNARY = {"fabs", "exp", "exp2", "expm1", "log", "log10", "log2", "log1p", "sqrt", "cbrt",
          "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
          "acosh", "atanh", "erf", "erfc", "tgamma", "lgamma", "ceil", "floor", "trunc",
          "round", "nearbyint"}
_BINARY = {"pow", "hypot", "atan2", "fmod", "remainder", "fmax", "fmin", "fdim",
           "copysign"}
_VARIADIC = {"+", "-", "*", "/"}
_TERNARY = {"fma"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}
_PREDICATES = {"isfinite", "isinf", "isnan", "isnormal", "signbit"}
_LOOPS = {"while", "while*", "for", "for*"}
_BUILTIN = _UNARY | _BINARY | _VARIADIC | _TERNARY
_TENSOR = {"array", "dim", "size", "ref", "tensor", "tensor*"}
#: Binary formats a literal may be annotated with (rounded by scalars.formats).
_LITERAL_FORMATS = {"binary16", "binary32", "binary64", "bfloat16"}
#: Payload strings are built for exact values up to this many bits (Python refuses to
#: print integers of more than 4300 digits); longer ones stay Fractions.
_STR_BITS = 12000
#: Most nodes one translation may create (inlined calls can multiply a body).
MAX_NODES = 200_000


def annotation_parts(form, where: str = "FPCore"):
    """``(! :p v ... expr)`` -> (props, expr)."""
    props, body, items, i = {}, None, form[1:], 0
    while i < len(items):
        t = items[i]
        if isinstance(t, Sym) and t.name.startswith(":"):
            if i + 1 >= len(items):
                raise Untranslatable(f"{where}: property {t.name} has no value")
            props[t.name[1:]] = items[i + 1]
            i += 2
            continue
        if body is not None:
            raise Untranslatable(f"annotation {to_text(form)} has more than one expression")
        body = t
        i += 1
    if body is None:
        raise Untranslatable(f"annotation {to_text(form)} has no expression")
    return props, body


def _prop_text(v) -> str:
    return v.text if isinstance(v, Str) else to_text(v)


def _payload_value(v):
    """An exact literal value as a payload entry (see the module docstring)."""
    if isinstance(v, float):
        return v
    if v.numerator.bit_length() > _STR_BITS or v.denominator.bit_length() > _STR_BITS:
        return v
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


class Builder:
    """Grows one graph from FPCore expressions (see the module docstring).

    ``functions``: the named FPCores of the file (``ident -> program`` with
    ``arguments``, ``body``, ``precision``, ``skip``), inlined where called."""

    def __init__(self, ops=None, *, precision: str = "binary64", functions=None,
                 exact_constants: bool = False):
        if ops is None:
            from ..optable import OPS as ops
        self.ops = ops
        self.nodes: list = []
        self.text: list = []
        self.payload = Payload()
        self.boolean: set = set()
        self.consts: dict = {}
        self.precision = [precision]
        self.functions = functions or {}
        self.exact_constants = exact_constants
        self.calls: list = []
        self.annotations: list = []          # (text, {prop: text}) per `!` met
        self.notes: list = []                # literals taken as +-inf / +-0

    # ------------------------------------------------------------------ nodes
    def node(self, op, parents, text, **attrs) -> int:
        if op not in self.ops:
            raise Untranslatable(f"op {op} not supported")
        if len(self.nodes) >= MAX_NODES:
            raise Untranslatable(f"the graph would exceed {MAX_NODES} nodes (inlined calls)")
        i = len(self.nodes)
        self.nodes.append(Node(i, list(parents), OpKind(op, **attrs), []))
        self.text.append(text)
        return i

    def inputs(self, names) -> dict:
        return {a: self.node("input", [], a) for a in names}

    def const(self, key, value, text) -> int:
        if key in self.consts:
            return self.consts[key]
        i = self.node("const", [], text)
        self.payload.set(i, {"value": value}, op="const")
        self.consts[key] = i
        return i

    def literal(self, v, text: str) -> int:
        if isinstance(v, float):                    # a clamped literal: +-inf or +-0
            if self.exact_constants:
                # a condition compares exact values: +-0 or +-inf is not the literal there
                raise Untranslatable(f"literal {text} lies beyond 2^+-{LITERAL_EXP2_LIMIT} "
                                     f"(every format rounds it to {v}, but a condition "
                                     f"needs its exact value)")
            self.notes.append(f"literal {text if len(text) <= 40 else text[:37] + '...'} "
                              f"lies beyond 2^+-{LITERAL_EXP2_LIMIT}: taken as {v}, what "
                              f"every format rounds it to")
            return self.const(("float", repr(v)), v, text)
        return self.const(("num", v), _payload_value(v), text)

    def graph(self, out: int):
        """``(Graph, Payload)`` with output ``out``, validated."""
        from ..validate import check_payload, check_shapes
        g = Graph(self.nodes, out)
        check_shapes(g)
        check_payload(g, self.payload)
        return g, self.payload

    # -------------------------------------------------------------- expressions
    def expr(self, e, env) -> int:
        if isinstance(e, Num):
            return self.literal(e.value, e.text)
        if isinstance(e, Sym):
            if e.name in env:
                return env[e.name]
            if e.name in CONSTANTS:
                return self.constant(e.name)
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
        if op in CONSTANTS and not args:            # (PI): a constant written as a call
            return self.constant(op)
        if op in ("let", "let*"):
            return self.let(op, args, env, text)
        if op in _LOOPS:
            raise Untranslatable(f"{op}: loops are not supported (the IR has no loop node, "
                                 f"and unrolling a data-dependent trip count is not the "
                                 f"same program)")
        if op in _TENSOR:
            raise Untranslatable(f"{op}: tensors are not supported (array/tensor forms)")
        if op == "cast":
            if len(args) != 1:
                raise Untranslatable(f"cast takes 1 argument: {text}")
            # every subexpression is computed in the one precision (a change of precision
            # is refused by `!`), so rounding to it again changes nothing
            return self.expr(args[0], env)
        if op == "digits":
            if len(args) != 3 or not all(isinstance(a, Num) and not a.clamped for a in args):
                raise Untranslatable(f"bad digits form {text} (three integer literals)")
            try:
                v, _ = digits_value(*(a.value for a in args))
            except ValueError as exc:
                raise Untranslatable(f"{text}: {exc}") from None
            return self.literal(v, text)
        if op == "!":
            return self.annotated(e, env)
        if op == "if":
            return self.if_(args, env, text)
        if op in _COMPARE:
            return self.compare(op, args, env, text)
        if op in ("and", "or", "not", "=>"):
            return self.logic(op, args, env, text)
        if op in _PREDICATES:
            if len(args) != 1:
                raise Untranslatable(f"{op} takes 1 argument: {text}")
            return self._bool(op, [self.real(args[0], env)], text)
        if op in self.functions and op not in _BUILTIN:     # the standard's ops win
            return self.call(op, args, env, text)
        if op in _VARIADIC:
            ids = [self.real(a, env) for a in args]
            if op == "-" and len(ids) == 1:
                return self.node("neg", ids, text)
            if len(ids) == 1 and op != "/":         # (* x), (+ x): x itself, no rounding
                return ids[0]
            if len(ids) < (2 if op == "/" else 1):
                raise Untranslatable(f"{op} takes {'2' if op == '/' else '1'} or more "
                                     f"arguments: {text}")
            out = ids[0]
            for j, b in enumerate(ids[1:]):         # left to right: ((a op b) op c) ...
                out = self.node(OP_NAMES[op], [out, b],
                                text if j == len(ids) - 2 else f"({op} ...)")
            return out
        n = 1 if op in _UNARY else 2 if op in _BINARY else 3 if op in _TERNARY else None
        if n is None:
            raise Untranslatable(f"op {op} not supported (not an FPCore operation nor a "
                                 f"named FPCore of this file)")
        if len(args) != n:
            raise Untranslatable(f"{op} takes {n} argument{'s' if n > 1 else ''}: {text}")
        return self.node(OP_NAMES.get(op, op), [self.real(a, env) for a in args], text)

    def constant(self, name) -> int:
        if name in ("TRUE", "FALSE"):
            i = self.const(("bool", name), "1" if name == "TRUE" else "0", name)
            self.boolean.add(i)
            return i
        if self.exact_constants and name in _CONST_EXPRS:
            if ("expr", name) not in self.consts:
                from .fpcore_parse import parse_sexprs
                e, = parse_sexprs(_CONST_EXPRS[name])
                self.consts[("expr", name)] = self.expr(e, {})
            return self.consts[("expr", name)]
        return self.const(("const", name), const_value(name), name)

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

    def _bool(self, name, parents, text) -> int:
        i = self.node(name, parents, text)
        self.boolean.add(i)
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

    def if_(self, args, env, text) -> int:
        if len(args) != 3:
            raise Untranslatable(f"if takes 3 arguments: {text}")
        c = self.boolean_expr(args[0], env)
        a, b = self.expr(args[1], env), self.expr(args[2], env)
        if (a in self.boolean) != (b in self.boolean):
            raise Untranslatable(f"the branches of {text} are a number and a boolean")
        i = self.node("select", [c, a, b], text)
        if a in self.boolean:
            self.boolean.add(i)
        return i

    def call(self, name, args, env, text) -> int:
        fn = self.functions[name]
        if name in self.calls:
            chain = " -> ".join(self.calls[self.calls.index(name):] + [name])
            raise Untranslatable(f"recursive call {chain} (named FPCores are inlined; "
                                 f"recursion is not supported)")
        if len(args) != len(fn.arguments):
            raise Untranslatable(f"{name} takes {len(fn.arguments)} argument"
                                 f"{'s' if len(fn.arguments) != 1 else ''}, {text} gives "
                                 f"{len(args)}")
        if getattr(fn, "arg_skip", None):
            raise Untranslatable(f"calls {name}, which cannot be translated: {fn.arg_skip}")
        declared = fn.properties.get("precision")
        if declared is not None and declared not in (self.precision[-1], "real"):
            raise Untranslatable(f"calls {name} of :precision {declared} from "
                                 f"{self.precision[-1]} code (mixed precision: the graph "
                                 f"runs in one context)")
        ids = [self.expr(a, env) for a in args]
        self.calls.append(name)
        try:
            return self.expr(fn.body, dict(zip(fn.arguments, ids)))
        finally:
            self.calls.pop()

    def annotated(self, e, env) -> int:
        props, body = annotation_parts(e)
        props = {k: _prop_text(v) for k, v in props.items()}
        self.annotations.append((to_text(e) if len(to_text(e)) <= 80 else
                                 to_text(e)[:77] + "...", props))
        rnd = props.get("round")
        if rnd not in (None, "nearestEven"):
            raise Untranslatable(f"rounding mode annotation :round {rnd} (the graph rounds "
                                 f"to nearest even)")
        prec = props.get("precision")
        if prec is None or prec == self.precision[-1]:
            return self.expr(body, env)
        if isinstance(body, Num) and not body.clamped and prec in _LITERAL_FORMATS:
            from scalarlab.scalars import formats
            v = formats.round_fraction(body.value, prec, "nearest_even")
            return self.literal(Fraction(float(v)) if abs(float(v)) != float("inf")
                                else float(v), to_text(e))
        raise Untranslatable(f"precision annotation (! :precision {prec} ...) inside "
                             f"{self.precision[-1]} code (mixed precision: the graph runs "
                             f"in one context)")

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
            c = self._bool(name, [a, b], text if len(pairs) == 1 else f"({op} ...)")
            out = c if out is None else self._bool("and", [out, c], text)
        return out

    def logic(self, op, args, env, text) -> int:
        if op == "not":
            if len(args) != 1:
                raise Untranslatable(f"not takes 1 argument: {text}")
            return self._bool("not", [self.boolean_expr(args[0], env)], text)
        if op == "=>":                       # implication (FPBench preconditions use it)
            if len(args) != 2:
                raise Untranslatable(f"=> takes 2 arguments: {text}")
            a, b = (self.boolean_expr(t, env) for t in args)
            return self._bool("or", [self._bool("not", [a], text), b], text)
        if not args:
            return self.constant("TRUE" if op == "and" else "FALSE")
        ids = [self.boolean_expr(a, env) for a in args]
        out = ids[0]
        for b in ids[1:]:
            out = self._bool(op, [out, b], text)
        return out


def build_expression(expr, names, *, precision="binary64", functions=None,
                     exact_constants=False, boolean=None, ops=None, ident=None):
    """``(builder, out)``: ``expr`` translated with one input per name of ``names`` (ids in
    that order).  ``boolean``: True/False to require a truth value / a number at the
    output (Untranslatable otherwise); ``ident``: the name of the FPCore being translated
    (a call of it is recursion)."""
    b = Builder(ops, precision=precision, functions=functions,
                exact_constants=exact_constants)
    if ident is not None:
        b.calls.append(ident)
    env = b.inputs(names)
    try:
        out = b.expr(expr, env)
    except RecursionError:
        raise Untranslatable("expression nested too deeply") from None
    if boolean is True and out not in b.boolean:
        raise Untranslatable(f"{to_text(expr)[:60]} is a number, not a condition")
    if boolean is False and out in b.boolean:
        raise Untranslatable("the body is a boolean, not a real number")
    return b, out
