"""Host microseconds per call (tools.bench.overhead: 500 back-to-back calls with out=, median of
5 loops) of this tree's sgemm at 128^3 and 128 x 128 x 127, beside torch.mm and cupy."""
import json, sys
import numba_gemm
from numba_gemm.tools.bench import overhead
rows = overhead.measure([(128, 128, 128), (128, 128, 127)], sgemm=numba_gemm.sgemm)
for r in rows:
    print(json.dumps(dict(r, tree=sys.argv[1])), flush=True)
