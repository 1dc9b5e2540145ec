"""Write ``gemv_candidates.json`` (next to this file): skinny-stage configurations of 512 and
1024 threads that split K over the warps of a block, for the sweep. The record of what the
first sweeps of 2026-11-25 timed; the stage's space (``k15_skinny.SPACE``) has this form since.

Usage: ``python gemv_candidates.py`` (no GPU: ptxas reports each kernel's registers and blocks
per SM), then on the GPU ``python bench/shapes.py --sweep --extra gemv_candidates.json
--extra-only --stages skinny --shapes ...``.

The skinny stage's tuned space had blocks of 128 or 256 threads, 4-8 k-groups each, and reached
the GPU's width through split-K over the grid. At the 1-token GPT-2 layers cuBLAS runs a GEMV
kernel of 96 blocks of 32 x 16 = 512 threads for 3072 columns: 32 columns a block, the K range
split over the block's warps only, no second pass
(``bench/results/nvidia-h100/2026-11-25-ncu-skinny``). These are the stage's configurations in
that form: BN in (32, 64, 128), 512 or 1024 threads (16-128 k-groups), 2-16 loads of B per
thread and chunk (12: a K of 768 in one chunk of 64 k-groups), MT in (1, 8, 16). Each has
launch bounds of one block per SM: without them the GPU's JIT gave a 512-thread kernel that
ptxas had fitted in 127 registers offline more than 128, and it could not launch. A
configuration is kept if ptxas fits it without local memory; ``blocks_per_sm`` as ptxas
reports, so that the sweep also times K splits up to a full wave of them.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numba_gemm
from numba_gemm import resources


def gemv_candidates() -> list[dict]:
    st = numba_gemm.get_stage("skinny")
    out = []
    for mt, bn, nt, kstep in itertools.product((1, 8, 16), (32, 64, 128), (512, 1024),
                                               (2, 4, 8, 12, 16)):
        kg = nt // (bn // 4)
        cfg = dict(MT=mt, BN=bn, NT=nt, KC=kg * kstep, SPLITK=1, MINB=1)
        try:
            stage = st.with_config(cfg)
            rep = resources.kernel_resources(stage, stage.kernel_for("vector", "NN"), "vector")
        except (ValueError, RuntimeError):  # not a valid configuration; ptxas refuses it
            continue
        if rep.blocks_per_sm >= 1 and not rep.uses_local_memory:
            out.append(dict(stage="skinny", config=cfg, blocks_per_sm=rep.blocks_per_sm,
                            registers=rep.registers))
    return out


if __name__ == "__main__":
    path = Path(__file__).with_name("gemv_candidates.json")
    cands = gemv_candidates()
    path.write_text(json.dumps(cands, indent=0) + "\n")
    for c in cands:
        print(c["config"], "regs", c["registers"], "blocks/SM", c["blocks_per_sm"])
    print(f"{len(cands)} candidates -> {path}")
