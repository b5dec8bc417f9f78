"""The branch-free rounding of scalars.kernels.rounding (_round_sel, used for every block
that holds a value outside the format's normal range) equals the scalar reference
_round_one on random float64 bit patterns, for every deterministic mode and formats with
and without subnormals, infinities and saturation; the parallel path equals the serial
one.  (Against MPFR: tests/scalars/test_formats_*.py, exhaustive where they are.)"""
from __future__ import annotations

import numba
import numpy as np
import pytest

from scalarlab.scalars import formats as F
from scalarlab.scalars.kernels import rounding as RK
MODES = {"nearest_even": RK.NEAREST_EVEN, "nearest_away": RK.NEAREST_AWAY,
         "toward_zero": RK.TOWARD_ZERO, "up": RK.UP, "down": RK.DOWN, "odd": RK.ODD}
FORMATS = [F.binary16, F.bfloat16, F.e4m3, F.e5m2, F.binary32, F.tf32,
           F.Format(11, 40), F.Format(5, 10, subnormals=False),
           F.Format(4, 3, saturate=True), F.Format(3, 1, has_inf=False, saturate=True)]


@numba.njit(cache=True)
def _reference(xb, out, mode, sh0, emin_field, subnormals, halfq_bits, q_bits, q_exp,
               max_bits, over_pos, over_neg, inf_pos, inf_neg):
    for i in range(xb.size):
        out[i] = RK._round_one(xb[i], mode, 0, sh0, emin_field, subnormals, halfq_bits,
                               q_bits, q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg)


def _inputs(fmt, rng):
    """Random patterns (all of float64), values around the format's range edges, specials,
    shuffled so that most 256-blocks mix normal and special values."""
    pats = rng.integers(-2 ** 63, 2 ** 63 - 1, 4000, dtype=np.int64).view(np.float64)
    with np.errstate(over="ignore"):
        scale = np.exp2(rng.uniform(fmt.emin - fmt.man_bits - 3, fmt.emax + 2, 6000))
    near = rng.choice([-1.0, 1.0], 6000) * scale
    with np.errstate(invalid="ignore"):
        q = F.ulp(np.abs(near), fmt)
    ties = F.round_to_format(near, fmt, "toward_zero") + np.sign(near) * q / 2
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.0 ** -1022,
                   fmt.max_finite, -fmt.max_finite, fmt.min_normal / 2, fmt.min_normal])
    x = np.concatenate([pats, near, ties, sp])
    rng.shuffle(x)
    return x


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_branch_free_equals_the_scalar_reference(fmt):
    rng = np.random.default_rng(fmt.exp_bits * 100 + fmt.man_bits)
    x = _inputs(fmt, rng)
    xb = x.view(np.int64)
    for name, code in MODES.items():
        params = F._kernel_params(fmt, code)
        want = np.empty_like(xb)
        _reference(xb, want, code, *params)
        got = F.round_to_format(x, fmt, name).view(np.int64)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (f"{fmt.name} {name}: {bad.size} differ, first "
                               f"x={x[bad[0]]!r}: {got[bad[0]]:#x} vs {want[bad[0]]:#x}")


# -m slow: compiling the parallel=True kernel is ~8 s of CPU on a cold cache, all of this
# test's cost, and nothing else in the lab calls it (an opt-in of round_to_format, used by
# bench/rounding.py); its loop body is the serial kernels' (checked here bit for bit)
@pytest.mark.slow
def test_parallel_path_equals_serial():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(300_000) * 10.0 ** rng.uniform(-8, 8, 300_000)
    x[::997] = np.nan
    for fmt in (F.binary16, F.bfloat16, F.e4m3):
        a = F.round_to_format(x, fmt).view(np.int64)
        b = F.round_to_format(x, fmt, parallel=True).view(np.int64)
        assert np.array_equal(a, b)
