"""Test configuration: the CUDA simulator must be chosen before numba is imported."""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
