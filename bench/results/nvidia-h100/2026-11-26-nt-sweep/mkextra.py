"""The extra skinny candidates swept with B stored transposed (nt_extra.json): narrow column tiles
(BN = 32 or 64, 128-512 threads) with B in registers, 4-16 loads of B per thread and chunk,
one row or a block of 8 or 16 rows, K split 4-16 ways; valid, taking layout NT, not in the space.

    NUMBA_ENABLE_CUDASIM=1 python mkextra.py nt_extra.json
"""

import json
import sys

from numba_gemm.kernels import k15_skinny as sk

out = []
seen = {str(sorted(c.items())) for c in sk.SPACE}
for mt in (1, 8, 16):
    for bn, nt in ((32, 128), (32, 256), (64, 128), (32, 512), (64, 512)):
        kg = nt // (bn // 4)
        for kstep in (4, 8, 16):
            for s in (4, 8, 16):
                cfg = dict(MT=mt, BN=bn, NT=nt, KC=kg * kstep, SPLITK=s,
                           MINB=1 if nt >= 512 else 0, NBUF=0)
                try:
                    sk.check_config(cfg)
                except ValueError:
                    continue
                if sk.transposed_b_ok(cfg) and str(sorted(cfg.items())) not in seen:
                    out.append(dict(stage="skinny", config=cfg, blocks_per_sm=1))
json.dump(out, open(sys.argv[1], "w"), indent=0)
print(len(out))
