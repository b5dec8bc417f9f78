"""torchvision made importable beside the CPU torch, for the CNN zoo and for
``transformers`` (which imports torchvision whenever it is installed).

The PyPI torchvision wheel is a CUDA build whose compiled ops need ``libc10_cuda``; with
the CPU torch they do not load, and ``import torchvision`` then fails registering fake
kernels for ``torchvision::nms``/``qnms`` -- and so does every ``transformers`` model
import.  The model constructors are plain Python, so :func:`torchvision_models` declares
those two op schemas when that import fails and imports it again (nothing here calls
them).  ``conftest.py`` calls it first thing when torchvision is installed."""
from __future__ import annotations

import functools
import sys


@functools.lru_cache(maxsize=None)
def torchvision_models():
    """``torchvision.models`` (ModuleNotFoundError when torchvision is not installed)."""
    import torch
    try:
        import torchvision
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
        lib = torch.library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _LIBS.append(lib)          # the schemas live as long as the library object
        for k in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[k]     # the failed import's half-loaded submodules
        import torchvision
    return torchvision.models


_LIBS: list = []
