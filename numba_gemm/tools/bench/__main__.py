"""``python -m numba_gemm.bench``: see ``numba_gemm.bench.cli``."""

import sys

from .cli import main

sys.exit(main())
