"""The ``numba_cuda`` kernel provider: binary32 and interval kernels in Numba CUDA.

``provider`` registers the capsules with :mod:`graph.plan` (metadata only, no numba
import); ``host`` launches kernels on float32 arrays; ``roundops`` holds the rounding-exact
device helpers (non-fusable IEEE ops, bit casts, directed rounding); ``gemm``,
``elementwise``, ``reduce``, ``rowwise`` and ``interval`` hold the kernels.  Kernels run on
a GPU, or in Numba's CUDA simulator when ``NUMBA_ENABLE_CUDASIM=1`` is set before numba is
first imported.
"""
