"""Format parameters, names, lookup errors, and bit-pattern encode/decode vs real dtypes."""
from __future__ import annotations

import math

import ml_dtypes  # installed with onnx (test extra); provides real float8/bfloat16 dtypes
import numpy as np
import pytest

from scalarlab.scalars import formats as F
from scalarlab.scalars.errors import FormatError


@pytest.mark.parametrize("fmt,params", [
    (F.binary64, (53, 1023, -1022, 1023, 1.7976931348623157e308, 2.0 ** -1022, 2.0 ** -1074)),
    (F.binary32, (24, 127, -126, 127, float(np.finfo(np.float32).max), 2.0 ** -126,
                  2.0 ** -149)),
    (F.binary16, (11, 15, -14, 15, 65504.0, 2.0 ** -14, 2.0 ** -24)),
    (F.bfloat16, (8, 127, -126, 127, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max),
                  2.0 ** -126, 2.0 ** -133)),
    (F.tf32, (11, 127, -126, 127, (2 - 2.0 ** -10) * 2.0 ** 127, 2.0 ** -126, 2.0 ** -136)),
    (F.e5m2, (3, 15, -14, 15, 57344.0, 2.0 ** -14, 2.0 ** -16)),
    (F.e4m3, (4, 7, -6, 8, 448.0, 2.0 ** -6, 2.0 ** -9)),
], ids=lambda v: v.name if isinstance(v, F.Format) else "")
def test_named_format_parameters(fmt, params):
    got = (fmt.precision, fmt.bias, fmt.emin, fmt.emax, fmt.max_finite, fmt.min_normal,
           fmt.min_subnormal)
    assert got == params


@pytest.mark.parametrize("dt,fmt", [(ml_dtypes.float8_e4m3fn, F.e4m3),
                                    (ml_dtypes.float8_e5m2, F.e5m2),
                                    (ml_dtypes.bfloat16, F.bfloat16),
                                    (np.float16, F.binary16), (np.float32, F.binary32)])
def test_extremes_match_real_dtypes(dt, fmt):
    fi = ml_dtypes.finfo(dt) if dt not in (np.float16, np.float32) else np.finfo(dt)
    assert fmt.max_finite == float(fi.max)
    assert fmt.min_normal == float(fi.smallest_normal)
    assert fmt.min_subnormal == float(fi.smallest_subnormal)
    assert fmt.precision == fi.nmant + 1


def test_names_and_get():
    assert F.binary32.name == "binary32" and str(F.e4m3) == "e4m3"
    assert F.get("binary16") is F.binary16
    b = F.get("binary(5,2)")
    assert b == F.e5m2 and b.name == "binary(5,2)"  # same format, unlabelled
    assert F.get(" binary( 8 , 23 ) ") == F.binary32
    assert F.get(F.tf32) is F.tf32
    assert F.Format(8, 7).name == "bfloat16"  # an unlabelled equal format finds its name
    assert F.Format(5, 10, subnormals=False).name == "binary(5,10)[nosub]"
    assert F.Format(4, 3, has_inf=False, nan_encoding="fn", saturate=True).name == \
        "binary(4,3)[fn,sat]"
    assert hash(F.get("binary(8,23)")) == hash(F.binary32)
    assert set(F.names()) >= {"binary64", "binary32", "binary16", "bfloat16", "tf32", "e5m2",
                              "e4m3"}


def test_get_unknown_lists_valid_names():
    with pytest.raises(FormatError) as ei:
        F.get("float8")
    msg = str(ei.value)
    assert "'float8'" in msg and all(n in msg for n in ("binary32", "bfloat16", "e4m3",
                                                        "binary(E,M)"))
    with pytest.raises(FormatError, match="must be a string"):
        F.get(32)


@pytest.mark.parametrize("kwargs,match", [
    (dict(exp_bits=1, man_bits=3), "exp_bits=1 out of range"),
    (dict(exp_bits=12, man_bits=3), "exp_bits=12 out of range"),
    (dict(exp_bits=5, man_bits=0), "man_bits=0 out of range"),
    (dict(exp_bits=5, man_bits=53), "man_bits=53"),
    (dict(exp_bits=5.0, man_bits=3), "exp_bits must be an int"),
    (dict(exp_bits=5, man_bits=3, nan_encoding="fnuz"), "nan_encoding='fnuz'"),
    (dict(exp_bits=4, man_bits=3, nan_encoding="fn"), "has_inf=False"),
    (dict(exp_bits=11, man_bits=3, has_inf=False, nan_encoding="fn"), "emax=1024"),
    (dict(exp_bits=5, man_bits=3, subnormals=1), "subnormals must be a bool"),
])
def test_bad_format_parameters(kwargs, match):
    with pytest.raises(FormatError, match=match):
        F.Format(**kwargs)


def test_format_is_frozen():
    with pytest.raises(Exception):
        F.binary16.man_bits = 3


def _view_values(dt, nbits):
    codes = np.arange(1 << nbits, dtype=np.uint16 if nbits == 16 else np.uint8)
    with np.errstate(invalid="ignore"):
        return codes, codes.view(dt).astype(np.float64)


@pytest.mark.parametrize("dt,fmt,nbits", [(np.float16, F.binary16, 16),
                                          (ml_dtypes.bfloat16, F.bfloat16, 16),
                                          (ml_dtypes.float8_e4m3fn, F.e4m3, 8),
                                          (ml_dtypes.float8_e5m2, F.e5m2, 8)])
def test_decode_encode_every_code(dt, fmt, nbits):
    codes, ref = _view_values(dt, nbits)
    dec = F.decode(codes, fmt)
    assert ((dec == ref) & (np.signbit(dec) == np.signbit(ref)) |
            (np.isnan(dec) & np.isnan(ref))).all()
    enc = F.encode(dec, fmt)
    fin = ~np.isnan(dec)
    assert (enc[fin] == codes[fin]).all()
    assert np.isnan(F.decode(F.encode(np.nan, fmt), fmt))


def test_decode_encode_binary32_sample():
    codes = np.random.default_rng(2).integers(0, 1 << 32, 100_000, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        ref = codes.astype(np.uint32).view(np.float32).astype(np.float64)
    dec = F.decode(codes, F.binary32)
    assert ((dec == ref) | (np.isnan(dec) & np.isnan(ref))).all()
    fin = ~np.isnan(dec)
    assert (F.encode(dec[fin], F.binary32) == codes[fin]).all()


def test_decode_without_subnormals_marks_unused_codes():
    f = F.Format(4, 3, subnormals=False)
    v = F.decode(np.arange(8), f)
    assert v[0] == 0 and np.isnan(v[1:]).all()
    assert F.decode(8, f) == f.min_normal


def test_encode_decode_errors():
    with pytest.raises(F.ContextError, match="0.1.* is not a binary16 value"):
        F.encode([1.0, 0.1], F.binary16)
    with pytest.raises(F.ContextError, match="infinity is not a e4m3 value"):
        F.encode([np.inf], F.e4m3)
    with pytest.raises(F.ContextError, match="codes must lie in"):
        F.decode([256], F.e5m2)
    with pytest.raises(F.ContextError, match="codes must be integers"):
        F.decode([1.5], F.e5m2)


def test_e4m3_value_set():
    v = F.decode(np.arange(256), F.e4m3)
    fin = np.unique(v[~np.isnan(v)])
    assert fin.size == 253  # 254 non-NaN codes, ±0 merge
    assert fin.max() == 448 and np.isnan(v[0x7F]) and np.isnan(v[0xFF])
    assert math.isclose(np.sort(fin[fin > 0])[0], 2.0 ** -9)
