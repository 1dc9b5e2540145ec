"""How fast ``wgmma`` reads its operands from SMEM, by layout: a probe, no copies, no C.

Each block (two warpgroups, one block per SM) issues ``--iters`` groups of four
``m64n{N}k16`` FP16 products on fixed SMEM tiles (``wgmma.commit`` / ``wait 1`` per group, as
stage 17's main loop does) for each SMEM layout: A K-major, B MN-major (``trans-b``, as a
row-major B tile lies) or K-major; no swizzle (core matrices, stage 17) or the 128-byte
swizzle (descriptor bits 62-63 = 1); optionally a block barrier per group. The operands hold
garbage: only time is measured (CUDA events, best of 3). Prints TFLOP/s per variant.

    python bench/wgmma_probe.py [--n 256] [--iters 4000]
"""

from __future__ import annotations

import argparse
import functools
import sys


@functools.cache
def make_probe(n: int, trans_b: int, swizzle: bool, barrier: bool, iters: int):
    from numba import cuda, float32
    from numba.core.types import float16

    from numba_gemm import wgmma
    from numba_gemm.vecmem import tile_view

    sw = 1 << 62 if swizzle else 0
    # A 128 x 64 halves, B 64 x n halves, in 16-byte rows (8 halves)
    a_rows, b_rows = 128 * 64 // 8, 64 * n // 8
    if swizzle:  # K-major: 128-byte rows, 8-row atoms of 1024 B; MN-major: 64-wide N blocks
        a_lbo, a_sbo = 16, 1024
        b_lbo, b_sbo = (64 * 64 * 2, 1024) if trans_b else (16, 1024)
        a_step, b_step = 2, (2 * 1024 >> 4) if trans_b else 2
    else:
        a_lbo, a_sbo = 128, 8 * 128
        b_lbo, b_sbo = ((n // 8) * 128, 128) if trans_b else (128, 8 * 128)
        a_step, b_step = 16, (2 * b_lbo) >> 4
    half = n // 2

    @cuda.jit(launch_bounds=(256, 1))
    def probe(out):
        smem = cuda.shared.array(0, float16)
        As = tile_view(smem, 0, (a_rows, 8))
        Bs = tile_view(smem, a_rows * 8, (b_rows, 8))
        tid = cuda.threadIdx.x
        wg = tid // 128
        acc = cuda.local.array(half, float32)
        for i in range(half):
            acc[i] = float32(0.0)
        da = wgmma.smem_desc(As, wg * (a_rows // 2), 0, a_lbo, a_sbo) | sw
        db = wgmma.smem_desc(Bs, 0, 0, b_lbo, b_sbo) | sw
        for _ in range(iters):
            if barrier:
                cuda.syncthreads()
            wgmma.fence()
            wgmma.mma_f16(acc, n, As, da, Bs, db, 1, trans_b)
            wgmma.mma_f16(acc, n, As, da + a_step, Bs, db + b_step, 1, trans_b)
            wgmma.mma_f16(acc, n, As, da + 2 * a_step, Bs, db + 2 * b_step, 1, trans_b)
            wgmma.mma_f16(acc, n, As, da + 3 * a_step, Bs, db + 3 * b_step, 1, trans_b)
            wgmma.commit()
            wgmma.wait(1, acc, n)
        wgmma.wait(0, acc, n)
        s = float32(0.0)
        for i in range(half):
            s += acc[i]
        out[cuda.blockIdx.x * 256 + tid] = s

    return probe, 2 * (a_rows + b_rows) * 8


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--iters", type=int, default=4000)
    args = p.parse_args(argv)
    import numpy as np
    from numba import cuda

    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    out = cuda.device_array(sms * 256, np.float32)
    for trans_b in (1, 0):
        for swizzle in (False, True):
            for barrier in (False, True):
                kernel, smem = make_probe(args.n, trans_b, swizzle, barrier, args.iters)
                kernel[sms, 256, 0, smem](out)  # compile, warm up
                best = float("inf")
                for _ in range(3):
                    start, stop = cuda.event(), cuda.event()
                    start.record()
                    kernel[sms, 256, 0, smem](out)
                    stop.record()
                    stop.synchronize()
                    best = min(best, cuda.event_elapsed_time(start, stop))
                flop = 2.0 * 128 * args.n * 64 * args.iters * sms
                layout = "128B swizzle" if swizzle else "no swizzle"
                print(f"B {'MN' if trans_b else 'K'}-major, {layout}, barrier {barrier}: "
                      f"{flop / best / 1e9:.0f} TFLOP/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
