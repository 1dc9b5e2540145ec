import json, sys
from numba_gemm.kernels import k15_skinny as sk
out = []
seen = {str(sorted(c.items())) for c in sk.SPACE}
for mt in (1, 8, 16):
    for bn, nt in ((32, 128), (32, 256), (64, 128), (32, 512), (64, 512)):
        cg = bn // 4
        kg = nt // cg
        for kstep in (4, 8, 16):
            for s in (4, 8, 16):
                cfg = dict(MT=mt, BN=bn, NT=nt, KC=kg * kstep, SPLITK=s, MINB=1 if nt >= 512 else 0, NBUF=0)
                try:
                    sk.check_config(cfg)
                except ValueError:
                    continue
                if not sk.transposed_b_ok(cfg) or str(sorted(cfg.items())) in seen:
                    continue
                out.append(dict(stage="skinny", config=cfg, blocks_per_sm=1))
json.dump(out, open(sys.argv[1], "w"), indent=0)
print(len(out))
