"""The import graph of the installed ``scalarlab`` package: no cycles, the layer rules hold.

The graph is read from the source with :mod:`ast`, never by importing: every ``import`` and
``from ... import`` statement, at module level and inside functions (a function-level import
is still a dependency, it only runs later), relative imports resolved against the module's
package.  ``from P import name`` is an edge to the module ``P.name`` when that is a module,
else to ``P`` itself.  The implicit import of parent packages (``import a.b.c`` runs
``a/__init__`` and ``a/b/__init__`` first) is not an edge: it would make every package
``__init__`` that re-exports its modules a cycle.  Imports under ``if TYPE_CHECKING:`` never
run and are ignored.  ``importlib.import_module("scalarlab.x.y")`` with a literal string is
a *dynamic* edge: the layer rules apply to it, the cycle check does not (a dynamic load is
how a lower layer finds a plug-in above it).

Layer rules (CONTRIBUTING.md, DESIGN.md "The house"), by top-level subpackage:

* ``scalars`` imports nothing else of scalarlab;
* ``graph`` -> ``scalars``; only ``graph.plan`` may load ``cuda_kernels.provider`` and only
  dynamically (by name);
* ``tape`` -> ``graph``, ``scalars``;
* ``ibp`` -> ``graph``, ``scalars``;
* ``cuda_kernels`` -> ``graph.plan``, ``graph.errors``, ``scalars``;
* ``experiments`` -> anything; nothing outside ``experiments`` imports it.

No module spells the pre-package top-level names (``import graph``, ``from scalars import``).

``python tests/test_layers.py`` prints the current violations (exit status 1 if any).
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT_PACKAGE = "scalarlab"
SUBPACKAGES = ("scalars", "graph", "tape", "ibp", "cuda_kernels", "experiments")

# layer -> the other layers it may import (itself always allowed).  None: anything.
ALLOWED_LAYERS = {
    "scalars": set(),
    "graph": {"scalars"},
    "tape": {"graph", "scalars"},
    "ibp": {"graph", "scalars"},
    "cuda_kernels": {"graph", "scalars"},
    "experiments": None,
}
# Finer rules: (importing layer, imported layer) -> the imported modules allowed (prefix match).
ALLOWED_MODULES = {
    ("cuda_kernels", "graph"): ("scalarlab.graph.plan", "scalarlab.graph.errors"),
}
# Single allowed edges across the layers, only as dynamic loads: (importer, imported).
ALLOWED_DYNAMIC = {("scalarlab.graph.plan", "scalarlab.cuda_kernels.provider")}


@dataclass(frozen=True)
class Edge:
    src: str          # importing module
    dst: str          # imported scalarlab module
    line: int
    dynamic: bool = False

    def where(self, files) -> str:
        return f"{files[self.src]}:{self.line}"


# ------------------------------------------------------------------ reading the package
def find_modules(pkg_dir: Path, root: str = ROOT_PACKAGE, subpackages=SUBPACKAGES) -> dict:
    """``{module name: path relative to pkg_dir}`` for the root ``__init__`` and every
    module of the listed subpackages (folders with an ``__init__.py``, recursively)."""
    mods = {root: Path("__init__.py")}
    stack = [pkg_dir / s for s in subpackages]
    while stack:
        d = stack.pop()
        if not (d / "__init__.py").is_file():
            continue
        rel = d.relative_to(pkg_dir)
        base = ".".join((root,) + rel.parts)
        for f in sorted(d.iterdir()):
            if f.is_dir():
                stack.append(f)
            elif f.suffix == ".py":
                name = base if f.name == "__init__.py" else f"{base}.{f.stem}"
                mods[name] = f.relative_to(pkg_dir)
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` (iterative walk)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve_relative(module: str, is_package: bool, level: int, target) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(base) - 1:
        raise ValueError(f"{module}: relative import beyond the top-level package")
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def raw_imports(name: str, is_package: bool, source: str) -> list:
    """``(absolute name, imported names or None, line, dynamic)`` for every import
    statement of a module; for ``from X import a, b`` the names are ``["a", "b"]``."""
    out = []
    for node in _statements(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append((alias.name, None, node.lineno, False))
        elif isinstance(node, ast.ImportFrom):
            target = node.module
            if node.level:
                target = _resolve_relative(name, is_package, node.level, node.module)
            out.append((target, [a.name for a in node.names], node.lineno, False))
        elif isinstance(node, ast.Call) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if fname in ("import_module", "__import__"):
                out.append((node.args[0].value, None, node.lineno, True))
    return out


def build_graph(pkg_dir: Path, root: str = ROOT_PACKAGE, subpackages=SUBPACKAGES):
    """``(modules, edges, old_names, unresolved)``: the package's modules, its internal
    import edges, imports of the pre-package top-level names and imports of scalarlab
    modules that do not exist."""
    mods = find_modules(pkg_dir, root, subpackages)
    edges, old, unresolved = [], [], []
    for name, rel in mods.items():
        is_pkg = rel.name == "__init__.py"
        for target, names, line, dynamic in raw_imports(name, is_pkg,
                                                        (pkg_dir / rel).read_text()):
            first = target.split(".")[0]
            if first in subpackages:
                old.append((name, target, line))
                continue
            if first != root:
                continue
            if target not in mods:
                unresolved.append((name, target, line))
                continue
            if names is None:
                edges.append(Edge(name, target, line, dynamic))
                continue
            for n in names:
                sub = f"{target}.{n}"
                edges.append(Edge(name, sub if sub in mods else target, line, dynamic))
    edges = list(dict.fromkeys(edges))       # one edge per statement and imported module
    return mods, edges, old, unresolved


# ------------------------------------------------------------------------------ cycles
def strongly_connected(nodes, succ) -> list:
    """Tarjan's algorithm, iterative (no recursion limit): the components of size > 1."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
    return sorted(comps)


def shortest_cycle(comp, succ) -> list:
    """One shortest cycle through the first module of a component (breadth-first)."""
    start, members = comp[0], set(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(succ.get(v, ())):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # unreachable for a real component


def cycle_violations(mods, edges) -> list:
    succ, line_of = {}, {}
    for e in edges:
        if e.dynamic or e.src == e.dst:
            continue        # a dynamic load runs later; a module naming itself is no cycle
        succ.setdefault(e.src, set()).add(e.dst)
        line_of.setdefault((e.src, e.dst), e.line)
    out = []
    for comp in strongly_connected(mods, succ):
        cyc = shortest_cycle(comp, succ)
        hops = " -> ".join(f"{a} ({mods[a]}:{line_of[(a, b)]})" for a, b in zip(cyc, cyc[1:]))
        out.append(f"import cycle: {hops} -> {cyc[-1]}"
                   + (f"  [component of {len(comp)} modules: {', '.join(comp)}]"
                      if len(comp) > len(cyc) - 1 else ""))
    return out


# ------------------------------------------------------------------------------ layers
def layer_of(module: str):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None     # None: the root package


def layer_violations(mods, edges) -> list:
    out = []
    for e in edges:
        src, dst = layer_of(e.src), layer_of(e.dst)
        if dst is None or src == dst:
            continue        # the root package (lazy subpackages) or the same layer
        where = f"{mods[e.src]}:{e.line}"
        how = "loads (by name)" if e.dynamic else "imports"
        if (e.src, e.dst) in ALLOWED_DYNAMIC:
            if not e.dynamic:
                out.append(f"layer: {e.src} {how} {e.dst} ({where}); allowed only as a dynamic "
                           f"load by name (importlib.import_module)")
            continue
        if dst == "experiments" and src != "experiments":
            out.append(f"layer: {e.src} {how} {e.dst} ({where}); nothing outside experiments "
                       f"may import experiments")
            continue
        allowed = ALLOWED_LAYERS.get(src)
        if src is None or allowed is None:
            continue        # the root package, experiments: anything
        if dst not in allowed:
            may = ", ".join(sorted(allowed)) or "nothing else of scalarlab"
            out.append(f"layer: {e.src} {how} {e.dst} ({where}); {src} may import: {may}")
            continue
        mods_ok = ALLOWED_MODULES.get((src, dst))
        if mods_ok is not None and not any(e.dst == m or e.dst.startswith(m + ".")
                                           for m in mods_ok):
            out.append(f"layer: {e.src} {how} {e.dst} ({where}); {src} may import from {dst} "
                       f"only {', '.join(mods_ok)}")
    return out


def all_violations(pkg_dir: Path) -> dict:
    mods, edges, old, unresolved = build_graph(pkg_dir)
    return {
        "cycles": cycle_violations(mods, edges),
        "layers": layer_violations(mods, edges),
        "old names": [f"old top-level name: {m} imports {t!r} ({mods[m]}:{ln}); write "
                      f"scalarlab.{t} or a relative import" for m, t, ln in old],
        "unresolved": [f"unresolved: {m} imports {t!r} ({mods[m]}:{ln}), which is not a "
                       f"module of the package" for m, t, ln in unresolved],
    }


def _package_dir() -> Path:
    import scalarlab
    return Path(scalarlab.__file__).parent


@pytest.fixture(scope="module")
def violations():
    return all_violations(_package_dir())


def _fail_if(found: list, what: str):
    if found:
        pytest.fail(f"{len(found)} {what}:\n  " + "\n  ".join(found), pytrace=False)


def test_package_has_every_layer():
    mods = find_modules(_package_dir())
    layers = {layer_of(m) for m in mods}
    assert layers == {None, *SUBPACKAGES}
    assert "scalarlab.graph.fold" in mods and "scalarlab.scalars" in mods


def test_no_import_cycles(violations):
    _fail_if(violations["cycles"], "import cycle(s)")


def test_layer_rules(violations):
    _fail_if(violations["layers"], "layer rule violation(s)")


def test_no_old_top_level_names(violations):
    _fail_if(violations["old names"], "import(s) of pre-package top-level names")


def test_every_internal_import_resolves(violations):
    _fail_if(violations["unresolved"], "import(s) of missing scalarlab modules")


# ----------------------------------------------------- the checker on a package we know
def _write(base: Path, files: dict):
    for rel, text in files.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_checker_finds_what_it_should(tmp_path):
    """A made-up package with one of each violation: the checker reports exactly those."""
    _write(tmp_path, {
        "__init__.py": "",
        "scalars/__init__.py": "from .a import A\n",
        "scalars/a.py": "from . import b\nA = 1\n",
        "scalars/b.py": "def f():\n    from .a import A   # function-level: still an edge\n",
        "scalars/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        "    from scalarlab.graph import fold\n",
        "graph/__init__.py": "from .fold import run\n",
        "graph/fold.py": "from ..scalars import a\nimport scalarlab.scalars.b\n"
                         "from scalarlab.scalars import A\ndef run():\n    pass\n",
        "graph/plan.py": "import importlib\nimport numpy\n"
                         "def load():\n    importlib.import_module('scalarlab.cuda_kernels.provider')\n"
                         "    importlib.import_module('scalarlab.tape.core')\n",
        "graph/bad.py": "from scalarlab.tape import core\nfrom scalarlab.graph import nothere\n"
                        "from scalarlab.graph.missing import x\n",
        "tape/__init__.py": "",
        "tape/core.py": "from scalarlab.graph import fold\nfrom scalarlab.experiments import cli\n",
        "cuda_kernels/__init__.py": "",
        "cuda_kernels/provider.py": "from scalarlab.graph.plan import load\n"
                                    "from scalarlab.graph import fold\nimport graph.fold\n",
        "ibp/__init__.py": "",
        "experiments/__init__.py": "",
        "experiments/cli.py": "from scalarlab.cuda_kernels import provider\nfrom .. import tape\n",
    })
    mods, edges, old, unresolved = build_graph(tmp_path)
    assert set(mods) == {
        "scalarlab", "scalarlab.scalars", "scalarlab.scalars.a", "scalarlab.scalars.b",
        "scalarlab.scalars.c", "scalarlab.graph", "scalarlab.graph.fold", "scalarlab.graph.plan",
        "scalarlab.graph.bad", "scalarlab.tape", "scalarlab.tape.core", "scalarlab.cuda_kernels",
        "scalarlab.cuda_kernels.provider", "scalarlab.ibp", "scalarlab.experiments",
        "scalarlab.experiments.cli"}
    got = {(e.src, e.dst, e.dynamic) for e in edges}
    assert ("scalarlab.scalars.b", "scalarlab.scalars.a", False) in got
    assert ("scalarlab.graph.fold", "scalarlab.scalars.a", False) in got
    assert ("scalarlab.graph.fold", "scalarlab.scalars", False) in got   # A is not a module
    assert ("scalarlab.graph.plan", "scalarlab.cuda_kernels.provider", True) in got
    assert ("scalarlab.experiments.cli", "scalarlab.tape", False) in got
    assert not any(e.src == "scalarlab.scalars.c" for e in edges)          # TYPE_CHECKING
    assert old == [("scalarlab.cuda_kernels.provider", "graph.fold", 3)]
    assert unresolved == [("scalarlab.graph.bad", "scalarlab.graph.missing", 3)]

    cycles = cycle_violations(mods, edges)
    # a <-> b is a cycle; scalars/__init__ -> a is not part of it (no parent-package edges)
    assert len(cycles) == 1 and cycles[0].startswith(
        "import cycle: scalarlab.scalars.a (scalars/a.py:1) -> scalarlab.scalars.b "
        "(scalars/b.py:2) -> scalarlab.scalars.a"), cycles

    layers = layer_violations(mods, edges)
    expect = [
        "layer: scalarlab.graph.bad imports scalarlab.tape.core (graph/bad.py:1); "
        "graph may import: scalars",
        "layer: scalarlab.graph.plan loads (by name) scalarlab.tape.core (graph/plan.py:5); "
        "graph may import: scalars",
        "layer: scalarlab.tape.core imports scalarlab.experiments.cli (tape/core.py:2); "
        "nothing outside experiments may import experiments",
        "layer: scalarlab.cuda_kernels.provider imports scalarlab.graph.fold "
        "(cuda_kernels/provider.py:2); cuda_kernels may import from graph only "
        "scalarlab.graph.plan, scalarlab.graph.errors",
    ]
    assert sorted(layers) == sorted(expect), layers


def test_checker_reports_a_cycle_through_a_package_init(tmp_path):
    """``from scalarlab.graph import X`` inside graph/ while graph/__init__ imports that
    module is a real cycle (the module sees a half-initialised package)."""
    _write(tmp_path, {
        "__init__.py": "",
        "graph/__init__.py": "from .optable import OPS\n",
        "graph/optable.py": "OPS = {}\nfrom . import ops_a\n",
        "graph/ops_a.py": "from .optable import OPS\n",
    })
    mods, edges, _, _ = build_graph(tmp_path, subpackages=("graph",))
    cycles = cycle_violations(mods, edges)
    assert cycles == ["import cycle: scalarlab.graph.ops_a (graph/ops_a.py:1) -> "
                      "scalarlab.graph.optable (graph/optable.py:2) -> scalarlab.graph.ops_a"]


if __name__ == "__main__":
    found = all_violations(_package_dir())
    total = sum(len(v) for v in found.values())
    for kind, items in found.items():
        print(f"# {kind}: {len(items)}")
        for s in items:
            print(f"  {s}")
    sys.exit(1 if total else 0)
