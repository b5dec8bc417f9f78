"""A read-only input (a frozen box end, a broadcast view) reuses the specialization a
writable one compiled: Numba's array type includes the read-only flag, and a second
specialization of these kernels costs 0.3-1.6 s of CPU on a cold cache (the entry points
pass inputs through scalars.kernels.flat).  Values are compared with the writable call."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab.scalars import formats as F
from scalarlab.scalars.kernels import directed as DK
from scalarlab.scalars.kernels import f64_endpoints as FE
from scalarlab.scalars.kernels import grid as GK
from scalarlab.scalars.kernels import interval_affine as IA
from scalarlab.scalars.kernels import interval_f64 as IK
from scalarlab.scalars.kernels import rounding as RK
from scalarlab.scalars.kernels.flat import flat_f64


def _settle(x):
    raise AssertionError(f"no end of these arguments needs MPFR: {x!r}")


CALLS = {
    "grid.div": (lambda a, b, c, d: GK.div_grid(a, b, c, d, a.shape, F.binary32),
                 GK.div_kernel),
    "grid.mul": (lambda a, b, c, d: GK.mul_grid(a, b, c, d, a.shape, F.binary32),
                 GK.mul_kernel),
    "f64_endpoints.tanh": (lambda a, b, c, d: FE.endpoints("tanh", c, b, _settle),
                           FE.tanh_kernel),
    "interval_f64.div": (lambda a, b, c, d: IK.div_f64(a, b, c, d, a.shape), IK.div_kernel),
    "directed.add_pair": (lambda a, b, c, d: DK.add_pair_dir(a, b, c, d, a.shape),
                          DK._add_pair_kernel),
    "directed.abs_scan": (lambda a, b, c, d: DK.abs_scan(a, 1)[:2], DK._abs_scan_kernel),
    "formats.round_to_format": (lambda a, b, c, d: (F.round_to_format(a, F.binary16),),
                                RK.kernels().round_bits_nearest_even_float),
    # prep_rows writes into per-key scratch arrays: copies, so a later call keeps them
    "interval_affine.prep_rows": (lambda a, b, c, d: [np.copy(v) for v in
                                                      IA.prep_rows(a, b, 2.0 ** -50, "sig")[:3]],
                                  IA._prep_rows_kernel),
}


def _read_only(*arrays):
    out = [a.copy() for a in arrays]
    for a in out:
        a.flags.writeable = False
    return out


@pytest.mark.parametrize("name", list(CALLS))
def test_read_only_and_broadcast_inputs_share_one_specialization(name):
    """Writable operands, read-only ones, and a row broadcast against the full shape (a
    copy before, a read-only view at the full shape): one compiled signature, the same
    values as the writable call on the broadcast operands written out."""
    call, kernel = CALLS[name]
    lo = np.array([[0.5, 1.25, 3.0], [0.75, 2.5, 6.0]])
    hi = lo * 1.5
    row_lo, row_hi = np.array([4.0, 0.5, 1.5]), np.array([8.0, 0.75, 2.0])
    full = [np.broadcast_to(r, lo.shape).copy() for r in (row_lo, row_hi)]
    want_full = call(lo, hi, lo + 4, hi + 4)
    n = len(kernel.signatures)
    for args, want in [((lo, hi, lo + 4, hi + 4), want_full),
                       (_read_only(lo, hi, lo + 4, hi + 4), want_full),
                       ((lo, hi, row_lo, row_hi), call(lo, hi, *full)),
                       ((lo, hi, *_read_only(row_lo, row_hi)), call(lo, hi, *full))]:
        got = call(*args)
        assert len(kernel.signatures) == n, kernel.signatures
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_flat_f64_copies_only_a_read_only_input():
    x = np.arange(6.0).reshape(2, 3)
    assert np.shares_memory(flat_f64(x), x)
    b = np.broadcast_to(np.arange(3.0), (2, 3))       # read-only view: copied, C order
    f = flat_f64(b)
    assert f.flags.writeable and f.flags.c_contiguous and f.tolist() == [0, 1, 2, 0, 1, 2]
    assert flat_f64(np.float64(2.0), (3,)).tolist() == [2.0, 2.0, 2.0]
