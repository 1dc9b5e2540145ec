"""Tools built on the library (it never imports them): the bench (``tools.bench``), the tuner
(``tune``), the shape race, sweeps and folds of measured shapes (``shapes``), the tensor-core
race (``tensor_cores``), the README results table (``results_table``), the kernel precompiler
(``precompile``), the no-GPU resource report (``resources``), the validate-then-time harness
(``check``, ``timing``) and the float64 reference (``reference``)."""
