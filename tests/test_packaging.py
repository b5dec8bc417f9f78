"""The distribution installs exactly one import package, ``scalarlab``.

Users keep files named ``graph.py`` or ``experiments.py`` next to their work, and other
distributions own generic names like ``graph``; so the repository's top-level folders are
subpackages of ``scalarlab`` and nothing else lands in site-packages.  These tests check
the installed (editable) copy and a freshly built, non-editable wheel.
"""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("scalars", "graph", "tape", "ibp", "cuda_kernels", "experiments")

# Run from a directory whose files shadow every old top-level name: an import of the
# generic names (instead of scalarlab.*) would pick these up and fail loudly.
SHADOW_FILES = {f"{name}.py": f"raise ImportError('user file {name}.py was imported')\n"
                for name in SUBPACKAGES}

IMPORT_CHECK = """
import scalarlab, scalarlab.scalars as S
from scalarlab.graph import load
from scalarlab import ibp, tape, experiments
from scalarlab.graph import denote, examples
g, p, x0 = examples.six_node_mlp()
print(scalarlab.__file__)
print(S.get("binary32").name, callable(load), ibp.run_ibp.__module__)
print(repr(float(S.get("binary32").to_float64(denote(g, p, x0, "binary32")).item())))
"""


def _shadow_dir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    for name, text in SHADOW_FILES.items():
        (d / name).write_text(text)
    return d


def _six_node_binary32() -> float:
    """The six-node example's output in binary32, computed in this process."""
    from scalarlab import scalars
    from scalarlab.graph import denote, examples
    g, p, x0 = examples.six_node_mlp()
    return float(scalars.get("binary32").to_float64(denote(g, p, x0, "binary32")).item())


def _run(args, cwd, env=None):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_installed_distribution_has_one_top_level_name():
    dist = metadata.distribution("scalarlab")
    assert dist.read_text("top_level.txt").split() == ["scalarlab"]
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts == {"scalarlab": "scalarlab.experiments.cli:main"}


def test_editable_install_imports_beside_shadowing_user_files(tmp_path):
    cwd = _shadow_dir(tmp_path)
    r = _run([sys.executable, "-c", IMPORT_CHECK], cwd)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()[:2]
    assert Path(first).resolve() == ROOT / "__init__.py"
    assert second == "binary32 True scalarlab.ibp.propagate"
    assert float(r.stdout.splitlines()[2]) == _six_node_binary32()
    assert float(r.stdout.splitlines()[2]) == _six_node_binary32()
    # the command line too, through the package's __main__ and the console script
    r = _run([sys.executable, "-m", "scalarlab.experiments", "contexts", "--name", "binary32",
              "--json"], cwd)
    assert r.returncode == 0, r.stderr
    assert '"binary32"' in r.stdout


def test_lazy_subpackage_attributes():
    import scalarlab
    assert set(SUBPACKAGES) <= set(dir(scalarlab))
    assert scalarlab.graph.__name__ == "scalarlab.graph"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        scalarlab.nope


@pytest.mark.slow   # builds a wheel (13 s CPU); the editable install below stays default
def test_wheel_holds_only_scalarlab(tmp_path):
    """Build a real (non-editable) wheel, install it into a fresh target and import it."""
    wheels = tmp_path / "wheels"
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
              str(ROOT)], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = wheels.glob("scalarlab-*.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        info = [n for n in names if ".dist-info/" in n]
        top = z.read(next(n for n in info if n.endswith("top_level.txt"))).decode().split()
    assert top == ["scalarlab"]
    tops = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert tops == {"scalarlab"}
    # every subpackage made it into the wheel, tests and benchmarks did not
    for sub in SUBPACKAGES:
        assert f"scalarlab/{sub}/__init__.py" in names
    assert not any(n.startswith(("scalarlab/tests/", "scalarlab/bench/")) for n in names)

    target = tmp_path / "site"
    r = _run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
              str(target), str(whl)], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    cwd = _shadow_dir(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(target))
    r = _run([sys.executable, "-c", IMPORT_CHECK], cwd, env)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()[:2]
    assert Path(first).resolve() == (target / "scalarlab" / "__init__.py").resolve()
    assert second == "binary32 True scalarlab.ibp.propagate"
    assert float(r.stdout.splitlines()[2]) == _six_node_binary32()
