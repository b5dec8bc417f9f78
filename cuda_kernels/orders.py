"""The summation orders the kernels implement, as plain numbers (no numba import).

An order is part of a kernel's contract (its capsule reports it, and its results depend on
it), so the capsule metadata in :mod:`.provider` and the launchers in :mod:`.host` read the
same definition here.
"""

# reduce_sum's tree width (threads per row): part of its order, hence of its results; one
# warp, the same on the GPU and in the simulator (where every thread is a Python thread)
TREE_WIDTH = 32
