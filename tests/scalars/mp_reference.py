"""The test-side reference of a vocabulary function in a multiple-precision library."""


def mp_value(lib, name, x):
    """f(x) in ``lib`` (``gmpy2`` or an mpmath context, at its current precision): MPFR's /
    mpmath's own function, sigmoid and softplus as 1 / (1 + exp(-x)) and log1p(exp(x))."""
    if name == "sigmoid":
        return 1 / (1 + lib.exp(-x))
    if name == "softplus":
        return lib.log1p(lib.exp(x))
    return getattr(lib, name)(x)
