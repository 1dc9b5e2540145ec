"""Stage 10, multistage: an NBUF-deep ring of SMEM tiles filled by asynchronous copies (cp.async).

From ``double_buffering`` (same warp/thread map and FMA core, ``warptiling.make_parts``): GMEM
tiles no longer pass through registers. Each thread issues ``cp.async`` copies straight into SMEM
(``numba_gemm.ptx.cpasync``) for the tile NBUF - 1 steps ahead, so NBUF - 1 K tiles are in flight
while the warps compute on the current one:

    prologue: issue tiles 0 .. NBUF-2, one commit group each
    for t in tiles:
        wait until tile t's group has landed; syncthreads    # all copies of tile t visible, and
                                                             # everyone done with buffer t-1
        issue tile t + NBUF - 1 into buffer (t - 1) % NBUF; commit
        BK outer-product steps on buffer t % NBUF

One barrier per K tile; no registers spent on staging (more for accumulators); more latency
hidden than with two buffers. A tile read along K (A in layout N, B in T) is stored transposed
(``As[k, m]``, ``Bs[k, n]``): its copies are 4-byte ``cp.async.ca``, one per element, which can
land anywhere in SMEM, consecutive lanes reading consecutive k (than four consecutive k a
thread, 10 % faster with B row-major and 13 % with B transposed, geomean over an H200's class
candidates: docs/design.md §4.12); a tile read along M or N (B in N, A in T) is copied 16
bytes at a time (``cp.async.cg``) when its rows are 16-byte aligned, else 4 bytes at a time.
Past K the copies zero-fill (``src-size`` 0); rows/columns past M/N are clamped as in stage 6.
The NBUF copies of the tiles live in dynamic SMEM, over 48 KB when the configuration asks
(``launch.allow_dynamic_smem``).

Shapes and layouts: as ``warptiling`` (batches of strided matrices, layouts NN/NT/TN/TT); any
``M, N, K >= 1``. Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``.

Source: NVIDIA CUTLASS ``MmaMultistage`` (sm_80 multistage mainloop with cp.async); CUDA C++
Programming Guide, "Asynchronous Data Copies using cuda::pipeline"; PTX ISA, ``cp.async``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..backend import cuda, float32
from ..device import SMEM_OPTIN_LIMIT, WARP_SIZE
from ..ptx.cpasync import commit, copy_async, wait
from ..ptx.vecmem import SMEM_ALIGN, tile_view
from . import _tunable as tun
from . import k08_warptiling as wt
from ._common import device_jit, unroll
from .stage import Stage

#: Default: the fastest configuration measured at 4096^3 on an H200 (numba_gemm/tuning/sm_90.json):
#: 128x256x16 block tile, 8 warps of 64x64 (2x2 sub-tiles of 32x32), 8x4 thread tiles (16x8
#: accumulators per thread), two SMEM buffers (49.7 KB: dynamic SMEM past the 48 KB opt-in).
DEFAULT_CONFIG = dict(
    BM=128, BN=256, BK=16, WM=64, WN=64, WNITER=2, TM=8, TN=4, MINB=1, SPLITK=1, NBUF=2
)


def check_config(cfg: Mapping[str, int]) -> None:
    """Tile constraints of ``warptiling`` with NBUF (2-6) copies of the tiles in dynamic SMEM,
    and element-wise 4-byte copies that split evenly over the threads."""
    nbuf = cfg.get("NBUF")
    if not (isinstance(nbuf, int) and 2 <= nbuf <= 6):
        raise ValueError(f"invalid config {dict(cfg)}: NBUF must be an int in 2..6")
    tun.check_config(cfg, extra_keys=("NBUF",), smem_copies=nbuf, smem_limit=SMEM_OPTIN_LIMIT)
    warps = tun.derived(cfg)["NUM_THREADS"] // WARP_SIZE
    if cfg["BK"] % warps or cfg["BN"] % WARP_SIZE or cfg["BM"] % WARP_SIZE:
        raise ValueError(
            f"invalid config {dict(cfg)}: element-wise copies of B (of A, when it is "
            "transposed) need BK to be a multiple of the warp count, BN and BM of 32"
        )


SPACE = tun.make_space(check_config, extra={"NBUF": (2, 3, 4)})


def smem_bytes(cfg: Mapping[str, int], layout: str = "NN") -> int:
    """Dynamic SMEM per block: NBUF copies of the (padded, transposed) A tile and the B tile."""
    return cfg["NBUF"] * tun.derived(cfg, layout)["TILE_SMEM_BYTES"]


def make_copier(extent: int, BK: int, threads: int, k_contiguous: bool, slot=wt.same_column):
    """``copy_all(Xs, X, k0, tid, o0, olim, K, k_end, vec, full)``: issue this thread's
    cp.async copies of one operand's ``BK x extent`` tile (extent BM for A, BN for B) at ``k0``
    from its 2-D storage view ``X`` into the SMEM buffer ``Xs[k, o]``.

    ``k_contiguous`` (A in layout N, B in T): the tile is transposed on the way, so the copies
    are 4-byte ones, laid out along K: copy ``j`` of thread ``tid`` is element ``e = j * threads
    + tid`` of the tile in storage order (row ``e // BK``, column ``e % BK``), so a warp's copy
    reads ``32 / BK`` runs of BK consecutive floats. (Four consecutive k of one row a thread, as
    stage 6 reads its float4s, had each copy touch two sectors of each of 8 rows for 32 floats,
    and the thread's four copies the same sectors again: four times the sector requests.) Else
    (storage rows are K) float4 by float4 (16-byte copies) when the rows are 16-byte aligned
    (``vec``); otherwise element by element:
    warp ``w`` copies rows ``w * BK/NW ...`` of the tile, lane ``l`` columns ``l, l + 32, ...``,
    so that a warp's 4-byte copies read 128 contiguous bytes and a thread's copies of one row are
    one address plus constant offsets.
    ``slot`` (B: ``make_parts``'s ``b_slot``): in the scalar variant (``not vec``) and the
    ``VECTOR_LOADS`` one (``vec == 2``: an unreordered tile read along M is copied 16 bytes at a
    time, a reordered one along N element by element), tile column ``o`` goes to SMEM column
    ``slot(o)``, the order of the FMA core and epilogue (``warptiling.make_column_order``).
    ``full`` (a literal at the call site): the tile lies before ``k_end`` and, for a tile read
    along M (N), the block's columns before ``olim``, so no copy needs a bounds check or a clamp;
    else copies past ``k_end`` zero-fill and every address is clamped into the matrix.
    """
    warps = threads // WARP_SIZE
    if k_contiguous:
        copies = extent * BK // threads
        BY_ROWS = threads % BK == 0  # (else: copy e of the tile is element j * threads + tid)
        stride = threads // BK  # storage rows of the tile per pass

        @device_jit
        def _copy(j, Xs, X, k0, tid, o0, olim, K, k_end, vec, full):
            if BY_ROWS:
                o, kk = tid // BK + j * stride, tid % BK
            else:
                o, kk = (j * threads + tid) // BK, (j * threads + tid) % BK
            src_row = min(o0 + o, olim - 1)  # clamp: rows past M (N) are never stored
            if vec != 1:  # the scalar C stores' order (also in the VECTOR_LOADS variant)
                o = slot(o)
            k = k0 + kk  # transposing: Xs[k, o] = X[o, k]
            if full:
                copy_async(Xs, kk, o, X, src_row, k, 4, True)
            else:
                copy_async(Xs, kk, o, X, src_row, min(k, K - 1), 4, k < k_end)

        copy_all = unroll(copies, _copy)

        @device_jit
        def copy_tile(Xs, X, k0, tid, o0, olim, K, k_end, vec, full):
            copy_all(Xs, X, k0, tid, o0, olim, K, k_end, vec, full)

        return copy_tile

    loads4 = (extent * BK // 4) // threads
    stride4 = threads // (extent // 4)  # float4 path: storage rows of the tile per pass
    elems = BK * extent // threads  # 4-byte copies per thread (scalar path)
    rows_per_warp = BK // warps
    col_groups = extent // WARP_SIZE

    @device_jit
    def _copy4(j, Xs, X, k0, tid, o0, olim, K, k_end, full):
        r = tid // (extent // 4) + j * stride4
        c = (tid % (extent // 4)) * 4
        k = k0 + r
        src_k = k if full else min(k, K - 1)
        copy_async(Xs, r, c, X, src_k, min(o0 + c, olim - 4), 16, full or k < k_end)

    @device_jit
    def _copy1(j, Xs, X, k0, tid, o0, olim, K, k_end, full):
        r = (tid // WARP_SIZE) * rows_per_warp + j // col_groups
        c = tid % WARP_SIZE + (j % col_groups) * WARP_SIZE
        s = slot(c)  # the scalar variant's SMEM order; the warp still reads 128 bytes in a row
        k = k0 + r
        if full:
            copy_async(Xs, r, s, X, k, o0 + c, 4, True)
        else:
            copy_async(Xs, r, s, X, min(k, K - 1), min(o0 + c, olim - 1), 4, k < k_end)

    copy4_all = unroll(loads4, _copy4)
    copy1_all = unroll(elems, _copy1)

    IDENTITY = slot is wt.same_column  # (A) no reordering: 16-byte copies whenever vec

    @device_jit
    def copy_tile(Xs, X, k0, tid, o0, olim, K, k_end, vec, full):
        if vec == 1 or (vec and IDENTITY):
            copy4_all(Xs, X, k0, tid, o0, olim, K, k_end, full)
        else:
            copy1_all(Xs, X, k0, tid, o0, olim, K, k_end, full)

    return copy_tile


@functools.cache
def _make_kernel(items: tuple, vec: int, layout: str = "NN", epilogue=None, grouped=False):
    cfg = dict(items)
    pt = wt.make_parts(cfg, layout)
    a_view, b_view, thread_origin = pt.a_view, pt.b_view, pt.thread_origin
    mma_tile, store_with = pt.mma_tile, pt.store_with
    BM, BN, BK, TM, TN, SPLITK = (cfg[k] for k in ("BM", "BN", "BK", "TM", "TN", "SPLITK"))
    NT = pt.d["NUM_THREADS"]
    A_ALONG_K, B_ALONG_K = layout[0] == "N", layout[1] == "T"
    copy_a = make_copier(BM, BK, NT, A_ALONG_K)
    copy_b = make_copier(BN, BK, NT, B_ALONG_K, pt.b_slot)
    NBUF = cfg["NBUF"]
    WAIT_PENDING = NBUF - 2  # groups allowed in flight when tile t must have landed
    AS_PITCH, BS_PITCH = pt.d["AS_PITCH"], pt.d["BS_PITCH"]
    A_FLOATS = NBUF * BK * AS_PITCH
    RES_M, RES_N = pt.d["WMITER"] * TM, cfg["WNITER"] * TN
    work = tun.make_work(BM, BN, BK, SPLITK, grouped)
    epilogue_store = tun.make_epilogue(store_with, BM, BN, NT, SPLITK, epilogue)
    CVEC = vec == 1  # 128-bit stores of C (not in the VECTOR_LOADS variant)

    @device_jit
    def copy_tiles(As, Bs, Ag, Bg, k0, tid, row0, col0, M, N, K, k_end, full):
        copy_a(As, Ag, k0, tid, row0, M, K, k_end, vec, full)
        copy_b(Bs, Bg, k0, tid, col0, N, K, k_end, vec, full)

    @device_jit
    def sgemm_multistage_unit(u, A, B, C, W, L, alpha, beta, E):
        # The kernel's body for its u-th unit of work: one C tile's K range (one per block,
        # more with stream-K: tun.unit_kernel). A (batch, M, K), B (batch, K, N), C (batch, M, N):
        # strided batches; W, L: split-K's or stream-K's workspace and tile counters.
        M, K, N = A.shape[1], A.shape[2], B.shape[2]
        # dynamic SMEM: NBUF copies of the A tile (As[k, m], padded), then NBUF of the B tile
        smem = cuda.shared.array(0, float32, alignment=SMEM_ALIGN)
        As = tile_view(smem, 0, (NBUF, BK, AS_PITCH))
        Bs = tile_view(smem, A_FLOATS, (NBUF, BK, BS_PITCH))
        tid = cuda.threadIdx.x
        wm0, wn0 = thread_origin(tid)

        reg_m = cuda.local.array(RES_M, float32)
        reg_n = cuda.local.array(RES_N, float32)
        thread_results = cuda.local.array((RES_M, RES_N), float32)
        job = work(u, M, N, K, L)  # (batch, tile origin, K range; how the epilogue ends it)
        bz, row0, col0, k_begin, k_end, M = job[0], job[1], job[2], job[3], job[4], job[9]
        Ag, Bg = a_view(A, bz), b_view(B, bz)  # 2-D storage views (C's: in the epilogue)
        for m in range(RES_M):
            for n in range(RES_N):
                thread_results[m, n] = float32(0.0)

        # --- prologue: GMEM -> SMEM copies of tiles 0 .. NBUF-2 in flight, one group each
        for s in range(NBUF - 1):
            k0 = k_begin + s * BK
            if k0 < k_end:
                copy_tiles(As[s], Bs[s], Ag, Bg, k0, tid, row0, col0, M, N, K, k_end, False)
            commit()  # (possibly empty: keeps one group per tile)

        # no column of this block's tiles read along M (N) needs a clamp
        interior = (A_ALONG_K or row0 + BM <= M) and (B_ALONG_K or col0 + BN <= N)
        cb = 0  # buffer of tile t
        nb = NBUF - 1  # buffer of tile t + NBUF - 1 (the one tile t - 1 used)
        k_next = k_begin + (NBUF - 1) * BK
        for _ in range(k_begin, k_end, BK):
            wait(WAIT_PENDING)  # this thread's copies of tile t have landed
            cuda.syncthreads()  # ...everyone's; and everyone is done computing on tile t - 1
            # --- GMEM -> SMEM: tile t + NBUF - 1 into the buffer tile t - 1 used
            if k_next + BK <= k_end and interior:
                copy_tiles(As[nb], Bs[nb], Ag, Bg, k_next, tid, row0, col0, M, N, K, k_end, True)
            elif k_next < k_end:
                copy_tiles(As[nb], Bs[nb], Ag, Bg, k_next, tid, row0, col0, M, N, K, k_end, False)
            commit()
            # --- SMEM -> registers, FMA on tile t
            mma_tile(As[cb], Bs[cb], reg_m, reg_n, thread_results, wm0, wn0)
            k_next += BK
            cb = cb + 1 if cb + 1 < NBUF else 0
            nb = nb + 1 if nb + 1 < NBUF else 0
        wait(0)  # no copy may still be writing SMEM when the block exits (or the unit ends)

        # --- epilogue: write C (split-K / stream-K: the workspace; the tile's last sums)
        epilogue_store(
            C, W, L, job, thread_results, row0 + wm0, col0 + wn0, M, N, alpha, beta, CVEC, E
        )

    name = "sgemm_multistage_grouped" if grouped else "sgemm_multistage"
    return tun.unit_kernel(name, sgemm_multistage_unit, cfg, epilogue, grouped)


def a_copied(layout: str) -> str:
    """A in layout N (stored with K contiguous): :func:`make_copier` copies it 4 bytes at a time,
    in the same SMEM order in every variant, so its rows need no alignment
    (``Stage.element_copied``).
    B stored transposed is copied alike, but the variants lay its columns out in SMEM in other
    orders and neither wins everywhere (H200 tuning data, NT, vector against scalar: 76 against
    92 us for the small class's 128 x 256 tile, 374 against 270 us for a 128 x 64 tile at 4096 x
    16 x 4096), so its rows keep the plan's rule."""
    return "A" if layout[0] == "N" else ""


def make_stage(config: Mapping[str, int]) -> Stage:
    """The multistage stage for one configuration (validated by :func:`check_config`)."""
    return tun.build_stage(
        "multistage",
        "10: cp.async multistage",
        config,
        _make_kernel,
        make_stage,
        SPACE,
        check_config,
        smem=smem_bytes,
        min_cc=(8, 0),
        element_copied=a_copied,
    )


STAGE = make_stage(DEFAULT_CONFIG)
