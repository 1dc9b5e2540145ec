"""Running a plan: the CUDA driver calls (``driver``), compiled kernels loaded and launched with
a bound argument buffer (``launcher``), the on-disk kernel cache (``cache``)."""
