"""scalarlab: one graph IR and one tape engine, evaluated under pluggable scalar contexts.

The repository's top-level folders install as the subpackages of this one import package:
``scalarlab.scalars`` (contexts), ``scalarlab.graph`` (the IR), ``scalarlab.tape``
(autodiff and training), ``scalarlab.ibp`` (interval bounds), ``scalarlab.cuda_kernels``
(the Numba CUDA provider) and ``scalarlab.experiments`` (the ``scalarlab`` command line).
Subpackages are imported on first use, so ``import scalarlab`` stays cheap, and so are
the functions of the Python API (``scalarlab.compare``, ``gaps``, ``sweep``, ``fpbench``:
:mod:`scalarlab.experiments.api`), which return the commands' tables as DataFrames.
"""
from importlib import import_module as _import_module
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("scalarlab")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "unknown"

SUBPACKAGES = ("scalars", "graph", "tape", "ibp", "cuda_kernels", "experiments")
#: the Python API, loaded from experiments.api on first use
API = ("compare", "gaps", "sweep", "fpbench", "bound", "libm_audit")


def __getattr__(name):
    if name in SUBPACKAGES:
        return _import_module(f"{__name__}.{name}")
    if name in API:
        from .experiments import api
        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(SUBPACKAGES) + list(API))
