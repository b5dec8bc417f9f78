"""Context aliases: other libraries' names for the lab's formats give the very same context
(also inside interval:/dual: names and before a variant suffix), and nothing else moves."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.registry import ALIASES, aliases, canonical

CASES = {"float32": "binary32", "fp32": "binary32", "single": "binary32",
         "float16": "binary16", "fp16": "binary16", "half": "binary16",
         "bf16": "bfloat16", "double": "float64"}


def test_the_issue_aliases_are_all_there():
    assert ALIASES == CASES == aliases()


@pytest.mark.parametrize("alias, name", sorted(CASES.items()))
def test_an_alias_is_the_same_context(alias, name):
    assert scalars.get(alias) is scalars.get(name)
    assert scalars.get(f" {alias} ").name == name
    for fam in ("interval:", "dual:"):
        assert scalars.get(fam + alias) is scalars.get(fam + name)
    # the same rounding: 0.1 + 0.2 in the aliased context equals the canonical one, bit
    # for bit, and it is the format's rounding (binary32's differs from float64's)
    a, c = scalars.get(alias), scalars.get(name)
    x = a.add(a.convert(["0.1"]), a.convert(["0.2"]))
    assert np.array_equal(a.to_float64(x), c.to_float64(c.add(c.convert(["0.1"]),
                                                               c.convert(["0.2"]))))


def test_variants_and_other_names_are_untouched():
    assert canonical("half+fma") == "binary16+fma"
    assert canonical("fp32/pairwise") == "binary32/pairwise"
    assert canonical("interval:interval:bf16") == "interval:interval:bfloat16"
    for keep in ("fp32-real", "mpmath:200", "binary(8,23)", "rational", "float64",
                 "interval:mpmath:200", "doubles", "xfp32", "e4m3"):
        assert canonical(keep) == keep
    assert scalars.get("fp32-real").name == "fp32-real"
    assert scalars.get("fp32-real") is not scalars.get("binary32")


def test_unknown_names_list_the_aliases():
    with pytest.raises(ContextError) as exc:
        scalars.get("float8")
    assert "aliases: float32, fp32, single" in str(exc.value)
    assert "float8" not in scalars.names() and "fp32" not in scalars.names()
