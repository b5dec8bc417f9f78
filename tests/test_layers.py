"""The import graph of the installed ``scalarlab`` package: no cycles, the layer rules and
the rooms inside the layers hold, and every dynamic load is visible or explained.

The graph is read from the source with :mod:`ast`, never by importing: every ``import`` and
``from ... import`` statement, at module level and inside functions (a function-level import
is still a dependency, it only runs later), relative imports resolved against the module's
package.  ``from P import name`` is an edge to the module ``P.name`` when that is a module,
else to ``P`` itself.  The implicit import of parent packages (``import a.b.c`` runs
``a/__init__`` and ``a/b/__init__`` first) is not an edge: it would make every package
``__init__`` that re-exports its modules a cycle.  Imports under ``if TYPE_CHECKING:`` never
run and are ignored.

Dynamic loads (``importlib.import_module``, ``import_module`` under any alias, ``__import__``)
are *dynamic* edges when the checker can read the name: a string literal, a module-level
string constant, ``__name__``/``__package__``, an f-string or ``+`` of those, or the variable
of a ``for`` loop over a module-level tuple of such strings (``for mod in CONTEXT_MODULES``);
``import_module(".x", __package__)`` is resolved like a relative import.  The layer rules
apply to dynamic edges, the cycle check does not (a dynamic load is how a lower layer finds a
plug-in above it).  A load whose name the checker cannot read (a variable) fails unless
``Rules.variable_loads`` lists it with the reason.

Rules (CONTRIBUTING.md, DESIGN.md "The house"), by top-level subpackage:

* ``scalars`` imports nothing else of scalarlab; inside it, a kernel module (the list in
  CONTRIBUTING's table) imports only kernels (never a context, the registry or the package
  ``__init__``), and no other scalars module imports the registry or the package
  ``__init__`` (which re-exports the registry): the registry -> contexts, never back;
* ``graph`` -> ``scalars``; only ``graph.plan`` may load ``cuda_kernels.provider`` and only
  dynamically (by name);
* ``tape`` -> ``graph``, ``scalars``; the tape core never imports ``tape.training``;
* ``ibp`` -> ``graph``, ``scalars``;
* ``cuda_kernels`` -> ``graph.plan``, ``graph.errors``, ``scalars``;
* ``experiments`` -> anything; nothing outside ``experiments`` imports it, except the
  root package's lazy ``scalarlab.compare``/... which load ``experiments.api`` on first use.

No module spells the pre-package top-level names (``import graph``, ``from scalars import``).
:func:`check_package` applies all of it to a package folder; the tests run it on the
installed package and, with one seeded breach of each kind, on a copy of it.

``python tests/test_layers.py [PACKAGE_DIR]`` prints the current violations (exit status 1
if any).
"""
from __future__ import annotations

import ast
import functools
import hashlib
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT_PACKAGE = "scalarlab"
SUBPACKAGES = ("scalars", "graph", "tape", "ibp", "cuda_kernels", "experiments")


@dataclass(frozen=True)
class Rules:
    """What may import what.  ``layers``: layer -> the other layers it may import (itself
    always allowed; None: anything).  ``modules``: (importing layer, imported layer) -> the
    imported modules allowed (prefix match).  ``dynamic_only``: (importer, imported) edges
    allowed across the layers only as dynamic loads.  ``kernels``: the scalars kernel
    modules (short names; a kernel package's modules count by prefix).  ``variable_loads``:
    (module, the name expression as written) -> why a load by variable is allowed there."""
    layers: dict
    modules: dict = field(default_factory=dict)
    dynamic_only: frozenset = frozenset()
    kernels: tuple = ()
    registry: str = f"{ROOT_PACKAGE}.scalars.registry"
    tape_training: str = f"{ROOT_PACKAGE}.tape.training"
    variable_loads: dict = field(default_factory=dict)


#: the kernel modules of scalars/, as CONTRIBUTING's table lists them (a test checks it):
#: the ``scalars.kernels`` package (every module in it, by prefix) and the tables of formats,
#: functions and errors the kernels read
KERNELS = ("kernels", "errors", "formats", "functions", "functions_binary")

RULES = Rules(
    layers={
        "scalars": set(),
        "graph": {"scalars"},
        "tape": {"graph", "scalars"},
        "ibp": {"graph", "scalars"},
        "cuda_kernels": {"graph", "scalars"},
        "experiments": None,
    },
    modules={("cuda_kernels", "graph"): ("scalarlab.graph.plan", "scalarlab.graph.errors")},
    dynamic_only=frozenset({("scalarlab.graph.plan", "scalarlab.cuda_kernels.provider")}),
    kernels=KERNELS,
    variable_loads={
        ("scalarlab", "f'{__name__}.{name}'"):
            "the root package imports a subpackage on first attribute access (a name of "
            "SUBPACKAGES, checked before the load)",
        ("scalarlab.graph.importers.interchange", "module"):
            "require() imports the optional third-party dependencies (onnx, torch) the "
            "importers name; never a scalarlab module",
        ("scalarlab.experiments.cli", "f'{__package__}.commands.{COMMANDS[name].module}'"):
            "the CLI loads its own command modules, named by the light table "
            "experiments.commands.COMMANDS, when a command runs",
        ("scalarlab.experiments.lazy_import", "self._name"):
            "the command modules name their heavy dependencies as lazy('scalarlab...') "
            "literals, loaded when a command runs (not for --help); experiments may "
            "import anything",
    },
)


@dataclass(frozen=True)
class Edge:
    src: str          # importing module
    dst: str          # imported scalarlab module
    line: int
    dynamic: bool = False


@dataclass
class PackageImports:
    """The imports of a package: its modules (name -> path relative to the package
    folder), the internal edges, imports of the pre-package top-level names and of
    scalarlab modules that do not exist, and dynamic loads by variable."""
    modules: dict
    edges: list
    old: list               # (module, imported name, line)
    unresolved: list        # (module, imported name, line)
    variable_loads: list    # (module, name expression as written, line)

    def where(self, module, line) -> str:
        return f"{self.modules[module]}:{line}"


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


def _resolve_relative(module: str, is_package: bool, level: int, target) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(base) - 1:
        raise ValueError(f"{module}: relative import beyond the top-level package")
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _module_constants(tree: ast.Module) -> dict:
    """Module-level names bound to a string or a tuple/list of strings, and bound nowhere
    else in the module (no other assignment, parameter, import, def or loop variable of
    that name): ``{name: [strings]}`` (a string constant is a list of one)."""
    bound = {}
    for n in ast.walk(tree):
        names = []
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names = [n.id]
        elif isinstance(n, ast.arg):
            names = [n.arg]
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [n.name]
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in n.names]
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names = list(n.names)
        for k in names:
            bound[k] = bound.get(k, 0) + 1
    values = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name):
            v = stmt.value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                values[stmt.targets[0].id] = [v.value]
            elif isinstance(v, (ast.Tuple, ast.List)) and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in v.elts):
                values[stmt.targets[0].id] = [e.value for e in v.elts]
    return {k: v for k, v in values.items() if bound.get(k) == 1}


class _Names:
    """Reads the strings an expression can be: literals, module-level constants,
    ``__name__``/``__package__``, f-strings and ``+`` of those, loop variables over
    module-level tuples.  None: it cannot tell (a variable)."""

    def __init__(self, module: str, is_package: bool, constants: dict):
        self.special = {"__name__": [module],
                        "__package__": [module if is_package else module.rpartition(".")[0]]}
        self.constants = constants

    def strings(self, e, env) -> list | None:
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            return [e.value]
        if isinstance(e, ast.Name):
            if e.id in env:
                return env[e.id]
            if e.id in self.special:
                return self.special[e.id]
            c = self.constants.get(e.id)
            return c if c is not None and len(c) == 1 else None
        if isinstance(e, ast.JoinedStr):
            out = [""]
            for part in e.values:
                if isinstance(part, ast.FormattedValue):
                    if part.conversion != -1 or part.format_spec is not None:
                        return None
                    got = self.strings(part.value, env)
                else:
                    got = self.strings(part, env)
                if got is None:
                    return None
                out = [a + b for a in out for b in got]
            return out
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            a, b = self.strings(e.left, env), self.strings(e.right, env)
            return None if a is None or b is None else [x + y for x in a for y in b]
        return None

    def loop_values(self, e) -> list | None:
        """The strings a ``for`` loop's iterable yields, when it is a module-level tuple
        constant or a literal tuple/list of strings."""
        if isinstance(e, ast.Name):
            return self.constants.get(e.id)
        if isinstance(e, (ast.Tuple, ast.List)) and all(
                isinstance(x, ast.Constant) and isinstance(x.value, str) for x in e.elts):
            return [x.value for x in e.elts]
        return None


def _load_functions(tree) -> set:
    """The names a module calls ``importlib.import_module`` by (``from importlib import
    import_module as load``), with ``import_module`` and ``__import__`` themselves."""
    names = {"import_module", "__import__"}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module == "importlib":
            names.update(a.asname or a.name for a in n.names if a.name == "import_module")
    return names


def _dynamic_load(node, loaders, names: _Names, env):
    """``(resolved names or None, name expression)`` when ``node`` is a dynamic load."""
    f = node.func
    if not ((isinstance(f, ast.Attribute) and f.attr in ("import_module", "__import__")) or
            (isinstance(f, ast.Name) and f.id in loaders)):
        return None
    args = {k.arg: k.value for k in node.keywords}
    name = node.args[0] if node.args else args.get("name")
    if name is None:
        return None
    got = names.strings(name, env)
    is_import = (f.attr if isinstance(f, ast.Attribute) else f.id) == "__import__"
    level = node.args[4] if len(node.args) > 4 else args.get("level")
    if is_import and level is not None and not (isinstance(level, ast.Constant) and
                                                level.value == 0):
        got = None                      # __import__ relative to the caller: not read
    if got is not None and any(s.startswith(".") for s in got):
        pkg = node.args[1] if len(node.args) > 1 else args.get("package")
        bases = None if pkg is None or is_import else names.strings(pkg, env)
        if bases is None:
            got = None
        else:
            out = []
            for s in got:
                level = len(s) - len(s.lstrip("."))
                for b in bases:
                    out.append(_resolve_relative(b, True, level, s[level:] or None))
            got = out
    return got, ast.unparse(name)


#: raw_imports' results read back from pytest's cache (the ``violations`` fixture loads and
#: stores them), by module name, kind and source: parsing the package's ~190 modules is
#: ~2.5 s of a session's CPU, and a module unchanged since the last session (with this
#: checker unchanged: the slot is named after this file's hash) gives the same result
_PERSISTED: dict = {}
_CHECKER = hashlib.sha1(Path(__file__).read_bytes()).hexdigest()[:16]


def _source_key(name: str, is_package: bool, source: str) -> str:
    return hashlib.sha1(f"{name}\0{is_package}\0{source}".encode()).hexdigest()


@functools.lru_cache(maxsize=None)
def raw_imports(name: str, is_package: bool, source: str):
    """``(imports, variable_loads)`` of a module: ``(absolute name, imported names or None,
    line, dynamic)`` for every import statement and readable dynamic load (for ``from X
    import a, b`` the names are ``["a", "b"]``), and ``(name expression, line)`` for every
    dynamic load by a name the checker cannot read.  Cached by source: a copy of the
    package is read once (and an unchanged module not at all, see ``_PERSISTED``)."""
    key = _source_key(name, is_package, source)
    hit = _PERSISTED.get(key)
    if hit is not None:              # JSON lists back to the tuples _read_imports returns
        return tuple(tuple(e) for e in hit[0]), tuple(tuple(v) for v in hit[1])
    result = _read_imports(name, is_package, source)
    _PERSISTED[key] = result
    return result


def _read_imports(name: str, is_package: bool, source: str):
    """:func:`raw_imports` without the caches."""
    tree = ast.parse(source)
    names = _Names(name, is_package, _module_constants(tree))
    loaders = _load_functions(tree)
    out, variable = [], []
    stack = [(tree, {})]
    while stack:
        node, env = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((c, env) for c in node.orelse)
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append((alias.name, None, node.lineno, False))
        elif isinstance(node, ast.ImportFrom):
            target = node.module
            if node.level:
                target = _resolve_relative(name, is_package, node.level, node.module)
            out.append((target, [a.name for a in node.names], node.lineno, False))
        elif isinstance(node, ast.Call):
            load = _dynamic_load(node, loaders, names, env)
            if load is not None:
                got, text = load
                if got is None:
                    variable.append((text, node.lineno))
                else:
                    out.extend((s, None, node.lineno, True) for s in got)
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Name):
            values = names.loop_values(node.iter)
            if values is not None:
                inner = {**env, node.target.id: values}
                stack.extend((c, inner) for c in node.body)
                stack.extend((c, env) for c in (node.target, node.iter, *node.orelse))
                continue
        stack.extend((c, env) for c in ast.iter_child_nodes(node))
    return tuple(out), tuple(variable)


def build_graph(pkg_dir: Path, root: str = ROOT_PACKAGE, subpackages=SUBPACKAGES) -> PackageImports:
    """The package's modules, its internal import edges, imports of the pre-package
    top-level names, imports of scalarlab modules that do not exist and dynamic loads by
    variable."""
    mods = find_modules(pkg_dir, root, subpackages)
    edges, old, unresolved, variable = [], [], [], []
    for name, rel in mods.items():
        is_pkg = rel.name == "__init__.py"
        found, loads = raw_imports(name, is_pkg, (pkg_dir / rel).read_text())
        variable.extend((name, text, line) for text, line in loads)
        for target, names, line, dynamic in found:
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
    return PackageImports(mods, edges, old, unresolved, variable)


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


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _how(e: Edge) -> str:
    return "loads (by name)" if e.dynamic else "imports"


def layer_violations(mods, edges, rules: Rules = RULES) -> list:
    out = []
    for e in edges:
        src, dst = layer_of(e.src), layer_of(e.dst)
        if dst is None or src == dst:
            continue        # the root package (lazy subpackages) or the same layer
        where, how = f"{mods[e.src]}:{e.line}", _how(e)
        if (e.src, e.dst) in rules.dynamic_only:
            if not e.dynamic:
                out.append(f"layer: {e.src} {how} {e.dst} ({where}); allowed only as a dynamic "
                           f"load by name (importlib.import_module)")
            continue
        if e.src == ROOT_PACKAGE and e.dst == f"{ROOT_PACKAGE}.experiments.api":
            continue        # the root's Python API facade (loaded on first attribute use)
        if dst == "experiments" and src != "experiments":
            out.append(f"layer: {e.src} {how} {e.dst} ({where}); nothing outside experiments "
                       f"may import experiments")
            continue
        allowed = rules.layers.get(src)
        if src is None or allowed is None:
            continue        # the root package, experiments: anything
        if dst not in allowed:
            may = ", ".join(sorted(allowed)) or "nothing else of scalarlab"
            out.append(f"layer: {e.src} {how} {e.dst} ({where}); {src} may import: {may}")
            continue
        mods_ok = rules.modules.get((src, dst))
        if mods_ok is not None and not any(_within(e.dst, m) for m in mods_ok):
            out.append(f"layer: {e.src} {how} {e.dst} ({where}); {src} may import from {dst} "
                       f"only {', '.join(mods_ok)}")
    return out


# ------------------------------------------------------------------ rooms inside a layer
def is_kernel(module: str, rules: Rules = RULES, root: str = ROOT_PACKAGE) -> bool:
    return any(_within(module, f"{root}.scalars.{k}") for k in rules.kernels)


def room_violations(mods, edges, rules: Rules = RULES, root: str = ROOT_PACKAGE) -> list:
    """The rules inside a layer: kernels import only kernels; no other scalars module
    imports the registry or the scalars package (whose ``__init__`` re-exports the
    registry); the tape core never imports ``tape.training``."""
    scalars_pkg = f"{root}.scalars"
    out = []
    for e in edges:
        where, how = f"{mods[e.src]}:{e.line}", _how(e)
        if _within(e.src, scalars_pkg) and _within(e.dst, scalars_pkg):
            if is_kernel(e.src, rules, root) and not is_kernel(e.dst, rules, root):
                what = ("the registry" if e.dst == rules.registry else
                        "the scalars package (it re-exports the registry)"
                        if e.dst == scalars_pkg else "a context")
                out.append(f"kernel: {e.src} {how} {e.dst} ({where}), {what}; kernels import "
                           f"only kernels, never a context")
            elif not is_kernel(e.src, rules, root) and \
                    e.src not in (scalars_pkg, rules.registry) and \
                    e.dst in (scalars_pkg, rules.registry):
                out.append(f"registry: {e.src} {how} {e.dst} ({where}); no context imports the "
                           f"registry (or the scalars package, which re-exports it): the "
                           f"registry imports the contexts, never back")
        if _within(e.src, f"{root}.tape") and not _within(e.src, rules.tape_training) \
                and _within(e.dst, rules.tape_training):
            out.append(f"tape core: {e.src} {how} {e.dst} ({where}); the tape core never "
                       f"imports {rules.tape_training}")
    return out


def variable_load_violations(found: PackageImports, rules: Rules = RULES) -> list:
    return [f"dynamic load by variable: {m} loads {text} ({found.where(m, line)}); the checker "
            f"cannot see what it loads: load a literal or a module-level constant, or list "
            f"({m!r}, {text!r}) in Rules.variable_loads with the reason"
            for m, text, line in found.variable_loads if (m, text) not in rules.variable_loads]


def check_package(pkg_dir: Path, rules: Rules = RULES, root: str = ROOT_PACKAGE,
                  subpackages=SUBPACKAGES) -> dict:
    """Every violation in the package folder ``pkg_dir``, by kind (empty lists: none)."""
    found = build_graph(Path(pkg_dir), root, subpackages)
    mods = found.modules
    return {
        "cycles": cycle_violations(mods, found.edges),
        "layers": layer_violations(mods, found.edges, rules),
        "rooms": room_violations(mods, found.edges, rules, root),
        "dynamic loads": variable_load_violations(found, rules),
        "old names": [f"old top-level name: {m} imports {t!r} ({mods[m]}:{ln}); write "
                      f"scalarlab.{t} or a relative import" for m, t, ln in found.old],
        "unresolved": [f"unresolved: {m} imports {t!r} ({mods[m]}:{ln}), which is not a "
                       f"module of the package" for m, t, ln in found.unresolved],
    }


def _package_dir() -> Path:
    import scalarlab
    return Path(scalarlab.__file__).parent


@pytest.fixture(scope="module")
def violations(request):
    cache = getattr(request.config, "cache", None)       # None under -p no:cacheprovider
    slot = f"scalarlab/layers-imports/{_CHECKER}"
    if cache is not None:
        _PERSISTED.update(cache.get(slot, {}))
    found = check_package(_package_dir())
    if cache is not None:
        mods = find_modules(_package_dir())
        pkg = _package_dir()
        keep = {_source_key(n, rel.name == "__init__.py", (pkg / rel).read_text())
                for n, rel in mods.items()}
        cache.set(slot, {k: v for k, v in _PERSISTED.items() if k in keep})
    return found


def _fail_if(found: list, what: str):
    if found:
        pytest.fail(f"{len(found)} {what}:\n  " + "\n  ".join(found), pytrace=False)


def test_package_has_every_layer():
    mods = find_modules(_package_dir())
    layers = {layer_of(m) for m in mods}
    assert layers == {None, *SUBPACKAGES}
    assert "scalarlab.graph.fold" in mods and "scalarlab.scalars" in mods


@pytest.mark.parametrize("kind, what", [
    ("cycles", "import cycle(s)"),
    ("layers", "layer rule violation(s)"),
    ("rooms", "violation(s) of the rules inside scalars/ and tape/"),
    ("dynamic loads", "dynamic load(s) by variable"),
    ("old names", "import(s) of pre-package top-level names"),
    ("unresolved", "import(s) of missing scalarlab modules"),
])
def test_package_obeys(violations, kind, what):
    _fail_if(violations[kind], what)


def test_rules_name_only_what_exists():
    """Every kernel the rules list is a module, every allowed load by variable is still
    in the code, and the dynamic loads the rules allow are seen (a stale rule hides
    nothing)."""
    found = build_graph(_package_dir())
    missing = [k for k in RULES.kernels if f"{ROOT_PACKAGE}.scalars.{k}" not in found.modules]
    assert not missing, f"kernel modules listed but absent: {missing}"
    seen = {(m, text) for m, text, _ in found.variable_loads}
    assert set(RULES.variable_loads) <= seen, set(RULES.variable_loads) - seen
    dynamic = {(e.src, e.dst) for e in found.edges if e.dynamic}
    assert RULES.dynamic_only <= dynamic
    # the registry's loop over CONTEXT_MODULES is read: one dynamic edge per context
    from scalarlab.scalars.registry import CONTEXT_MODULES
    assert {(RULES.registry, f"{ROOT_PACKAGE}.scalars.{m}") for m in CONTEXT_MODULES} <= dynamic


def test_kernel_list_is_contributings():
    """The kernel modules here are the ones CONTRIBUTING's layer table lists."""
    text = (Path(__file__).resolve().parents[1] / "CONTRIBUTING.md").read_text()
    row = next((ln for ln in text.splitlines() if ln.startswith("| `scalars`")), None)
    assert row is not None, "CONTRIBUTING.md has no `scalars` row in its layer table"
    m = re.search(r"kernels: `([^`]*)`", row)
    assert m is not None, f"the scalars row names no kernels: {row}"
    assert tuple(m.group(1).split()) == KERNELS


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
    found = build_graph(tmp_path)
    mods, edges = found.modules, found.edges
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
    assert found.old == [("scalarlab.cuda_kernels.provider", "graph.fold", 3)]
    assert found.unresolved == [("scalarlab.graph.bad", "scalarlab.graph.missing", 3)]

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
    found = build_graph(tmp_path, subpackages=("graph",))
    cycles = cycle_violations(found.modules, found.edges)
    assert cycles == ["import cycle: scalarlab.graph.ops_a (graph/ops_a.py:1) -> "
                      "scalarlab.graph.optable (graph/optable.py:2) -> scalarlab.graph.ops_a"]


def test_dynamic_load_names_are_read(tmp_path):
    """Literals, module-level constants, ``__name__``/``__package__``, f-strings, ``+``,
    aliases of import_module, ``__import__``, relative names with a package and loops over
    module-level tuples are read; anything else is a load by variable."""
    _write(tmp_path, {
        "__init__.py": "",
        "graph/__init__.py": "",
        "graph/a.py": "",
        "graph/b.py": "",
        "graph/c.py": "",
        "graph/loads.py": (
            "import importlib\n"
            "from importlib import import_module as load\n"
            "NAME = 'scalarlab.graph.a'\n"
            "MODS = ('a', 'b')\n"
            "TWICE = 'x'\n"
            "TWICE = 'scalarlab.graph.c'\n"
            "def f(var):\n"
            "    importlib.import_module(NAME)\n"                        # 8
            "    load(f'{__package__}.b')\n"                             # 9
            "    __import__(__name__.rpartition('.')[0] + '.c')\n"       # 10: a method call
            "    importlib.import_module('.c', __package__)\n"           # 11
            "    for m in MODS:\n"
            "        importlib.import_module(f'{__package__}.{m}')\n"    # 13
            "    importlib.import_module(var)\n"                         # 14
            "    importlib.import_module(TWICE)\n"                       # 15: bound twice
            "    importlib.import_module('scalarlab.graph' + '.a')\n"    # 16
            "    importlib.import_module('numpy')\n"                    # 17: not ours
            "SHADOWED = 'scalarlab.graph.a'\n"
            "def g(SHADOWED):\n"
            "    importlib.import_module(SHADOWED)\n"),                  # 20: the parameter
    })
    found = build_graph(tmp_path, subpackages=("graph",))
    got = sorted((e.line, e.dst) for e in found.edges if e.dynamic)
    assert got == [(8, "scalarlab.graph.a"), (9, "scalarlab.graph.b"), (11, "scalarlab.graph.c"),
                   (13, "scalarlab.graph.a"), (13, "scalarlab.graph.b"),
                   (16, "scalarlab.graph.a")]
    assert sorted(found.variable_loads) == [
        ("scalarlab.graph.loads", "SHADOWED", 20),
        ("scalarlab.graph.loads", "TWICE", 15),
        ("scalarlab.graph.loads", "__name__.rpartition('.')[0] + '.c'", 10),
        ("scalarlab.graph.loads", "var", 14)]


# ------------------------------------------------ seeded breaches in a copy of the package
def copy_package(src: Path, dst: Path) -> Path:
    """The package's Python modules (root ``__init__`` and subpackages) copied to ``dst``."""
    dst.mkdir(parents=True)
    shutil.copy2(src / "__init__.py", dst / "__init__.py")
    for s in SUBPACKAGES:
        shutil.copytree(src / s, dst / s, ignore=shutil.ignore_patterns(
            "__pycache__", "*.nbi", "*.nbc", "*.pyc"))
    return dst


#: one breach of each kind the checker must catch: (kind, the violation list it must be
#: reported in, file, text appended to it).  The line marked ``# seeded`` is the breach.
SEEDS = (
    ("layer violation", "layers", "ibp/seeded_layer.py",
     "from scalarlab.tape import tape  # seeded\n"),
    ("import cycle", "cycles", "graph/seeded_cycle_a.py",
     "from . import seeded_cycle_b  # seeded\n"),
    ("kernel imports a context", "rooms", "scalars/kernels/dot_enclosure.py",
     "\n\ndef _seeded():\n    from ..dual import Dual  # seeded\n    return Dual\n"),
    ("context imports the registry", "rooms", "scalars/dual.py",
     "\nfrom .registry import names as _seeded_names  # seeded\n"),
    ("tape core imports tape.training", "rooms", "tape/op_checks.py",
     "\nfrom .training import data as _seeded_data  # seeded\n"),
    ("function-level import across layers", "layers", "cuda_kernels/seeded_function.py",
     "def f():\n    from scalarlab.ibp import box  # seeded\n    return box\n"),
    ("dynamic load by literal", "layers", "graph/seeded_literal.py",
     "import importlib\n\n\ndef f():\n"
     "    return importlib.import_module('scalarlab.ibp.box')  # seeded\n"),
    ("dynamic load by variable", "dynamic loads", "graph/seeded_variable.py",
     "import importlib\n\n\ndef f(name):\n"
     "    return importlib.import_module(name)  # seeded\n"),
    ("old top-level name", "old names", "tape/seeded_old.py",
     "from graph import fold  # seeded\n"),
    # variants of the dynamic loads the checker reads
    ("dynamic load by a module-level constant", "layers", "scalars/seeded_constant.py",
     "import importlib\nTARGET = 'scalarlab.graph.fold'\n\n\ndef f():\n"
     "    return importlib.import_module(TARGET)  # seeded\n"),
    ("dynamic load through an alias", "layers", "ibp/seeded_alias.py",
     "from importlib import import_module as _load\n\n\ndef f():\n"
     "    return _load('scalarlab.experiments.cli')  # seeded\n"),
    ("__import__ by literal", "layers", "tape/seeded_dunder.py",
     "def f():\n    return __import__('scalarlab.ibp.box')  # seeded\n"),
)


def seed(pkg: Path) -> dict:
    """Writes :data:`SEEDS` into the package copy ``pkg``; ``{kind: "file:line"}``."""
    (pkg / "graph/seeded_cycle_b.py").write_text("from . import seeded_cycle_a\n")
    where = {}
    for kind, _, rel, text in SEEDS:
        p = pkg / rel
        before = p.read_text() if p.exists() else ""
        p.write_text(before + text)
        line = next(k for k, ln in enumerate(p.read_text().splitlines(), 1)
                    if ln.endswith("# seeded"))
        where[kind] = f"{rel}:{line}"
    return where


def caught(found: dict, where: dict) -> dict:
    """``{kind: the violation lists that report its seeded line}``."""
    return {kind: sorted(k for k, items in found.items()
                         if any(f"{loc})" in s or f"{loc}," in s or f"{loc};" in s
                                for s in items))
            for kind, loc in where.items()}


def test_seeded_breaches_are_each_reported(tmp_path):
    """A copy of the package is clean; with one breach of each kind written into it,
    each is reported, in its own violation list, and nothing else is."""
    pkg = copy_package(_package_dir(), tmp_path / ROOT_PACKAGE)
    clean = check_package(pkg)
    assert not any(clean.values()), clean
    where = seed(pkg)
    found = check_package(pkg)
    got = caught(found, where)
    expect = {kind: [lst] for kind, lst, _, _ in SEEDS}
    assert got == expect
    reported = sum(len(v) for v in found.values())
    assert reported == len(SEEDS), found


if __name__ == "__main__":
    found = check_package(Path(sys.argv[1]) if len(sys.argv) > 1 else _package_dir())
    total = sum(len(v) for v in found.values())
    for kind, items in found.items():
        print(f"# {kind}: {len(items)}")
        for s in items:
            print(f"  {s}")
    sys.exit(1 if total else 0)
