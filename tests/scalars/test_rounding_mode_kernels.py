"""One compiled rounding kernel per mode: rounding in one mode loads (or compiles) that
mode's kernel only, and each mode's kernel rounds as MPFR / exact rational rounding do."""
from __future__ import annotations

import subprocess
import sys

from fractions import Fraction

import numpy as np
import pytest

from scalarlab.scalars import formats


def test_a_mode_compiles_only_its_own_kernel():
    # nearest-even onto a named format takes the float pass alone (not the blocks kernel)
    # and importing the formats loads no Numba: the kernels load on the first rounding
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from scalarlab.scalars import formats\n"
        "from scalarlab.scalars.kernels import rounding as RK\n"
        "print('numba' in sys.modules)\n"
        "formats.round_to_format(np.array([0.1, -1e-6, 7e4]), 'binary16', 'toward_zero')\n"
        "formats.round_to_format(np.array([0.1, -1e-6, 7e4]), 'e4m3')\n"
        "formats.round_to_format(np.array([0.1, -1e-6, 7e4]), 'binary64')\n"
        "used = sorted(n for n in dir(RK) if n.startswith('round_bits')\n"
        "              and getattr(getattr(RK, n), 'signatures', None))\n"
        "print(','.join(used))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False",
                                  "round_bits_nearest_even_float,round_bits_toward_zero"]


def test_nearest_even_takes_the_float_pass_exactly_where_it_applies():
    """The two nearest-even kernels split by float_path: named formats (subnormals,
    narrower than float64) on the float pass; no subnormals, 52-bit significands or a
    float64-wide exponent range on the blocks.  Both against MPFR."""
    import gmpy2
    from scalarlab.scalars.kernels import rounding as RK
    cases = {"binary16": True, "bfloat16": True, "e5m2": True, "binary32": True,
             "binary64": False, formats.Format(5, 10, subnormals=False): False,
             formats.Format(11, 40): False}
    x = _bits(np.random.default_rng(3), 200)
    for fmt, want_float in cases.items():
        f = formats.get(fmt)
        p = formats._kernel_params(f, RK.NEAREST_EVEN)
        assert RK.float_path(RK.NEAREST_EVEN, p[0], p[2], p[6]) == want_float, f.name
        got = formats.round_to_format(x, f)
        fin = np.isfinite(x)
        with gmpy2.context(formats.gmpy2_context(f)):
            want = np.array([float(gmpy2.mpfr(float(v))) for v in x[fin]])
        g = got[fin]
        assert ((g == want) & (np.signbit(g) == np.signbit(want))).all(), f.name
    # binary64 itself: every float64 bit pattern (NaN payloads included) as it is, and
    # the blocks kernel (which a copy replaces there) gives the same bits
    got = formats.round_to_format(x, "binary64").view(np.int64)
    assert np.array_equal(got, x.view(np.int64))
    blocks = np.empty_like(got)
    RK.round_bits_nearest_even_blocks(x.view(np.int64), blocks,
                                      *formats._kernel_params(formats.binary64, 0))
    assert np.array_equal(blocks, got)


def _bits(rng, n):
    """Random float64 bit patterns plus the specials and the format boundaries' area."""
    x = rng.integers(-(1 << 63), (1 << 63) - 1, size=n, dtype=np.int64).view(np.float64)
    y = rng.standard_normal(n) * np.exp2(rng.integers(-140, 20, size=n))
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 6e-8, 3e-8,
                   2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 3.4e38, 1e-45])
    return np.concatenate([x, y, sp, -sp])


@pytest.mark.parametrize("fmt", ["binary16", "bfloat16", "binary32", "binary(4,3)"])
@pytest.mark.parametrize("mode", ["nearest_away", "toward_zero", "up", "down", "odd"])
def test_the_mode_kernels_round_as_the_oracles(fmt, mode):
    """round_to_format's per-mode kernels against MPFR in the format's context (gmpy2:
    toward zero, up, down) and against exact rational rounding (round_fraction: ties away
    and round-to-odd, which MPFR lacks), on random bit patterns, scaled normals,
    subnormals, overflow and specials."""
    import gmpy2
    f = formats.get(fmt)
    x = _bits(np.random.default_rng(7), 300)
    got = formats.round_to_format(x, f, mode)
    fin = np.isfinite(x)
    assert np.array_equal(np.isnan(got), np.isnan(x))
    assert np.array_equal(got[np.isinf(x)], x[np.isinf(x)])
    if mode in ("toward_zero", "up", "down"):
        with gmpy2.context(formats.gmpy2_context(f, mode)):
            want = np.array([float(gmpy2.mpfr(float(v))) for v in x[fin]])
    else:
        want = np.array([formats.round_fraction(Fraction(float(v)), f, mode)
                         for v in x[fin]])
        # a Fraction has no signed zero: a rounded value keeps the sign of its input
        want = np.where(want == 0, np.copysign(0.0, x[fin]), want)
    g = got[fin]
    same = (g == want) & (np.signbit(g) == np.signbit(want))
    assert same.all(), (x[fin][~same][:5], g[~same][:5], want[~same][:5])
