"""Write ``bench/narrow_candidates.json``: tiled candidates with few rows per block, for the sweep.

Usage: ``python bench/narrow_candidates.py`` (no GPU), then on the GPU
``python bench/shapes.py --sweep --extra bench/narrow_candidates.json --extra-only --shapes ...``.

The tuned spaces of the tiled stages (``kernels._tunable.make_space``) start at 64-row blocks of
128 or 256 threads. A product of 16 or 32 rows wastes half or more of such a block; cuBLAS runs
those on a 32 x 128 x 8 tile of 64 threads (its kernel name at 16 x 50257 x 768 on an H100,
``bench/results/nvidia-h100/2026-11-25-ncu-skinny``). These are the double_buffering and
multistage configurations with BM in (16, 32), BN in (64, 128, 256), BK in (8, 16, 32), 64 or 128
threads and 32 or 64 accumulators per thread (NBUF 2 or 3): per tile shape, the two that look
most like that kernel (64 threads, 64 accumulators, 8 x 4 thread tiles). Each with
``blocks_per_sm`` 2, so that the sweep times K splits up to two blocks per SM.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path

import numba_gemm
from numba_gemm.kernels import _tunable as tun


def narrow_candidates() -> list[dict]:
    groups = defaultdict(list)
    for name in ("double_buffering", "multistage"):
        st = numba_gemm.get_stage(name)
        for BM, BN, BK, WM, WN, (TM, TN, WNITER), nbuf in itertools.product(
                (16, 32), (64, 128, 256), (8, 16, 32), (16, 32), (32, 64, 128), tun._THREADS,
                (2, 3) if name == "multistage" else (None,)):
            cfg = dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, WNITER=WNITER, TM=TM, TN=TN, MINB=0,
                       SPLITK=1, **({} if nbuf is None else {"NBUF": nbuf}))
            try:
                st.with_config(cfg)
            except ValueError:
                continue
            d = tun.derived(cfg)
            acc = d["WMITER"] * TM * TN * WNITER
            if d["NUM_THREADS"] in (64, 128) and acc in (32, 64):
                rank = (d["NUM_THREADS"] != 64, acc != 64, (TM, TN) != (8, 4), WNITER)
                groups[(name, BM, BN, BK, nbuf)].append((rank, cfg))
    out = []
    for (name, *_), cands in sorted(groups.items(), key=str):
        cands.sort(key=lambda rc: rc[0])
        out += [dict(stage=name, config=cfg, blocks_per_sm=2) for _, cfg in cands[:2]]
    return out


if __name__ == "__main__":
    path = Path(__file__).with_name("narrow_candidates.json")
    cands = narrow_candidates()
    path.write_text(json.dumps(cands, indent=0) + "\n")
    print(f"{len(cands)} candidates -> {path}")
