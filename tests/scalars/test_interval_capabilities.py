"""The interval contexts' declared capabilities, which code outside scalars/ reads instead
of names (ibp.containment's checked guarantee, CROWN's rounding facts)."""
import pytest

from scalarlab import scalars
from scalarlab.ibp.containment import checked_guarantee


@pytest.mark.parametrize("base", ["float64", "binary32", "bfloat16", "binary(5,10)",
                                  "rational", "mpmath:80"])
def test_has_base_is_the_base_and_nothing_else(base):
    ictx = scalars.get(f"interval:{base}")
    assert ictx.has_base(scalars.get(base))
    others = {"float64", "binary32", "bfloat16", "rational", "mpmath:80"} - {base}
    for other in sorted(others):
        assert not ictx.has_base(scalars.get(other)), other


def test_other_orders_of_the_same_format_are_not_the_base():
    # the execution guarantee speaks of the base's own (sequential) runs: a pairwise or
    # fused-dot context of the same format, or the format under another name, is another
    # point context (checked as "real")
    ictx = scalars.get("interval:binary32")
    assert ictx.base is scalars.get("binary32")
    for other in ("binary32/pairwise", "binary32+fma", "binary(8,23)"):
        assert not ictx.has_base(scalars.get(other)), other
        assert checked_guarantee(scalars.get(other), ictx) == "real"


@pytest.mark.parametrize("point, interval, expect", [
    ("binary32", "interval:binary32", "execution"),
    ("float64", "interval:float64", "execution"),
    ("rational", "interval:rational", "execution"),
    ("float64", "interval:binary32", "real"),
    ("mpmath:80", "interval:float64", "real"),
])
def test_checked_guarantee_reads_has_base(point, interval, expect):
    assert checked_guarantee(scalars.get(point), scalars.get(interval)) == expect


@pytest.mark.parametrize("name, kind, fmt, f64", [
    ("interval:float64", "float", "binary64", True),
    ("interval:binary32", "float", "binary32", False),
    ("interval:rational", "rational", None, False),
    ("interval:mpmath:80", "mpmath", None, False),
])
def test_endpoint_capabilities(name, kind, fmt, f64):
    ictx = scalars.get(name)
    assert ictx.endpoint_kind == kind
    got = ictx.endpoint_format
    assert (None if got is None else got.name) == fmt
    assert ictx.float64_endpoints is f64
