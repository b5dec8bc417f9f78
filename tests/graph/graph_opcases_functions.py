"""Op test cases of the scalar functions FPCore needs (exp2 ... lgamma, the rounding
functions, the binary functions pow ... copysign, fma) and of the logic ops (comparisons,
and/or/not, select), in the format of :mod:`graph_opcases`; that module pulls them into
its shared ``CASES`` with one line (``function_cases(case)``).

References are independent of the op rules: numpy / math / torch in float64, and Python's
exact ``Fraction`` arithmetic for the cases marked exact."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch

T = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731


def vec(f):
    """Elementwise Python function -> array function (works on Fraction object arrays)."""
    def g(*xs):
        return np.asarray(np.frompyfunc(f, len(xs), 1)(*xs))
    return g


def above_one(rng, shape):
    """acosh's domain: (1.1, 3)."""
    return rng.uniform(1.1, 3.0, size=shape)


def _round_half_away(x):
    r = math.floor(abs(x) + Fraction(1, 2)) if isinstance(x, Fraction) else \
        math.floor(abs(x) + 0.5)
    return -r if x < 0 else r


def unary_cases(case):
    return [
        case("exp2", [(2, 3)], np.exp2),
        case("expm1", [(2, 3)], np.expm1),
        case("log10", [(2, 3)], np.log10, domain={0: "pos"}),
        case("log2", [(2, 3)], np.log2, domain={0: "pos"}),
        case("log1p", [(2, 3)], np.log1p),
        case("cbrt", [(2, 3)], np.cbrt),
        case("tan", [(2, 3)], np.tan),
        case("asin", [(2, 3)], np.arcsin),
        case("acos", [(2, 3)], np.arccos),
        case("sinh", [(2, 3)], np.sinh),
        case("cosh", [(2, 3)], np.cosh),
        case("asinh", [(2, 3)], np.arcsinh),
        case("acosh", [(2, 3)], np.arccosh, domain={0: above_one}),
        case("atanh", [(2, 3)], np.arctanh),
        case("erfc", [(2, 3)], lambda a: torch.special.erfc(T(a)).numpy()),
        case("tgamma", [(2, 3)], vec(math.gamma), domain={0: "pos"}),
        case("lgamma", [(2, 3)], vec(math.lgamma), domain={0: "pos"}),
        case("ceil", [(2, 3)], vec(math.ceil), exact=True, smooth=False),
        case("floor", [(2, 3)], vec(math.floor), exact=True, smooth=False),
        case("trunc", [(2, 3)], vec(math.trunc), exact=True, smooth=False),
        case("round", [(2, 3)], vec(_round_half_away), exact=True, smooth=False),
        case("nearbyint", [(2, 3)], vec(round), exact=True, smooth=False),
    ]


def _fmod(x, y):
    n = x / y
    n = math.floor(n) if n >= 0 else math.ceil(n)
    return x - n * y


def _remainder(x, y):
    if isinstance(x, Fraction) or isinstance(y, Fraction):
        return x - round(Fraction(x) / Fraction(y)) * y     # Fraction: halves to even
    return math.remainder(x, y)


def _copysign(x, y):
    return -abs(x) if y < 0 else abs(x)


def binary_cases(case):
    return [
        case("pow", [(2, 3), (3,)], np.power, domain={0: "pos"}),
        case("atan2", [(2, 3), (2, 3)], np.arctan2),
        case("hypot", [(3,), (2, 3)], np.hypot),
        case("fmod", [(2, 3), (2, 3)], vec(_fmod), domain={1: "pos"}, exact=True),
        case("remainder", [(2, 3), (3,)], vec(_remainder), domain={1: "pos"}, exact=True),
        case("fmax", [(2, 3), (2, 3)], vec(max), exact=True, smooth=False),
        case("fmin", [(2, 3), (3,)], vec(min), exact=True, smooth=False),
        case("fdim", [(2, 3), (2, 3)], vec(lambda x, y: max(x - y, 0)), exact=True,
             smooth=False),
        case("copysign", [(2, 3), (2, 3)], vec(_copysign), exact=True, smooth=False),
    ]


def _cmp(f):
    return vec(lambda x, y: 1 if f(x, y) else 0)


def logic_cases(case):
    """Comparisons give 0/1; and/or/not/select read a value as true when > 0."""
    return [
        case("lt", [(2, 3), (3,)], _cmp(lambda x, y: x < y), exact=True, smooth=False),
        case("le", [(2, 3), (2, 3)], _cmp(lambda x, y: x <= y), exact=True, smooth=False),
        case("gt", [(2, 3), (3,)], _cmp(lambda x, y: x > y), exact=True, smooth=False),
        case("ge", [(2, 3), (2, 1)], _cmp(lambda x, y: x >= y), exact=True, smooth=False),
        case("eq", [(2, 3), (2, 3)], _cmp(lambda x, y: x == y), exact=True, smooth=False),
        case("ne", [(2, 3), (3,)], _cmp(lambda x, y: x != y), exact=True, smooth=False),
        case("and", [(2, 3), (2, 3)], _cmp(lambda x, y: x > 0 and y > 0), exact=True,
             smooth=False),
        case("or", [(2, 3), (3,)], _cmp(lambda x, y: x > 0 or y > 0), exact=True,
             smooth=False),
        case("not", [(2, 3)], vec(lambda x: 0 if x > 0 else 1), exact=True, smooth=False),
        case("select", [(2, 3), (2, 3), (3,)], vec(lambda c, a, b: a if c > 0 else b),
             exact=True, smooth=False),
        case("fma", [(2, 3), (3,), (2, 1)], lambda a, b, c: a * b + c, exact=True),
        # the predicates on finite draws (special values: tests/graph/test_graph_logic_ops.py)
        case("isnan", [(2, 3)], vec(lambda x: 0), exact=True, smooth=False),
        case("isinf", [(2, 3)], vec(lambda x: 0), exact=True, smooth=False),
        case("isfinite", [(2, 3)], vec(lambda x: 1), exact=True, smooth=False),
        case("isnormal", [(2, 3)], vec(lambda x: 1 if x != 0 else 0), exact=True,
             smooth=False),
        case("signbit", [(2, 3)], vec(lambda x: 1 if x < 0 else 0), exact=True, smooth=False),
    ]


def function_cases(case):
    """Every case of this module."""
    return unary_cases(case) + binary_cases(case) + logic_cases(case)
