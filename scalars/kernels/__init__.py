"""Stateless numeric kernels below the scalar contexts: error-free transformations,
rounding onto binary formats, directed float64/grid endpoints, matrix products, dot
enclosures and the correctly rounded settlement in MPFR.  Kernels import only other
kernels and the format/function tables of :mod:`scalars`, never a context."""
