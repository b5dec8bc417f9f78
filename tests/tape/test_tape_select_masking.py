"""Typed graphs (grad / vjp / jvp / hvp of programs) evaluate only the ``select`` branch
the condition takes, in values, tangents and cotangents alike: a guarded domain error
(sqrt or log of a negative) never runs.  Exact values in rationals, finite differences
and the dual-context cross-check in float64."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from scalarlab.scalars.base import to_fraction
from scalarlab.tape import TapeError, grad, hvp, jvp, vjp
from scalarlab.tape.typed_graph import TypedGraph


def abs_sqrt(ops, x):
    """sqrt(|x|) written with a guard: each branch is a domain error on the other side."""
    zero = ops.const(0.0)
    return ops.select(ops.lt(x, zero), ops.sqrt(ops.neg(x)), ops.sqrt(x))


def guarded_log(ops, x):
    """x < 0 ? log(-x) * x : (x < 4 ? x * x : log(x - 3))"""
    return ops.select(ops.lt(x, ops.const(0.0)), ops.mul(ops.log(ops.neg(x)), x),
                      ops.select(ops.lt(x, ops.const(4.0)), ops.mul(x, x),
                                 ops.log(ops.sub(x, ops.const(3.0)))))


def _f(v):
    return to_fraction(np.asarray(v).item())


@pytest.mark.parametrize("x, dy, d2y", [("-4", Fraction(-1, 4), Fraction(-1, 32)),
                                        ("9", Fraction(1, 6), Fraction(-1, 108)),
                                        ("-1/16", Fraction(-2), Fraction(-16))])
def test_grad_jvp_hvp_of_a_guarded_sqrt_are_exact_in_rationals(x, dy, d2y):
    q = "rational"
    assert _f(grad(abs_sqrt, ctx=q)(x)) == dy
    y, t = jvp(abs_sqrt, (x,), ("1",), ctx=q)
    assert _f(t) == dy and _f(y) ** 2 == abs(Fraction(x))
    y, back = vjp(abs_sqrt, x, ctx=q)
    assert _f(back("1")[0]) == dy
    assert _f(hvp(abs_sqrt, (x,), "1", ctx=q)) == d2y


@pytest.mark.parametrize("x", [-2.5, -0.75, 1.5, 3.0, 7.0])
def test_nested_guarded_log_against_finite_differences_and_duals(x):
    g = float(grad(guarded_log)(x))
    h = 1e-6
    fd = (float(jvp(guarded_log, (x + h,), (0.0,))[0]) -
          float(jvp(guarded_log, (x - h,), (0.0,))[0])) / (2 * h)
    assert abs(g - fd) <= 1e-8 * max(1.0, abs(g))
    exact = (np.log(-x) + 1 if x < 0 else 2 * x if x < 4 else 1 / (x - 3))
    assert abs(g - exact) <= 1e-15 * abs(exact)
    _, t_rules = jvp(guarded_log, (x,), (1.0,))
    _, t_dual = jvp(guarded_log, (x,), (1.0,), method="dual")
    assert float(t_rules) == float(t_dual) == g
    second = float(hvp(guarded_log, (x,), 1.0))
    want = 1 / -x * -1 if x < 0 else 2.0 if x < 4 else -1 / (x - 3) ** 2
    assert abs(second - want) <= 1e-14 * abs(want)


def test_untaken_nodes_hold_no_value_and_a_taken_error_still_raises():
    tg = TypedGraph([()])
    x = tg.inputs[0]
    lt = tg.apply("lt", x, tg.const(0.0))
    bad = tg.apply("sqrt", x)                          # guarded the wrong way round
    tg.set_output(tg.apply("select", lt, bad, tg.apply("neg", x)))
    vals = tg.forward_all("float64", [np.array(4.0)])
    assert float(vals[-1]) == -4.0 and vals[bad.index] is None
    with pytest.raises(TapeError, match=rf"typed graph node {bad.index} \(sqrt\)"):
        tg.forward_all("float64", [np.array(-4.0)])
    # a guard done right: sqrt(-x) does not run at x = 4 ... unless read outside it too
    tg2 = TypedGraph([()])
    x = tg2.inputs[0]
    s = tg2.apply("sqrt", tg2.apply("neg", x))
    sel = tg2.set_output(tg2.apply("select", tg2.apply("lt", x, tg2.const(0.0)), s, x))
    assert float(tg2.forward("float64", [np.array(4.0)])) == 4.0
    tg2.set_output(tg2.apply("add", sel, s))
    with pytest.raises(TapeError, match=rf"typed graph node {s.index} \(sqrt\)"):
        tg2.forward("float64", [np.array(4.0)])


def _random_program(rng):
    """(ops list, program): random sqrt/add/mul/neg/select DAGs, selects nested at
    random, the last two nodes added."""
    spec = [("x", ()), ("c", float(rng.integers(-2, 3))), ("c", 0.5)]
    for _ in range(int(rng.integers(10, 30))):
        n = len(spec)
        pick = lambda: int(rng.integers(n))  # noqa: E731
        op = rng.choice(["add", "mul", "neg", "sqrt", "sqrt", "select", "select"])
        if op in ("neg", "sqrt"):
            spec.append((op, (pick(),)))
        elif op == "select":
            spec.append(("select", (pick(), pick(), pick(), pick())))
        else:
            spec.append((op, (pick(), pick())))
    spec.append(("add", (len(spec) - 1, len(spec) - 2)))

    def program(ops, x):
        v = []
        for op, a in spec:
            if op == "x":
                v.append(x)
            elif op == "c":
                v.append(ops.const(a))
            elif op == "select":
                v.append(ops.select(ops.lt(v[a[0]], v[a[1]]), v[a[2]], v[a[3]]))
            else:
                v.append(ops.apply(op, *(v[i] for i in a)))
        return v[-1]

    used = {i for op, a in spec if op not in ("x", "c") for i in a}
    sinks = [k for k in range(len(spec)) if k not in used]

    def lazy(t):
        """The output, None when a node the program asks for is out of domain: every
        node nothing reads (the program computed it), through the selects it takes."""
        memo = {}
        stack = list(sinks)
        while stack:
            k = stack[-1]
            op, a = spec[k]
            if k in memo:
                stack.pop()
                continue
            if op == "select":
                if a[0] not in memo or a[1] not in memo:
                    stack += [i for i in a[:2] if i not in memo]
                    continue
                if memo[a[0]] is None or memo[a[1]] is None:
                    memo[k] = None
                    continue
                b = a[2] if memo[a[0]] < memo[a[1]] else a[3]
                if b not in memo:
                    stack.append(b)
                    continue
                memo[k] = memo[b]
                continue
            deps = [] if op in ("x", "c") else [i for i in a if i not in memo]
            if deps:
                stack += deps
                continue
            vals = [] if op in ("x", "c") else [memo[i] for i in a]
            if any(q is None for q in vals):
                memo[k] = None
            elif op == "x":
                memo[k] = t
            elif op == "c":
                memo[k] = a
            elif op == "sqrt":
                memo[k] = math.sqrt(vals[0]) if vals[0] >= 0 else None
            else:
                memo[k] = {"add": lambda: vals[0] + vals[1], "mul": lambda: vals[0] * vals[1],
                           "neg": lambda: -vals[0]}[op]()
        return None if any(memo[k] is None for k in sinks) else memo[len(spec) - 1]
    return program, lazy


@pytest.mark.parametrize("seed", range(6))
def test_random_guarded_programs_equal_their_lazy_reading(seed):
    """grad / jvp of random guarded programs: defined samples never raise, the values
    equal the lazy reading, the gradient equals the rules' tangent (up to the order of
    the reverse sums); undefined ones raise."""
    rng = np.random.default_rng(seed)
    program, lazy = _random_program(rng)
    for t in rng.uniform(-3, 3, 12):
        want = lazy(float(t))
        if want is None:
            with pytest.raises(TapeError, match=r"\(sqrt\)"):
                jvp(program, (t,), (1.0,))
            continue
        y, dy = jvp(program, (t,), (1.0,))
        assert float(y) == want
        if np.isfinite(float(dy)):   # (at a singular point, 0 * inf differs by mode)
            assert abs(float(grad(program)(t)) - float(dy)) <= 1e-12 * abs(float(dy))
