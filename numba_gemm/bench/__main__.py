"""``python -m numba_gemm.bench ...``: every stage against cuBLAS (``numba_gemm.tools.bench``)."""

import sys

from ..tools.bench.cli import main

sys.exit(main())
