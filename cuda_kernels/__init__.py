"""cuda_kernels package."""
