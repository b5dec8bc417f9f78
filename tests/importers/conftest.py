"""Before any test module of this folder imports ``transformers``: make an installed but
CUDA-built torchvision importable (see :mod:`importers_torchvision`), since transformers
imports torchvision whenever it is installed."""
import importlib.util

if importlib.util.find_spec("torchvision") is not None:
    from importers_torchvision import torchvision_models
    torchvision_models()
