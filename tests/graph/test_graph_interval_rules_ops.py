"""The interval rules of graph/interval_rules.py (log_softmax, layernorm, gelu): sound
against exact values at every vertex and at seeded interior points of the input box
(plus the critical point of gelu where it lies inside), never looser than the generic
fold, strictly tighter on the boxes below, and close to the exact range where that range
is attained at vertices (log_softmax is monotone in every input, gelu at its ends or x*)."""
from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, denote_all
from scalarlab.graph import interval_rules as R
from scalarlab.graph.fold import node_args
from scalarlab.graph.payload import as_payload
from scalarlab.graph.optable import OPS, full_attrs

CONTEXTS = ["interval:binary32", "interval:float64", "interval:mpmath:60"]
SLACK = {"interval:binary32": 2.0 ** -18, "interval:float64": 2.0 ** -44,
         "interval:mpmath:60": 2.0 ** -50}


def _mp(a):
    with mpmath.workprec(200):
        return np.array([mpmath.mpf(v) for v in np.asarray(a).reshape(-1)],
                        dtype=object).reshape(np.shape(a))


def _points(lo, hi, n_random, seed, extra=()):
    """Vertices (first), then seeded interior points, then ``extra`` points, as mpf arrays."""
    lo, hi = _mp(lo), _mp(hi)
    fl, fh = lo.reshape(-1), hi.reshape(-1)
    pts = [np.array([h if b else l for l, h, b in zip(fl, fh, bits)], dtype=object)
           for bits in itertools.product((0, 1), repeat=fl.size)]
    rng = np.random.default_rng(seed)
    with mpmath.workprec(200):
        for _ in range(n_random):
            u = rng.random(fl.size)
            pts.append(np.array([l + mpmath.mpf(float(t)) * (h - l)
                                 for l, h, t in zip(fl, fh, u)], dtype=object))
    pts.extend(extra)
    return [p.reshape(lo.shape) for p in pts]


def _check(ctx, got, generic, vals, n_exact=None, cname=None, strict=True):
    glo, ghi = _mp(got.lo), _mp(got.hi)
    for v in vals:
        assert np.all(glo <= v) and np.all(v <= ghi)
    assert np.all(glo >= _mp(generic.lo)) and np.all(ghi <= _mp(generic.hi))
    if strict:
        assert np.any(glo > _mp(generic.lo)) or np.any(ghi < _mp(generic.hi))
    if n_exact:
        vmin = np.min(np.stack(vals[:n_exact]), axis=0)
        vmax = np.max(np.stack(vals[:n_exact]), axis=0)
        scale = np.maximum(np.abs(vmin), np.abs(vmax)) + 1
        s = mpmath.mpf(SLACK[cname])
        assert np.all(vmin - glo <= s * scale) and np.all(ghi - vmax <= s * scale)


def test_rules_are_attached():
    for name in ("log_softmax", "layernorm", "gelu"):
        assert OPS[name].interval is not None


def test_minimum_constants_against_mpmath():
    """The decimal strings enclose x* (sign change of f') and bound f(x*) from below."""
    with mpmath.workdps(80):
        for m, f in ((R.GELU_MINIMUM, R._gelu_mp), (R.SILU_MINIMUM, R._silu_mp),
                     (R.GELU_TANH_MINIMUM, R._gelu_tanh_mp)):
            xb, xa = mpmath.mpf(m.x_below), mpmath.mpf(m.x_above)
            assert mpmath.diff(f, xb) < 0 < mpmath.diff(f, xa)
            for t in np.linspace(0, 1, 7):
                assert mpmath.mpf(m.f_below) < f(xb + (xa - xb) * mpmath.mpf(float(t)))
            assert f(xb) - mpmath.mpf(m.f_below) < mpmath.mpf("1e-35")
    assert abs(float(R.GELU_MINIMUM.x_below) + 0.7517915) < 1e-6
    # the spelled-out constants are what the root finder gives
    for m, f in ((R.GELU_MINIMUM, R._gelu_mp), (R.SILU_MINIMUM, R._silu_mp),
                 (R.GELU_TANH_MINIMUM, R._gelu_tanh_mp)):
        assert R._minimum_of(m.name, f, lambda x, f=f: mpmath.diff(f, x),
                             float(m.x_below)) == m
    assert abs(float(R.SILU_MINIMUM.f_below) + 0.2784645) < 1e-6


# --------------------------------------------------------------------------- log_softmax
def _log_softmax_exact(p, axis):
    p = np.moveaxis(p, axis, -1)
    out = np.empty(p.shape, dtype=object)
    with mpmath.workprec(200):
        for idx in np.ndindex(p.shape[:-1]):
            row = list(p[idx])
            lse = mpmath.log(mpmath.fsum(mpmath.exp(v) for v in row))
            out[idx] = [v - lse for v in row]
    return np.moveaxis(out, -1, axis)


LOG_SOFTMAX_BOXES = [
    ([[-1.0, 0.0, 1.0], [2.0, 2.0, 2.0]], [[1.0, 0.5, 1.0], [2.5, 2.0, 2.0]], 1),
    ([[0.1, -3.0, 0.3, 7.0]], [[0.35, -2.5, 0.3, 7.125]], -1),
    ([[-0.01, 0.02, 0.0]], [[0.01, 0.04, 0.0]], 1),
]


@pytest.mark.parametrize("cname", CONTEXTS)
@pytest.mark.parametrize("case", range(len(LOG_SOFTMAX_BOXES)))
def test_log_softmax_rule_sound_tight_and_nonpositive(cname, case):
    lo, hi, axis = LOG_SOFTMAX_BOXES[case]
    ctx = scalars.get(cname)
    x = ctx.make(np.array(lo), np.array(hi))
    g = Graph([Node(0, [], OpKind("input"), list(np.shape(lo))),
               Node(1, [0], OpKind("log_softmax", axis=axis), list(np.shape(lo)))])
    got = denote_all(g, {}, x, ctx)[1]
    rec = OPS["log_softmax"]
    generic = rec.forward(ctx, [x], full_attrs(rec, {"axis": axis}), 0)
    ax = axis % len(np.shape(lo))
    vals = [_log_softmax_exact(p, ax) for p in _points(x.lo, x.hi, 12, case)]
    _check(ctx, got, generic, vals, n_exact=2 ** int(np.size(lo)), cname=cname)
    assert np.all(_mp(got.hi) <= 0)


# ----------------------------------------------------------------------------- layernorm
def _layernorm_exact(p, axis, gamma, beta, eps):
    r = p.ndim
    axes = tuple(range(axis, r))
    lead = p.shape[:axis]
    out = np.empty(p.shape, dtype=object)
    with mpmath.workprec(200):
        for idx in np.ndindex(lead):
            blk = p[idx].reshape(-1)
            n = len(blk)
            mu = mpmath.fsum(blk) / n
            var = mpmath.fsum((v - mu) ** 2 for v in blk) / n
            inv = 1 / mpmath.sqrt(var + eps)
            y = [(v - mu) * inv * g + b for v, g, b in
                 zip(blk, gamma.reshape(-1), beta.reshape(-1))]
            out[idx] = np.array(y, dtype=object).reshape(p.shape[axis:])
    return out


LAYERNORM_BOXES = [   # (lo, hi, axis, gamma, beta)
    ([[-1.0, 0.0, 1.0, 0.5]], [[-0.5, 0.25, 1.5, 0.75]], 1,
     [1.0, 2.0, -0.5, 1.0], [0.0, 0.5, 0.0, -1.0]),
    ([[0.0, 0.1, 0.2]], [[0.3, 0.4, 0.5]], 1, [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]),
    ([[-2.0, 3.0], [0.5, 0.5]], [[-1.0, 3.5], [1.0, 0.75]], 0,
     [[1.0, 1.0], [1.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]),
]


@pytest.mark.parametrize("cname", CONTEXTS)
@pytest.mark.parametrize("case", range(len(LAYERNORM_BOXES)))
def test_layernorm_rule_sound_and_tighter(cname, case):
    lo, hi, axis, gamma, beta = LAYERNORM_BOXES[case]
    ctx = scalars.get(cname)
    shape = list(np.shape(lo))
    g = Graph([Node(0, [], OpKind("input"), shape),
               Node(1, [0], OpKind("layernorm", axis=axis), shape)])
    payload = {1: {"gamma": np.array(gamma), "beta": np.array(beta), "eps": "1e-5"}}
    x = ctx.make(np.array(lo), np.array(hi))
    got = denote_all(g, payload, x, ctx)[1]
    rec = OPS["layernorm"]
    args, attrs = node_args(g, as_payload(payload), ctx, g.nodes[1], [x, None])
    generic = rec.forward(ctx, args, attrs, 0)
    with mpmath.workprec(200):
        eps = mpmath.mpf(1) / 100000
    vals = [_layernorm_exact(p, axis, _mp(gamma), _mp(beta), eps)
            for p in _points(x.lo, x.hi, 40, case)]
    _check(ctx, got, generic, vals)


# ---------------------------------------------------------------------------------- gelu
def _gelu_exact(p):
    with mpmath.workprec(200):
        return np.array([v * mpmath.ncdf(v) for v in p.reshape(-1)],
                        dtype=object).reshape(p.shape)


GELU_LO = [-3.0, -1.0, -0.5, 0.2, -2.0, -0.8, -0.76, -40.0, 5.0]
GELU_HI = [-2.0, 0.5, -0.4, 1.0, 3.0, -0.7, -0.75, -30.0, 5.0]


@pytest.mark.parametrize("cname", CONTEXTS)
def test_gelu_rule_sound_and_tight(cname):
    ctx = scalars.get(cname)
    x = ctx.make(np.array(GELU_LO), np.array(GELU_HI))
    g = Graph([Node(0, [], OpKind("input"), [len(GELU_LO)]),
               Node(1, [0], OpKind("gelu"), [len(GELU_LO)])])
    got = denote_all(g, {}, x, ctx)[1]
    generic = OPS["gelu"].forward(ctx, [x], {}, 0)
    glo, ghi = _mp(got.lo), _mp(got.hi)
    glo_g, ghi_g = _mp(generic.lo), _mp(generic.hi)
    assert np.all(glo >= glo_g) and np.all(ghi <= ghi_g)
    assert np.sum((glo > glo_g) | (ghi < ghi_g)) >= 4
    with mpmath.workprec(200):
        xs = mpmath.mpf(R.GELU_MINIMUM.x_below)
        fmin = _gelu_exact(np.array([xs], dtype=object))[0]
        rng = np.random.default_rng(0)
        for k, (l, h) in enumerate(zip(_mp(x.lo), _mp(x.hi))):
            pts = [l, h] + [l + mpmath.mpf(float(t)) * (h - l) for t in rng.random(20)]
            exact = [v * mpmath.ncdf(v) for v in pts]
            if l <= xs <= h:
                exact.append(fmin)
            assert all(glo[k] <= v <= ghi[k] for v in exact), (cname, k)
            # tight: within rounding slack of the exact range (ends or the minimum)
            lo_ex, hi_ex = min(exact[:2] + exact[-1:]), max(exact[:2])
            s = mpmath.mpf(SLACK[cname]) * (abs(lo_ex) + abs(hi_ex) + 1)
            if l <= xs <= h:
                assert lo_ex - glo[k] <= s + mpmath.mpf("1e-39")
            else:
                assert lo_ex - glo[k] <= s, (cname, k)
            assert ghi[k] - hi_ex <= s, (cname, k)
