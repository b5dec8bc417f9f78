"""The registry under concurrent first use, and its import structure.

The first ``scalars.get`` reads every context module's tables; threads that arrive while
that is under way must wait for it, not see a half-filled registry.  Run in a fresh
interpreter so that the first lookup really is the first.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from scalarlab import scalars
from scalarlab.scalars import registry

_SCRIPT = textwrap.dedent("""
    import threading
    from scalarlab import scalars

    N = 8
    barrier = threading.Barrier(N)
    results, errors = [None] * N, []

    def work(i):
        barrier.wait()
        try:
            results[i] = scalars.get("interval:binary32")
        except Exception as exc:
            errors.append(f"thread {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert all(r is results[0] for r in results), "one context object per name"
    assert results[0].name == "interval:binary32"
    assert results[0].base.name == "binary32"
    print("ok", len(scalars.names()))
""")


def test_first_lookups_from_eight_threads_at_once():
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")
    assert int(out.stdout.split()[1]) == len(scalars.names())


def test_context_modules_declare_tables_and_do_not_import_the_registry():
    import ast
    import importlib
    import pathlib
    for mod in registry.CONTEXT_MODULES:
        module = importlib.import_module(f"scalarlab.scalars.{mod}")
        assert isinstance(module.CONTEXT_NAMES, dict) and module.CONTEXT_NAMES, mod
        tree = ast.parse(pathlib.Path(module.__file__).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "registry" not in imported, f"scalars.{mod} imports the registry"


def test_unknown_name_lists_names_and_families():
    with pytest.raises(scalars.ContextError, match=r"unknown context 'binary99'.*float64.*"
                                                   r"families: .*interval:BASE"):
        scalars.get("binary99")


def test_registered_from_outside_after_the_builtins():
    from scalarlab.scalars.float64 import Float64Context

    class Renamed(Float64Context):
        name = "float64-renamed-for-test"

    scalars.register_name(Renamed.name, Renamed)
    try:
        assert scalars.names()[-1] == Renamed.name
        assert scalars.get(Renamed.name).name == Renamed.name
    finally:
        registry._NAMED.pop(Renamed.name, None)
        registry._CACHE.pop(Renamed.name, None)
