"""The scalars tests' fixtures.

``SCALARLAB_TEST_MPFR_GLOBAL=hostile`` sets gmpy2's global context to 2 bits of precision
rounding away from zero around every test: an mpfr operation that escapes the directed
contexts of the endpoint code (a unary minus, abs, an operator, a conversion without an
explicit precision) then gives a wrong value instead of a nearly right one, and the
oracle comparisons of the suites catch it (tests/scalars/test_mpfr_global_context.py
runs the endpoint suites this way)."""
from __future__ import annotations

import os

import gmpy2
import pytest

HOSTILE = os.environ.get("SCALARLAB_TEST_MPFR_GLOBAL") == "hostile"


@pytest.fixture(autouse=True)
def _mpfr_global_context():
    if not HOSTILE:
        yield
        return
    saved = gmpy2.get_context().copy()
    gmpy2.set_context(gmpy2.context(precision=2, round=gmpy2.RoundAwayZero))
    try:
        yield
    finally:
        gmpy2.set_context(saved)
