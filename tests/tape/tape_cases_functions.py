"""Gradient cases (tape VJP vs torch autograd and vs 200-bit central differences) of the
scalar functions FPCore needs and of the logic ops; ``test_tape_op_gradients.CASES``
pulls them in with one line.  Format: op -> (argument generators, attrs, torch function)."""
import numpy as np
import torch


def anyv(shape):
    return lambda r: r.standard_normal(shape)


def pos(shape):
    return lambda r: r.uniform(0.5, 2.0, shape)


def inside1(shape):
    return lambda r: r.uniform(-0.9, 0.9, shape)


def above1(shape):
    return lambda r: r.uniform(1.2, 3.0, shape)


def spread(shape):
    """Values over several integers (away from them, almost surely) for the rounding ops."""
    return lambda r: 3.0 * r.standard_normal(shape)


UNARY_CASES = {
    "exp2": ([anyv((3, 4))], {}, torch.exp2),
    "expm1": ([anyv((3, 4))], {}, torch.expm1),
    "log10": ([pos((3, 4))], {}, torch.log10),
    "log2": ([pos((3, 4))], {}, torch.log2),
    "log1p": ([pos((3, 4))], {}, torch.log1p),
    "cbrt": ([anyv((3, 4))], {}, lambda x: torch.sign(x) * torch.abs(x) ** (1.0 / 3.0)),
    "tan": ([inside1((3, 4))], {}, torch.tan),
    "asin": ([inside1((3, 4))], {}, torch.asin),
    "acos": ([inside1((3, 4))], {}, torch.acos),
    "sinh": ([anyv((3, 4))], {}, torch.sinh),
    "cosh": ([anyv((3, 4))], {}, torch.cosh),
    "asinh": ([anyv((3, 4))], {}, torch.asinh),
    "acosh": ([above1((3, 4))], {}, torch.acosh),
    "atanh": ([inside1((3, 4))], {}, torch.atanh),
    "erfc": ([anyv((3, 4))], {}, torch.erfc),
    "tgamma": ([pos((3, 4))], {}, lambda x: torch.exp(torch.lgamma(x))),
    "lgamma": ([pos((3, 4))], {}, torch.lgamma),
    "ceil": ([spread((3, 4))], {}, torch.ceil),
    "floor": ([spread((3, 4))], {}, torch.floor),
    "trunc": ([spread((3, 4))], {}, torch.trunc),
    "round": ([spread((3, 4))], {}, torch.round),      # no exact halves are drawn
    "nearbyint": ([spread((3, 4))], {}, torch.round),
}

def away0(shape):
    return lambda r: r.choice([-1.0, 1.0], shape) * r.uniform(0.3, 2.0, shape)


BINARY_CASES = {
    "pow": ([pos((3, 4)), anyv((4,))], {}, torch.pow),
    "atan2": ([anyv((3, 4)), anyv((3, 4))], {}, torch.atan2),
    "hypot": ([anyv((3, 4)), anyv((4,))], {}, torch.hypot),
    "fmod": ([spread((3, 4)), away0((3, 4))], {}, torch.fmod),
    # IEEE remainder (torch.remainder is the floored modulo); torch.round halves to even
    "remainder": ([spread((3, 4)), away0((4,))], {},
                  lambda x, y: x - torch.round(x / y) * y),
    "fmax": ([anyv((3, 4)), anyv((3, 4))], {}, torch.fmax),
    "fmin": ([anyv((3, 4)), anyv((4,))], {}, torch.fmin),
    "fdim": ([anyv((3, 4)), anyv((3, 4))], {}, lambda x, y: torch.clamp(x - y, min=0.0)),
    "copysign": ([away0((3, 4)), away0((3, 4))], {}, torch.copysign),
}

def _flat0(f):
    """A piecewise-constant torch function with a zero gradient for every argument."""
    return lambda *xs: f(*xs).double() + 0.0 * sum(x.sum() for x in xs)


LOGIC_CASES = {
    "lt": ([anyv((3, 4)), anyv((4,))], {}, _flat0(torch.lt)),
    "le": ([anyv((3, 4)), anyv((3, 4))], {}, _flat0(torch.le)),
    "gt": ([anyv((3, 4)), anyv((4,))], {}, _flat0(torch.gt)),
    "ge": ([anyv((3, 4)), anyv((3, 1))], {}, _flat0(torch.ge)),
    "eq": ([anyv((3, 4)), anyv((3, 4))], {}, _flat0(torch.eq)),
    "ne": ([anyv((3, 4)), anyv((4,))], {}, _flat0(torch.ne)),
    "and": ([anyv((3, 4)), anyv((3, 4))], {}, _flat0(lambda a, b: (a > 0) & (b > 0))),
    "or": ([anyv((3, 4)), anyv((4,))], {}, _flat0(lambda a, b: (a > 0) | (b > 0))),
    "not": ([anyv((3, 4))], {}, _flat0(lambda a: a <= 0)),
    "select": ([anyv((3, 4)), anyv((3, 4)), anyv((4,))], {},
               lambda c, a, b: torch.where(c > 0, a, b) + 0.0 * c.sum()),
    "fma": ([anyv((3, 4)), anyv((4,)), anyv((3, 1))], {}, lambda a, b, c: a * b + c),
    "isnan": ([anyv((3, 4))], {}, _flat0(torch.isnan)),
    "isinf": ([anyv((3, 4))], {}, _flat0(torch.isinf)),
    "isfinite": ([anyv((3, 4))], {}, _flat0(torch.isfinite)),
    "isnormal": ([anyv((3, 4))], {}, _flat0(lambda x: x != 0)),
    "signbit": ([anyv((3, 4))], {}, _flat0(torch.signbit)),
}

FUNCTION_CASES = {**UNARY_CASES, **BINARY_CASES, **LOGIC_CASES}
