"""Inputs shared by the CUDA kernel tests (not a test module)."""
import numpy as np

# binary32 special values: signed zeros, infinities, NaN, smallest subnormal, smallest
# normal, largest finite, +-1
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38,
                     3.4028235e38, -3.4028235e38, 1.0, -1.0], dtype=np.float32)


def f32(rng, shape, scale=1.0):
    """Standard-normal binary32 values times ``scale``."""
    return (rng.standard_normal(shape) * scale).astype(np.float32)
