"""Stage 16, skinny N: a large A times a few columns of B (N <= 64: a GEMV, or a projection to a
handful of outputs), at the speed of reading A once from DRAM.

Stage 15's transpose. With N = 16 each A element feeds at most 16 FMAs, so the product is bound
by the 4 bytes of A per 2 * N flops; and A is row-major, K-contiguous, so it must be streamed
along K (the skinny stage streams B along N). Here a warp owns ``RW`` rows of A and its 32 lanes
split K: lane ``l`` reads ``A[m, k + 4l : k + 4l + 4]`` (one 128-bit load; a warp reads 512
contiguous bytes of a row), ``KSTEP = KC / 128`` such loads per row and chunk, all in flight,
issued for the next chunk before this chunk's FMAs (two register buffers, as stage 9). The
block's ``NB`` columns of B are staged in SMEM per chunk of ``KC`` rows, transposed
(``Bs[n, k]``: a lane's four k are one 128-bit read, conflict-free across the warp, reused by
the warp's ``RW`` rows). Each lane keeps ``RW x NB`` partial sums over its own k; at the
end the warp sums them over its lanes by a *reduce-scatter* of shuffles (each exchange halves the
values a lane holds: 62 shuffles for 64 sums, not 5 x 64), and each lane writes the sums it ends
with. When ``M / BM`` blocks are too few to keep the DRAM busy, K is split over the grid
(``SPLITK``; at 4096 rows an H200 tuning chose 1 for 16 columns, 2 for one), the slices summed by
the last one to finish (``_splitk``).

Shapes: A ``(M, K)`` row-major (layout N), B ``(K, N)`` in layout N or T (staged element by
element in four-column or four-row pieces: it is small), C ``(M, N)``, float32, batches of strided
matrices as the tunable stages (``_tunable``); any ``M, K >= 1`` and ``1 <= N <= MAX_N``
(``N > NB`` takes ``cdiv(N, NB)`` column blocks, each reading all of A: the plan prices that).
Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``. Rows of A, B or C not
16-byte aligned (N = 1 included): the scalar variant (four 32-bit loads).

Source: the warp-per-row GEMV with a shuffle reduction of the "GEMV" kernels of NVIDIA CUTLASS
(``gemv.cu``, one warp per row of A) and of the CUDA samples' reduction; the reduce-scatter by
halving exchanges from Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
Operations in MPICH" (IJHPCA 2005), applied to the 32 lanes of a warp.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..backend import cuda, float32
from ..device import SIMULATOR, SMEM_STATIC_LIMIT, WARP_SIZE, tile_grid
from ..ptx.vecmem import SMEM_ALIGN, cols_view, load4, rows_view, store4, tile_view
from . import _splitk
from . import _tunable as tun
from ._common import (
    device_jit,
    load_a4,
    load_b4,
    sequence,
    shfl_xor,
    unroll,
)
from ._epilogue import stores_for
from .stage import Stage

#: NB columns of C per block (the B tile in SMEM); RW rows of A per warp; THREADS threads; KC rows
#: of B per chunk (KC / 128 128-bit loads of each A row per lane and chunk); SPLITK slices of K
#: over the grid; MINB blocks per SM asked of ptxas (0: none).
DEFAULT_CONFIG = dict(NB=16, RW=2, THREADS=256, KC=256, SPLITK=4, MINB=0)

KEYS = ("NB", "RW", "THREADS", "KC", "SPLITK", "MINB")
#: k per step of a warp: 32 lanes x 4 (one 128-bit load of A each).
WARP_K = 4 * WARP_SIZE
#: Floats of padding per row of the transposed B tile (rows stay 16-byte aligned).
B_PAD = 4
#: The largest N the stage takes: beyond it A is read N / NB times and the tiled stages win.
MAX_N = 64


def derived(cfg: Mapping[str, int]) -> dict:
    """NW warps, BM rows per block, KSTEP loads per row, lane and chunk, V partial sums per lane,
    BP the pitch of the B tile, SMEM floats, B_PER_THREAD float4s of the B tile per thread."""
    nw = cfg["THREADS"] // WARP_SIZE
    bp = cfg["KC"] + B_PAD
    b_items = cfg["NB"] * cfg["KC"] // 4
    return dict(
        NW=nw,
        BM=nw * cfg["RW"],
        KSTEP=cfg["KC"] // WARP_K,
        V=cfg["RW"] * cfg["NB"],
        BP=bp,
        SMEM_FLOATS=cfg["NB"] * bp,
        B_PER_THREAD=-(-b_items // cfg["THREADS"]),
    )


def check_config(cfg: Mapping[str, int]) -> None:
    """Raise ``ValueError`` naming the first constraint ``cfg`` violates."""
    tun.check_keys(cfg, KEYS)
    d = derived(cfg)
    tun.check_rules(
        cfg,
        [
            (cfg["NB"] in (4, 8, 16), "NB must be 4, 8 or 16"),
            (cfg["RW"] in (1, 2, 4, 8), "RW must be 1, 2, 4 or 8"),
            (
                cfg["THREADS"] % WARP_SIZE == 0 and 32 <= cfg["THREADS"] <= 1024,
                "NT must be a multiple of 32 in [32, 1024]",
            ),
            (
                cfg["KC"] % WARP_K == 0 and WARP_K <= cfg["KC"] <= 512,
                "KC must be a multiple of 128 (32 lanes x 4) in [128, 512]",
            ),
            (d["V"] <= 64, "at most 64 partial sums per lane (RW * NB)"),
            (
                cfg["RW"] * d["KSTEP"] <= 8,
                "at most 8 loads of A per lane and chunk (RW * KC / 128)",
            ),
            (
                d["B_PER_THREAD"] <= 8,
                "at most 8 float4s of the B tile per thread (NB * KC / 4 / THREADS)",
            ),
            (4 * d["SMEM_FLOATS"] <= SMEM_STATIC_LIMIT, "the B tile must fit 48 KB of SMEM"),
            (1 <= cfg["SPLITK"] <= 64, "SPLITK must be 1-64"),
            (
                0 <= cfg["MINB"] <= 8 and cfg["MINB"] * cfg["THREADS"] <= 2048,
                "MINB must be 0-8 and MINB * THREADS <= 2048",
            ),
        ],
    )


SPACE = tun.valid_configs(
    check_config,
    (
        dict(NB=nb, RW=rw, THREADS=nt, KC=kc, SPLITK=s, MINB=0)
        for nb in (4, 8, 16)
        for rw in (2, 4, 1)
        for nt in (256, 128, 512)
        for kc in (256, 512, 128)
        for s in (4, 8, 2, 16, 1)
    ),
)


def lane_sums_owned(V: int, lane: int) -> tuple[int, int, bool]:
    """``(first, count, owner)``: after :func:`make_lane_reduce` over ``V`` partial sums, lane
    ``lane`` holds the warp's totals of sums ``first .. first + count - 1``; ``owner`` is False
    for a lane that holds a copy another lane writes (V < 32: the last exchanges add the same
    totals in several lanes)."""
    first, length, dup = 0, V, 0
    for s in range(5):
        o = 16 >> s
        if length >= 2:
            length //= 2
            if lane & o:
                first += length
        else:
            dup |= o
    return first, length, (lane & dup) == 0


_lane_sums_owned = device_jit(lane_sums_owned)  # the same index map, in the kernel


def make_lane_reduce(V: int):
    """``reduce(v, lane, scratch)``: the sum over a warp's 32 lanes of each of the ``V`` values of
    register array ``v``, scattered over the lanes (:func:`lane_sums_owned` says which lane ends
    with which totals, in ``v[0 .. count - 1]``). Five exchange steps with lanes ``lane ^ 16``,
    ``^ 8``, ... ``^ 1``: while a lane holds two or more values it keeps one half (the upper one
    if its bit of the step is set), sends the other and adds what its partner sent for the kept
    half; once it holds one, partners add each other's (a butterfly)."""
    steps, length = [], V
    for s in range(5):
        o = 16 >> s
        if length >= 2:
            half = length // 2
            steps.append(_halve(half, o))
            length = half
        else:
            steps.append(_butterfly(o))
    return sequence(*steps)


def _halve(half: int, o: int):
    @device_jit
    def _pair(i, v, up, scratch):
        lo, hi = v[i], v[i + half]
        send = lo if up else hi
        keep = hi if up else lo
        v[i] = keep + shfl_xor(send, o, scratch)

    pairs = unroll(half, _pair)

    @device_jit
    def step(v, lane, scratch):
        pairs(v, (lane & o) != 0, scratch)

    return step


def _butterfly(o: int):
    @device_jit
    def step(v, lane, scratch):
        v[0] = v[0] + shfl_xor(v[0], o, scratch)

    return step


@functools.cache
def _make_kernel(items: tuple, vec: int, layout: str = "NN", epilogue=None):
    cfg = dict(items)
    NB, RW, THREADS, KC, SPLITK, MINB = (cfg[k] for k in KEYS)
    d = derived(cfg)
    BM, KSTEP, V, BP = d["BM"], d["KSTEP"], d["V"], d["BP"]
    SMEM_FLOATS = d["SMEM_FLOATS"]
    B_T = layout[1] == "T"  # B stored (N, K): its tile is read four k at a time
    B_ITEMS = NB * KC // 4  # float4s of the B tile
    B_PER_THREAD = d["B_PER_THREAD"]
    BREG = 4 * B_PER_THREAD  # B registers per thread and chunk
    AREG = 4 * RW * KSTEP  # A registers per lane and chunk
    LF = max(V // WARP_SIZE, 1)  # totals per lane after the reduction
    SCRATCH = THREADS if SIMULATOR else 1  # the simulator's model of the shuffles

    @device_jit
    def _load_a(i, areg, Ag, row0, k, M, k_end):
        # A[row0 + r, k + 128 j : +4] for the i-th (r, j) of this lane: zeros past k_end, rows
        # clamped into [0, M) (a clamped row feeds only rows of C that are not written)
        r, j = i // KSTEP, i % KSTEP
        a0, a1, a2, a3 = load_a4(Ag, min(row0 + r, M - 1), k + j * WARP_K, k_end, vec)
        areg[4 * i] = a0
        areg[4 * i + 1] = a1
        areg[4 * i + 2] = a2
        areg[4 * i + 3] = a3

    load_a = unroll(RW * KSTEP, _load_a)

    @device_jit
    def _b_item(i):
        # (n, k) of the i-th float4 of the B tile: four k of column n (B in T) or four columns
        # n .. n+3 of row k (B in N)
        if B_T:
            n = i // (KC // 4)
            return n, 4 * (i - n * (KC // 4))
        k = i // (NB // 4)
        return 4 * (i - k * (NB // 4)), k

    @device_jit
    def _load_b(e, breg, B, bz, tid, kc, n0, N, k_end):
        # GMEM -> registers: this thread's e-th float4 of the B tile of chunk kc (zeros past
        # k_end, columns clamped into [0, N))
        i = tid + e * THREADS
        if i < B_ITEMS:
            n, k = _b_item(i)
            if B_T:
                b0, b1, b2, b3 = load_a4(cols_view(B, bz), min(n0 + n, N - 1), kc + k, k_end, vec)
            else:
                b0, b1, b2, b3 = load_b4(rows_view(B, bz), kc + k, n0 + n, k_end, N, vec)
            breg[4 * e] = b0
            breg[4 * e + 1] = b1
            breg[4 * e + 2] = b2
            breg[4 * e + 3] = b3

    @device_jit
    def _store_b(e, breg, Bs, tid):
        # registers -> SMEM, transposed: Bs[n, k]
        i = tid + e * THREADS
        if i < B_ITEMS:
            n, k = _b_item(i)
            if B_T:
                store4(Bs, n, k, breg[4 * e], breg[4 * e + 1], breg[4 * e + 2], breg[4 * e + 3])
            else:
                Bs[n, k] = breg[4 * e]
                Bs[n + 1, k] = breg[4 * e + 1]
                Bs[n + 2, k] = breg[4 * e + 2]
                Bs[n + 3, k] = breg[4 * e + 3]

    load_b = unroll(B_PER_THREAD, _load_b)
    store_b = unroll(B_PER_THREAD, _store_b)

    @device_jit
    def _fma_row(r, acc, areg, j, n, b0, b1, b2, b3):
        # sum r of column n += A[row0 + r, k .. k + 3] . B[k .. k + 3, n]
        a = 4 * (r * KSTEP + j)
        acc[r * NB + n] += areg[a] * b0
        acc[r * NB + n] += areg[a + 1] * b1
        acc[r * NB + n] += areg[a + 2] * b2
        acc[r * NB + n] += areg[a + 3] * b3

    fma_rows = unroll(RW, _fma_row)

    @device_jit
    def _fma_col(n, acc, areg, Bs, j, kk):
        b0, b1, b2, b3 = load4(Bs, n, kk + j * WARP_K)  # B[k .. k + 3, n]: one 128-bit read
        fma_rows(acc, areg, j, n, b0, b1, b2, b3)

    fma_cols = unroll(NB, _fma_col)

    @device_jit
    def _fma_step(j, acc, areg, Bs, kk):
        fma_cols(acc, areg, Bs, j, kk)

    fma_chunk = unroll(KSTEP, _fma_step)
    lane_reduce = make_lane_reduce(V)

    @device_jit
    def chunk(acc, cur, nxt, breg, Ag, B, Bs, bz, tid, lane, row0, kc, n0, M, N, k_end):
        # the FMAs of chunk kc (A in ``cur``, B in Bs) while chunk kc + KC is loaded into
        # ``nxt`` and breg; then B goes to SMEM. ``kc`` is the same in the whole block.
        if kc < k_end:
            nk = kc + KC
            if nk < k_end:  # --- GMEM -> registers: the next chunk, in flight during the FMAs
                load_a(nxt, Ag, row0, nk + 4 * lane, M, k_end)
                load_b(breg, B, bz, tid, nk, n0, N, k_end)
            # --- SMEM (B) x registers (A) -> this lane's partial sums
            fma_chunk(acc, cur, Bs, 4 * lane)
            if nk < k_end:
                cuda.syncthreads()  # everyone is done reading this chunk's B tile
                store_b(breg, Bs, tid)
                cuda.syncthreads()  # the next B tile is in SMEM

    stores = stores_for(epilogue)
    store_c = stores.store_c

    @device_jit
    def _write(i, v, Dg, z0, row0, first, n0, M, N, alpha, beta, E):
        # the warp's total i of this lane: C[row0 + r, n0 + n]
        r, n = (first + i) // NB, (first + i) % NB
        if row0 + r < M and n0 + n < N:
            store_c(Dg, row0 + r, n0 + n, v[i], alpha, beta, E)

    @device_jit
    def _write_part(i, v, Dg, z0, row0, first, n0, M, N, alpha, beta, E):
        # ... or row z0 + row0 + r of the workspace, unscaled
        r, n = (first + i) // NB, (first + i) % NB
        if row0 + r < M and n0 + n < N:
            Dg[z0 + row0 + r, n0 + n] = v[i]

    write_sums, write_parts = unroll(LF, _write), unroll(LF, _write_part)
    fixup = _splitk.make_fixup(BM, NB, THREADS, SPLITK, False, stores)

    @device_jit
    def sgemm_skinny_n(A, B, C, W, L, alpha, beta, E):
        # A (batch, M, K), B (batch, K, N), C (batch, M, N): strided batches, grid z = batch
        # (or, with SPLITK > 1, the K slice: W, L are split-K's workspace and tile counters)
        M, K, N = A.shape[1], A.shape[2], B.shape[2]
        bz, k_begin, k_end = tun.block_work(K, KC, SPLITK)
        tid = cuda.threadIdx.x
        lane = tid % WARP_SIZE
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * NB
        row0 = m0 + (tid // WARP_SIZE) * RW  # this warp's first row of A and C
        Ag = rows_view(A, bz)
        smem = cuda.shared.array(SMEM_FLOATS, float32, alignment=SMEM_ALIGN)
        Bs = tile_view(smem, 0, (NB, BP))
        scratch = cuda.shared.array(SCRATCH, float32)
        acc = cuda.local.array(V, float32)
        areg = cuda.local.array(AREG, float32)  # this chunk's A ...
        areg2 = cuda.local.array(AREG, float32)  # ... and the next one's (or the reverse)
        breg = cuda.local.array(BREG, float32)  # the next chunk's B, on its way to SMEM
        for i in range(V):
            acc[i] = float32(0.0)

        # --- prologue: chunk 0 of A in registers, of B in SMEM
        load_a(areg, Ag, row0, k_begin + 4 * lane, M, k_end)
        load_b(breg, B, bz, tid, k_begin, n0, N, k_end)
        store_b(breg, Bs, tid)
        cuda.syncthreads()  # the first B tile is in SMEM
        # --- main loop, two chunks per turn so that each register buffer has constant indices:
        # the next chunk's loads are in flight while this one's FMAs run
        for kc in range(k_begin, k_end, 2 * KC):
            chunk(acc, areg, areg2, breg, Ag, B, Bs, bz, tid, lane, row0, kc, n0, M, N, k_end)
            chunk(acc, areg2, areg, breg, Ag, B, Bs, bz, tid, lane, row0, kc + KC, n0, M, N, k_end)

        # --- epilogue: sum over the warp's lanes (shuffles), each lane writes the totals it ends
        # with: C, or with SPLITK > 1 this slice's rows of the workspace, and the tile's last
        # slice sums the slices
        lane_reduce(acc, lane, scratch)
        first, _, owner = _lane_sums_owned(V, lane)
        if SPLITK == 1:
            if owner:
                write_sums(acc, rows_view(C, bz), 0, row0, first, n0, M, N, alpha, beta, E)
        else:
            Wg = rows_view(W, 0)
            z0 = cuda.blockIdx.z * M
            if owner:
                write_parts(acc, Wg, z0, row0, first, n0, M, N, alpha, beta, ())
            fixup(Wg, L, rows_view(C, 0), m0, n0, M, N, alpha, beta, vec == 1, E)

    # more than 256 threads: ptxas is told the block size, so that it keeps to the 128 registers
    # a thread of 512 can have (left to itself it gave the B-transposed and scalar variants
    # 140-153, and the launch failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    bounds = (THREADS, MINB) if MINB else (THREADS,) if THREADS > 256 else None
    return tun.entry_kernel("sgemm_skinny_n", sgemm_skinny_n, epilogue, launch_bounds=bounds)


def launch_config_for(cfg: Mapping[str, int]):
    bm = derived(cfg)["BM"]

    def launch_config(M, N, K):
        return (*tile_grid(M, N, bm, cfg["NB"]), cfg["SPLITK"]), (cfg["THREADS"],)

    return launch_config


def supports(M: int, N: int, K: int) -> bool:
    """Any ``M, K >= 1`` and ``1 <= N <= MAX_N``."""
    return M >= 1 and 1 <= N <= MAX_N and K >= 1


LAYOUTS = ("NN", "NT")  # A row-major (streamed along K); B in either layout (staged element-wise)


def make_stage(config: Mapping[str, int]) -> Stage:
    """The skinny-N stage for one configuration (validated by :func:`check_config`)."""
    return tun.build_stage(
        "skinny_n",
        "16: skinny N (split-K, A read once)",
        config,
        _make_kernel,
        make_stage,
        SPACE,
        check_config,
        block_of=lambda cfg: (derived(cfg)["BM"], cfg["NB"], cfg["KC"]),
        threads_of=lambda cfg: cfg["THREADS"],
        launch_config_for=launch_config_for,
        supports=supports,
        limits=f"1 <= N <= {MAX_N} and any M, K >= 1 (more columns: a tiled stage)",
        layouts=LAYOUTS,
        general=False,
    )


STAGE = make_stage(DEFAULT_CONFIG)
