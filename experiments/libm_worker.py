"""Malloc settings of the processes that score exhaustive ``scalarlab libm`` chunks.

Imported only by the forkserver that forks those workers (``libm_audit._worker_modules``),
so the settings hold in the local process pool and the local Dask cluster's workers and
never touch the process that runs the command.

A chunk is scored in blocks of ``libm_audit.BLOCK`` inputs whose arrays (1-2 MB) are
allocated and freed again and again.  glibc hands memory above its trim threshold back to
the kernel when it is freed (the default threshold follows the largest array freed so far:
about 4 MB here; Dask's nannies set it to 64 kB), and every block then touched fresh pages:
20,000-48,000 page faults per chunk, as much system CPU as the scoring's user CPU.  Fixed
thresholds keep a worker's few tens of MB in its heap for the next block.
"""
from __future__ import annotations

import ctypes
import ctypes.util

# glibc's mallopt parameters (<malloc.h>)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: arrays up to this size come from the heap, not from mmap (glibc's largest allowed value
#: on 64-bit: 32 MB)
MMAP_THRESHOLD = 32 << 20
#: free memory at the top of the heap is handed back only above this
TRIM_THRESHOLD = 512 << 20


def keep_memory() -> bool:
    """Set the thresholds in this process; False where the C library has no ``mallopt``
    (not glibc): the workers then run as before, with the page faults."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


KEPT = keep_memory()
