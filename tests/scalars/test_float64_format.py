"""float64 declares its format (binary64) and stays a hardware context.

Consumers decide by capability flags (reduction, correctly_rounded, exact), never by the
context's name or by ``fmt is None``: float64 has a format but is not an emulation of it.
"""
from __future__ import annotations

import numpy as np

from scalarlab import scalars
from scalarlab.scalars import formats


def test_float64_fmt_is_binary64_and_reduction_native():
    f = scalars.get("float64")
    assert f.fmt is formats.binary64 and f.fmt.is_binary64
    assert f.reduction == "native" and not f.exact
    assert "exp" not in f.correctly_rounded          # libm, not correctly rounded
    assert f.properties()["format"] == "binary64"
    assert scalars.get("dual:float64").fmt is formats.binary64


def test_float64_values_are_binary64_values():
    f = scalars.get("float64")
    x = f.div(f.convert([1.0, 2.0, -7.0]), f.convert(3.0))
    np.testing.assert_array_equal(formats.round_to_format(x, f.fmt), x)


def test_binary64_spec_and_emulated_context_agree_with_float64():
    # the emulated binary64 context (NATIVE kernels) and hardware float64 agree on + - * /
    b, f = scalars.get("binary64"), scalars.get("float64")
    assert b.fmt == f.fmt
    rng = np.random.default_rng(5)
    a = rng.standard_normal(1000) * 2.0 ** rng.integers(-60, 60, 1000)
    c = rng.standard_normal(1000)
    for op in ("add", "sub", "mul", "div"):
        np.testing.assert_array_equal(getattr(b, op)(b.convert(a), b.convert(c)),
                                      getattr(f, op)(a, c))
