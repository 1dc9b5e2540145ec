"""Stage 15, skinny: a few rows of A (M <= 16, a decoding step or a GEMV batch) times a large B,
at the speed of reading B once from DRAM.

With M = 16 a 128x128 block tile is 7/8 empty and each B element feeds at most 16 FMAs: the
product is bound by the 4 bytes of B per 2 * M flops, not by FMAs. So the tile of this stage is
``MT x BN``: ``MT`` rows of C (all of M, when M <= MT) by ``BN`` columns. Each thread owns four
consecutive columns (one 128-bit load of a B row per k) and ``MT x 4`` accumulators; the
``BN / 4`` threads of a column group cover a row of the B tile and the ``KG = THREADS / (BN / 4)``
k-groups of a block walk interleaved rows of B, so a block streams ``KG`` rows of its B tile at
a time, each read exactly once, with ``KC / KG`` loads per thread in flight per chunk. A (small)
is staged in SMEM by super-chunks of ``MT x KS`` (``As[k, m]``, 16 KB: KS = 256 columns for MT = 16,
4096 for MT = 1), so the B stream crosses a barrier only every ``KS / KC`` chunks; a warp reads A
all at once (a broadcast). A's elements are 4-byte ``cp.async`` copies (``numba_gemm.ptx.cpasync``),
all of a thread's in flight at once. With ``MT = 1`` (a GEMV) the first B chunk of each
super-chunk is loaded before A is staged, so that the two DRAM round trips overlap (at K = 768,
a GPT-2 layer, the whole K is one to three chunks). With 2-8 rows a chunk goes in two halves: the
loads of the next half are issued (``issue_fence``) before the FMAs of this one, so that a warp
always has B in flight (left to itself, ptxas spread a chunk's loads over its FMAs, one or two in
flight). N / BN blocks alone cannot fill the GPU (32 for N = 4096), so K is split over the grid
(``SPLITK``) and, inside a block, over the k-groups; the k-groups' partial sums meet in SMEM at the
end, the K slices in split-K's workspace, summed by the last slice of each tile to finish
(``_splitk``). With ``NBUF > 0`` B does not pass through registers: a ring of NBUF chunks in SMEM is
filled by 16-byte ``cp.async`` copies NBUF - 1 chunks ahead of the FMAs, each thread copying (and
later reading) only its own rows and columns of a chunk, so the ring needs no barrier; the registers
then hold the accumulators alone (2-4 blocks per SM at MT = 8-16), and the ring's SMEM takes the
k-groups' partial sums at the end. Blocks of 512 or 1024 threads with ``BN = 32 .. 128`` are the
GEMV form (cuBLAS's at the 1-token layers): one block per SM, 16-128 k-groups, K split over the
warps of a block first.

B stored transposed (layouts NT and TT: ``B = W.T`` with W a row-major ``(N, K)`` weight, as in
``x @ W.T``, what ``torch.nn.Linear`` computes): a thread still owns four columns of C, now four
rows of W, and reads each 4 k at a time (one 128-bit load per row); the k-groups are the
fastest-varying thread index, so a warp's loads of a row of W are consecutive, and A is staged as
``As[m, k]`` so that a lane's 4 k are one 128-bit SMEM read (consecutive across the lanes). Each
chunk is ``KC / (4 KG)`` such steps, so the configurations that take it are those with B in
registers (``NBUF = 0``) and ``KC / KG`` a multiple of 4 (:func:`transposed_b_ok`); their loads
in flight per thread and their registers match the row-major form's, and the plan prices them
from the row-major measurements. The k-groups' sums meet in SMEM as above.

Grouped products (``_make_kernel(..., grouped=True)``, ``launch.grouped``): the same tile over the
work list of every group's ``MT x BN`` tiles, walked by a persistent grid (``_tunable.make_work``),
K whole; the groups of a few tokens of a mixture-of-experts layer, where a 32-row tile would
multiply-add rows that are not there.

Shapes: A ``(M, K)`` in layout N or T (read element by element into SMEM: it is small), B
``(K, N)`` row-major (layout N) or stored transposed (layout T, see above), C ``(M, N)``,
float32, batches of strided matrices as the tunable stages (``_tunable``); any ``M, N, K >= 1``
(``M > MT`` takes ``cdiv(M, MT)`` row blocks, each reading all of B: the plan prices that).
Computes ``C = alpha * A @ B + beta * C``; C is not read when ``beta == 0``. Rows of B not
16-byte aligned: the scalar variant, four 32-bit loads per row whose columns are
``G = gcd(BN / 4, 32)`` apart (a thread's columns ``c, c + G, c + 2G, c + 3G``), so that each
load instruction of a warp reads consecutive floats; four consecutive columns per thread would
leave 12 of every 16 bytes a warp's load touches unused. B transposed, the same rule along K: a
thread's four k of a step are ``KG`` apart (``k, k + KG, k + 2 KG, k + 3 KG``), so that each 32-bit
load of a warp reads consecutive floats of a row of W, and all of a chunk's loads are issued
before its FMAs (``issue_fence``); zero past K.

Source: the split-K GEMV of the "GEMM with few rows" regime, as in NVIDIA CUTLASS's
``GemvBatched`` / ``GemmSplitKParallel``; the roofline argument (bytes of B per flop) from
Williams, Waterman and Patterson, "Roofline" (CACM 2009); the ring of asynchronous copies from
CUTLASS's sm_80 ``MmaMultistage`` and the PTX ISA's ``cp.async``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

from ..backend import cuda, float32
from ..device import SMEM_STATIC_LIMIT, WARP_SIZE, tile_grid
from ..ptx.cpasync import commit, copy_async, wait
from ..ptx.vecmem import SMEM_ALIGN, cols_view, load4, rows_view, store4
from . import _splitk
from . import _tunable as tun
from ._common import (
    PLAIN_STORES,
    device_jit,
    issue_fence,
    load_a4,
    load_a_cols,
    load_b4,
    load_b_cols,
    unroll,
)
from ._epilogue import stores_for
from .stage import Stage

#: MT rows of C per block; BN columns (BN / 4 threads per row of the B tile); THREADS threads; KC
#: rows of B per chunk (KC / KG per thread); SPLITK slices of K over the grid; MINB blocks per SM
#: asked of ptxas (0: none); NBUF chunks of B in an SMEM ring filled by cp.async (0: B in
#: registers).
DEFAULT_CONFIG = dict(MT=16, BN=128, THREADS=256, KC=64, SPLITK=8, MINB=0, NBUF=0)

KEYS = ("MT", "BN", "THREADS", "KC", "SPLITK", "MINB", "NBUF")
#: SMEM for the k-groups' partial sums: rows of C reduced per pass so that they fit this.
REDUCE_SMEM = 16 * 1024
#: SMEM for A: a super-chunk of KS = A_SMEM / (4 MT) columns (a multiple of KC) is staged at once,
#: so that the B stream runs KS / KC chunks between two barriers.
A_SMEM = 16 * 1024
#: Static SMEM of a block (the CUDA limit without the dynamic opt-in): with a ring of B chunks
#: (NBUF > 0) A's super-chunk gets what the ring leaves, at most A_SMEM.
#: The largest M the stage takes: beyond it B is read M / MT times and the tiled stages win.
MAX_M = 64


def derived(cfg: Mapping[str, int]) -> dict:
    """CG threads per B row, KG k-groups, KSTEP loads per thread and chunk, RM rows per pass of
    the final reduction, BS_ROWS rows of the SMEM array that holds the ring of B chunks (NBUF > 0)
    and then the k-groups' partial sums, KS columns of A per super-chunk in SMEM, SMEM bytes."""
    cg = cfg["BN"] // 4
    kg = max(cfg["THREADS"] // max(cg, 1), 1)
    rm = max(1, min(cfg["MT"], REDUCE_SMEM // (4 * kg * cfg["BN"])))
    bs_rows = max(cfg["NBUF"] * cfg["KC"], kg * rm)
    a_smem = A_SMEM if not cfg["NBUF"] else min(A_SMEM, SMEM_STATIC_LIMIT - 4 * bs_rows * cfg["BN"])
    ks = max(cfg["KC"], a_smem // (4 * cfg["MT"]) // cfg["KC"] * cfg["KC"])
    return dict(
        CG=cg,
        KG=kg,
        KSTEP=cfg["KC"] // kg,
        RM=rm,
        BS_ROWS=bs_rows,
        KS=ks,
        SMEM=4 * (bs_rows * cfg["BN"] + ks * cfg["MT"]),
    )


def check_config(cfg: Mapping[str, int]) -> None:
    """Raise ``ValueError`` naming the first constraint ``cfg`` violates."""
    tun.check_keys(cfg, KEYS)
    d = derived(cfg)
    tun.check_rules(
        cfg,
        [
            (cfg["MT"] in (1, 2, 4, 8, 16), "MT must be 1, 2, 4, 8 or 16"),
            (cfg["BN"] >= 4 and cfg["BN"] % 4 == 0, "BN must be a positive multiple of 4"),
            (
                cfg["THREADS"] % WARP_SIZE == 0 and 32 <= cfg["THREADS"] <= 1024,
                "NT must be a multiple of 32 in [32, 1024]",
            ),
            (cfg["THREADS"] % d["CG"] == 0, "BN / 4 must divide THREADS (whole k-groups)"),
            (
                cfg["KC"] >= d["KG"] and cfg["KC"] % d["KG"] == 0,
                "KC must be a multiple of the k-group count THREADS / (BN / 4)",
            ),
            (d["KSTEP"] <= 16, "at most 16 loads per thread and chunk (KC / KG)"),
            (cfg["MT"] % d["RM"] == 0, "the reduction's rows per pass must divide MT"),
            (1 <= cfg["SPLITK"] <= 64, "SPLITK must be 1-64"),
            (
                0 <= cfg["MINB"] <= 8 and cfg["MINB"] * cfg["THREADS"] <= 2048,
                "MINB must be 0-8 and MINB * THREADS <= 2048",
            ),
            (cfg["NBUF"] == 0 or 2 <= cfg["NBUF"] <= 8, "NBUF must be 0 (B in registers) or 2-8"),
            (
                d["SMEM"] <= SMEM_STATIC_LIMIT,
                f"the B ring, A's super-chunk and the sums need "
                f"{d['SMEM']} bytes of SMEM, more than {SMEM_STATIC_LIMIT}",
            ),
        ],
    )


SPACE = tun.valid_configs(
    check_config,
    (
        *(
            dict(MT=mt, BN=bn, THREADS=nt, KC=kc, SPLITK=s, MINB=0, NBUF=0)
            for mt in (1, 2, 4, 8, 16)
            for bn, nt in ((128, 128), (128, 256), (256, 256), (64, 256))
            for kc in (32, 64)
            for s in (4, 8, 16)
        ),
        # the cp.async ring: 2-8 copies of B per thread and chunk, 3-6 chunks, up to 4 blocks per SM
        *(
            dict(MT=mt, BN=bn, THREADS=nt, KC=nt // (bn // 4) * kstep, SPLITK=s, MINB=0, NBUF=nbuf)
            for mt in (1, 4, 8, 16)
            for bn, nt in ((128, 128), (64, 128), (128, 256), (256, 256))
            for kstep in (2, 4, 8)
            for nbuf in (3, 4, 6)
            for s in (8, 16, 32)
        ),
        # the GEMV form: 512 or 1024 threads, 2-8 loads of B per thread and chunk, one block per SM
        # asked of ptxas (without it the GPU's JIT gave some of them more than 128 registers);
        # MT = 8 with 512 threads only (64 registers cannot hold 32 accumulators and a B chunk)
        *(
            dict(MT=mt, BN=bn, THREADS=nt, KC=nt // (bn // 4) * kstep, SPLITK=s, MINB=1, NBUF=0)
            for mt in (1, 8)
            for bn, nt in ((32, 512), (64, 512), (128, 512), (64, 1024), (128, 1024))
            if mt * nt <= 4096
            for kstep in (2, 4, 8)
            for s in (1, 2, 4)
        ),
    ),
)


@functools.cache
def _make_kernel(items: tuple, vec: int, layout: str = "NN", epilogue=None, grouped: bool = False):
    # grouped: a persistent kernel over a grouped product's work list of MT x BN tiles
    # (``_tunable.unit_kernel``; launch.grouped), K whole (no split-K)
    cfg = dict(items)
    MT, BN, THREADS, KC, SPLITK, MINB, NBUF = (cfg[k] for k in KEYS)
    d = derived(cfg)
    CG, KG, KSTEP, RM = d["CG"], d["KG"], d["KSTEP"], d["RM"]
    A4 = MT % 4 == 0  # A's chunk read four rows at a time (SMEM rows 16-byte aligned)
    KS, BS_ROWS = d["KS"], d["BS_ROWS"]
    # B stored transposed (layout NT / TT: W = B^T, row-major (N, K), as in x @ W.T): a thread
    # takes 4 rows of W (its 4 columns of C) and 4 consecutive k at a time, the k-groups are
    # the fastest-varying thread index (a warp's loads of a W row are consecutive), and A is
    # staged as As[m, k] so that a lane's 4 k are one 128-bit read
    BT = layout[1] == "T"
    # 128-bit stores of C: not in the VECTOR_LOADS variant (vec == 2), whose loads are the vector
    # variant's (``_pass`` stores C from the summed SMEM rows, whatever order B was loaded in)
    CVEC = vec == 1
    if BT and not transposed_b_ok(cfg):
        raise ValueError(f"skinny config {cfg} cannot take B transposed: {TRANSPOSED_B_RULE}")
    TSTEP = KSTEP // 4  # (BT) steps of 4 k per chunk and thread, a 128-bit load of 4 W rows each
    WAIT_PENDING = max(NBUF - 2, 0)  # copy groups left in flight when a chunk must have landed
    A_ELEMS = (KS * MT + THREADS - 1) // THREADS  # A super-chunk elements per thread
    ACC, BREG = 4 * MT, 4 * KSTEP  # accumulators and B registers per thread
    # a thread's four columns: n + G * (0, 1, 2, 3); vector variant 4 consecutive (G = 1), and
    # with B transposed (its scalar loads run along K)
    G = 1 if vec or BT else math.gcd(CG, WARP_SIZE)
    # one row per block (a GEMV): the first B chunk of each super-chunk is loaded before A is
    # staged. With more rows the chunk's registers, live across the staging, cost occupancy or
    # spill (MT = 16: 126 -> 168 registers; 260 bytes of spills at MINB = 2).
    EARLY_B = MT == 1 and not NBUF and not BT
    # 2-8 rows (PIPE): each chunk in two halves of KSTEP / 2 rows, the next half's loads issued
    # (issue_fence) before this half's FMAs, so that a warp always has loads in flight. Left to
    # itself ptxas spreads a chunk's loads over its FMAs (MT = 8: 68 registers, one or two loads
    # in flight). One row: 4 FMAs a load, nothing to overlap. MT = 16: the fenced chunk took
    # 167 registers (one block per SM), 28 % slower at 16 x 4096^2 (docs/design.md).
    PIPE = not NBUF and not BT and 2 <= MT <= 8 and KSTEP % 2 == 0
    KH = KSTEP // 2

    @device_jit
    def _load(j, breg, Bg, kc, kg, n, k_end, N):
        # B[k, n + G*i] for this thread's j-th row of the chunk; zeros past k_end, columns
        # clamped
        k = kc + kg + j * KG
        if vec:
            b0, b1, b2, b3 = load_b4(Bg, k, n, k_end, N, True)
        else:
            b0, b1, b2, b3 = load_b_cols(Bg, k, n, G, k_end, N, True)
        breg[4 * j] = b0
        breg[4 * j + 1] = b1
        breg[4 * j + 2] = b2
        breg[4 * j + 3] = b3

    @device_jit
    def _fma_row(m, acc, a, b0, b1, b2, b3):
        # row m of the thread's accumulators += A[m, k] * B[k, n:n+4]
        acc[4 * m] += a * b0
        acc[4 * m + 1] += a * b1
        acc[4 * m + 2] += a * b2
        acc[4 * m + 3] += a * b3

    @device_jit
    def _fma_rows4(i, acc, As, kk, b0, b1, b2, b3):
        a0, a1, a2, a3 = load4(As, kk, 4 * i)  # A[4i .. 4i+3, k]: one 128-bit broadcast
        _fma_row(4 * i, acc, a0, b0, b1, b2, b3)
        _fma_row(4 * i + 1, acc, a1, b0, b1, b2, b3)
        _fma_row(4 * i + 2, acc, a2, b0, b1, b2, b3)
        _fma_row(4 * i + 3, acc, a3, b0, b1, b2, b3)

    @device_jit
    def _fma_row1(m, acc, As, kk, b0, b1, b2, b3):
        _fma_row(m, acc, As[kk, m], b0, b1, b2, b3)

    fma_rows = unroll(MT // 4, _fma_rows4) if A4 else unroll(MT, _fma_row1)

    @device_jit
    def _fma(j, acc, breg, As, kg, k0):
        fma_rows(
            acc,
            As,
            k0 + kg + j * KG,
            breg[4 * j],
            breg[4 * j + 1],
            breg[4 * j + 2],
            breg[4 * j + 3],
        )

    load_chunk = unroll(KSTEP, _load)
    fma_chunk = unroll(KSTEP, _fma)
    # a chunk's first / second half: rows j in [0, KH) / [KH, KSTEP), registers breg[4j:4j+4]
    load_half0, load_half1 = unroll(KH, _load), unroll(KSTEP, _load, KH)
    fma_half0, fma_half1 = unroll(KH, _fma), unroll(KSTEP, _fma, KH)

    @device_jit
    def _copy(j, ring, slot, Bg, kc, kg, n, c, k_end, N):
        # cp.async of this thread's j-th row of chunk kc, B[k, n + G*i], into ring row
        # slot * KC + (k - kc) at the tile's columns c + G*i: the same thread reads it back
        # (_fma_ring), so no barrier guards the ring. Zero-filled past k_end, columns clamped.
        kk = kg + j * KG
        ok = kc + kk < k_end
        k = min(kc + kk, k_end - 1)
        r = slot * KC + kk
        if vec:
            copy_async(ring, r, c, Bg, k, min(n, N - 4), 16, ok)
        else:
            copy_async(ring, r, c, Bg, k, min(n, N - 1), 4, ok)
            copy_async(ring, r, c + G, Bg, k, min(n + G, N - 1), 4, ok)
            copy_async(ring, r, c + 2 * G, Bg, k, min(n + 2 * G, N - 1), 4, ok)
            copy_async(ring, r, c + 3 * G, Bg, k, min(n + 3 * G, N - 1), 4, ok)

    @device_jit
    def _fma_ring(j, acc, ring, slot, As, kg, k0, c):
        # SMEM (A broadcast, this thread's B row of the ring) -> accumulators
        kk = kg + j * KG
        r = slot * KC + kk
        if vec:
            b0, b1, b2, b3 = load4(ring, r, c)
        else:
            b0, b1, b2, b3 = ring[r, c], ring[r, c + G], ring[r, c + 2 * G], ring[r, c + 3 * G]
        fma_rows(acc, As, k0 + kk, b0, b1, b2, b3)

    copy_chunk, fma_ring = unroll(KSTEP, _copy), unroll(KSTEP, _fma_ring)

    # (BT, scalar variant: rows of W not 16-byte aligned) a thread's 4 k of a step are KG apart,
    # k = kc + 4 j KG + kg + KG t, so that each of its four 4-byte loads reads, across the lanes
    # of a warp, consecutive floats of a row of W (4 consecutive k a lane: each load touched four
    # times the sectors it used); A's 4 k are then four 4-byte SMEM reads, consecutive across the
    # lanes. Vector variants: 4 consecutive k, one 128-bit load a row of W.
    SPREAD = BT and not vec

    @device_jit
    def _load_w(i, wreg, Wg, j, k, n, k_end, N):
        # (BT) W[n + i, k + s t] for t < 4 (s = KG with SPREAD, else 1) into wreg[16j + 4i ..]:
        # zeros past k_end, the row clamped (columns of C past N are never stored)
        b = 16 * j + 4 * i
        r = min(n + i, N - 1)
        if SPREAD:
            wreg[b], wreg[b + 1], wreg[b + 2], wreg[b + 3] = load_a_cols(Wg, r, k, KG, k_end)
        else:
            wreg[b], wreg[b + 1], wreg[b + 2], wreg[b + 3] = load_a4(Wg, r, k, k_end, vec)

    load_w = unroll(4, _load_w)

    @device_jit
    def _step_k(j, kg):
        # (BT) the first of this thread's 4 k in its j-th step of a chunk, from the chunk's start
        if SPREAD:
            return 4 * j * KG + kg
        return 4 * (kg + j * KG)

    @device_jit
    def _load_t(j, wreg, Wg, kc, kg, n, k_end, N):
        # (BT) this thread's j-th step of chunk kc, four rows of W
        load_w(wreg, Wg, j, kc + _step_k(j, kg), n, k_end, N)

    @device_jit
    def _dot_row(m, acc, wreg, As, j, kk):
        # (BT) C[m, n + i] += A[m, k] . W[n + i, k] over the step's 4 k (vector: As[m, kk:kk+4],
        # one 128-bit read, consecutive across the lanes of a warp; SPREAD: KG apart)
        if SPREAD:
            a0, a1, a2, a3 = As[m, kk], As[m, kk + KG], As[m, kk + 2 * KG], As[m, kk + 3 * KG]
        else:
            a0, a1, a2, a3 = load4(As, m, kk)
        for i in range(4):
            b = 16 * j + 4 * i
            acc[4 * m + i] += a0 * wreg[b]
            acc[4 * m + i] += a1 * wreg[b + 1]
            acc[4 * m + i] += a2 * wreg[b + 2]
            acc[4 * m + i] += a3 * wreg[b + 3]

    dot_rows = unroll(MT, _dot_row)

    @device_jit
    def _fma_t(j, acc, wreg, As, kg, k0):
        dot_rows(acc, wreg, As, j, k0 + _step_k(j, kg))

    load_chunk_t, fma_chunk_t = unroll(TSTEP, _load_t), unroll(TSTEP, _fma_t)
    b_view = cols_view if BT else rows_view  # B's 2-D storage: W (N, K) when transposed
    A_SHAPE = (MT, KS) if BT else (KS, MT)

    @device_jit
    def stage_a(As, Ag, m0, ks, k_end, M, tid):
        # As[k, m] = A[m0 + m, ks + k], zeros past M and k_end: 4-byte cp.async copies, all of a
        # thread's in flight at once. (Loaded through registers, each element's SMEM store waited
        # for its load before the next load issued: 8-16 round trips per super-chunk at MT = 8,
        # 3.8 us of a 35 us product.) The wait also lands the ring's B chunks issued so far.
        for e in range(A_ELEMS):
            i = tid + e * THREADS
            if i < KS * MT:
                m = i // KS
                k = i - m * KS
                ok = m0 + m < M and ks + k < k_end
                if BT:  # As[m, k]
                    copy_async(As, m, k, Ag, min(m0 + m, M - 1), min(ks + k, k_end - 1), 4, ok)
                else:  # As[k, m]
                    copy_async(As, k, m, Ag, min(m0 + m, M - 1), min(ks + k, k_end - 1), 4, ok)
        commit()
        wait(0)

    @device_jit
    def _put(r, acc, red, kg, c, p):
        # row p*RM + r of the thread's sums into its k-group's rows of red, at the tile's columns
        # c + G * (0, 1, 2, 3)
        m = p * RM + r
        row = kg * RM + r
        if vec:
            store4(red, row, c, acc[4 * m], acc[4 * m + 1], acc[4 * m + 2], acc[4 * m + 3])
        else:
            red[row, c] = acc[4 * m]
            red[row, c + G] = acc[4 * m + 1]
            red[row, c + 2 * G] = acc[4 * m + 2]
            red[row, c + 3 * G] = acc[4 * m + 3]

    put_rows = unroll(RM, _put)

    stores = stores_for(epilogue)

    def make_reduce_store(store_c4):
        @device_jit
        def _pass(p, acc, red, Cg, tid, kg, c, m0, n0, z0, M, N, alpha, beta, E):
            # C[z0 + m0 + p*RM + r, n0 + c] = alpha * sum over k-groups + beta * C (128-bit when
            # aligned); z0 > 0: this K slice's rows of the split-K workspace
            cuda.syncthreads()  # the previous pass has read red (the first: the last chunk is done)
            put_rows(acc, red, kg, c, p)
            cuda.syncthreads()  # every k-group's partial sums of rows p*RM .. are in red
            for o in range(tid, RM * CG, THREADS):  # four consecutive columns per thread and step
                r = o // CG
                col = 4 * (o - r * CG)
                s0, s1, s2, s3 = load4(red, r, col)
                for g in range(1, KG):
                    x0, x1, x2, x3 = load4(red, g * RM + r, col)
                    s0 += x0
                    s1 += x1
                    s2 += x2
                    s3 += x3
                row = z0 + m0 + p * RM + r
                store_c4(Cg, row, n0 + col, s0, s1, s2, s3, alpha, beta, z0 + M, N, CVEC, E)

        return unroll(MT // RM, _pass)

    reduce_store = make_reduce_store(stores.store_c4)  # into C
    reduce_parts = make_reduce_store(PLAIN_STORES.store_c4)  # into the workspace
    fixup = _splitk.make_fixup(MT, BN, THREADS, SPLITK, False, stores)

    if grouped:
        if SPLITK != 1:
            raise ValueError(f"a grouped skinny kernel takes K whole (SPLITK 1), not {cfg}")
        group_work = tun.make_work(MT, BN, KC, 1, grouped=True)

        @device_jit
        def where(u, M, N, K, L):
            # tile u of the work list: group bz, rows m0 .. M (its end), columns n0 ..
            bz, m0, n0, k_begin, k_end, _s, _f, _c, _k, m_end = group_work(u, M, N, K, L)
            return bz, m0, n0, k_begin, k_end, m_end

    else:

        @device_jit
        def where(u, M, N, K, L):
            # the grid's tile: x BN columns, y MT rows, z the batch (or the K slice)
            bz, k_begin, k_end = tun.block_work(K, KC, SPLITK)
            return bz, cuda.blockIdx.y * MT, cuda.blockIdx.x * BN, k_begin, k_end, M

    @device_jit
    def sgemm_skinny(u, A, B, C, W, L, alpha, beta, E):
        # A (batch, M, K), B (batch, K, N), C (batch, M, N): strided batches, grid z = batch
        # (or, with SPLITK > 1, the K slice: W, L are split-K's workspace and tile counters);
        # grouped, u is the tile of the work list and M its group's end row
        K, N = A.shape[2], B.shape[2]
        bz, m0, n0, k_begin, k_end, M = where(u, A.shape[1], N, K, L)
        tid = cuda.threadIdx.x
        # this thread's columns: n0 + c + G * (0, 1, 2, 3), and its rows of each chunk: kg,
        # kg + KG, ... (B transposed: k = 4 kg, 4 (kg + KG), ..., the k-groups varying fastest)
        cg = tid // KG if BT else tid % CG
        kg = tid % KG if BT else tid // CG
        c = 4 * G * (cg // G) + cg % G
        n = n0 + c
        Bg = b_view(B, bz)
        As = cuda.shared.array(A_SHAPE, float32, alignment=SMEM_ALIGN)
        # the ring of NBUF B chunks (NBUF > 0); at the end, the k-groups' partial sums
        red = cuda.shared.array((BS_ROWS, BN), float32, alignment=SMEM_ALIGN)
        acc = cuda.local.array(ACC, float32)
        breg = cuda.local.array(BREG, float32)
        for i in range(ACC):
            acc[i] = float32(0.0)
        cb, nb = 0, NBUF - 1  # ring slots of chunk kc and of chunk kc + (NBUF - 1) KC
        if NBUF:  # --- prologue: GMEM -> SMEM copies of chunks 0 .. NBUF-2, a group each
            for s in range(NBUF - 1):
                if k_begin + s * KC < k_end:
                    copy_chunk(red, s, Bg, k_begin + s * KC, kg, n, c, k_end, N)
                commit()  # (possibly empty: one group per chunk)

        for ks in range(k_begin, k_end, KS):
            if EARLY_B:  # --- GMEM -> registers: the first B chunk, in flight while A is staged
                load_chunk(breg, Bg, ks, kg, n, k_end, N)
            elif PIPE:  # the first half chunk
                load_half0(breg, Bg, ks, kg, n, min(ks + KS, k_end), N)
            cuda.syncthreads()  # everyone is done reading the previous super-chunk of A
            stage_a(As, A[bz], m0, ks, k_end, M, tid)  # --- GMEM -> SMEM: A's super-chunk
            cuda.syncthreads()  # the super-chunk of A is in SMEM
            first = ks
            if EARLY_B:  # --- SMEM (A, broadcast) x registers (B) -> accumulators
                fma_chunk(acc, breg, As, kg, 0)
                first = ks + KC
            if BT:
                for kc in range(ks, min(ks + KS, k_end), KC):
                    # --- GMEM -> registers: this thread's 4 rows of W, TSTEP x 4 k, in flight
                    load_chunk_t(breg, Bg, kc, kg, n, k_end, N)
                    if SPREAD:  # all of them issued before the FMAs (without: one or two)
                        issue_fence()
                    # --- SMEM (A, 128-bit along k) . registers (W) -> accumulators
                    fma_chunk_t(acc, breg, As, kg, kc - ks)
            elif NBUF:
                for kc in range(ks, min(ks + KS, k_end), KC):
                    wait(WAIT_PENDING)  # this thread's copies of chunk kc have landed
                    # --- GMEM -> SMEM: chunk kc + (NBUF - 1) KC into the slot chunk kc - KC
                    # used (this thread's reads of it came before the wait)
                    k_next = kc + (NBUF - 1) * KC
                    if k_next < k_end:
                        copy_chunk(red, nb, Bg, k_next, kg, n, c, k_end, N)
                    commit()
                    # --- SMEM (A broadcast, B from the ring) -> accumulators
                    fma_ring(acc, red, cb, As, kg, kc - ks, c)
                    cb = cb + 1 if cb + 1 < NBUF else 0
                    nb = nb + 1 if nb + 1 < NBUF else 0
            elif PIPE:
                k_lim = min(ks + KS, k_end)  # past it: zeros, no loads (this super-chunk's end)
                for kc in range(ks, k_lim, KC):
                    # --- GMEM -> registers: the chunk's second half, issued before ...
                    load_half1(breg, Bg, kc, kg, n, k_lim, N)
                    issue_fence()
                    # --- ... the first half's FMAs (SMEM A broadcast x registers B)
                    fma_half0(acc, breg, As, kg, kc - ks)
                    load_half0(breg, Bg, kc + KC, kg, n, k_lim, N)  # the next chunk's first
                    issue_fence()
                    fma_half1(acc, breg, As, kg, kc - ks)
            else:
                for kc in range(first, min(ks + KS, k_end), KC):
                    # --- GMEM -> registers: this thread's rows of the B chunk, all in flight
                    load_chunk(breg, Bg, kc, kg, n, k_end, N)
                    # --- SMEM (A, broadcast) x registers (B) -> accumulators
                    fma_chunk(acc, breg, As, kg, kc - ks)

        if NBUF:
            wait(0)  # no copy still lands in the ring: it holds the partial sums next
        # --- epilogue: sum the k-groups' partials through SMEM, RM rows at a time; write C, or
        # with SPLITK > 1 this slice's rows of the workspace, and the tile's last slice sums
        if SPLITK == 1:
            reduce_store(acc, red, rows_view(C, bz), tid, kg, c, m0, n0, 0, M, N, alpha, beta, E)
        else:
            Wg = rows_view(W, 0)
            reduce_parts(
                acc,
                red,
                Wg,
                tid,
                kg,
                c,
                m0,
                n0,
                cuda.blockIdx.z * M,
                M,
                N,
                float32(1.0),
                float32(0.0),
                (),
            )
            fixup(Wg, L, rows_view(C, 0), m0, n0, M, N, alpha, beta, CVEC, E)

    bounds = (THREADS, MINB) if MINB else None
    return tun.unit_kernel(
        "sgemm_skinny", sgemm_skinny, cfg, epilogue, grouped, tile=(MT, BN, KC), bounds=bounds
    )


def launch_config_for(cfg: Mapping[str, int]):
    def launch_config(M, N, K):
        return (*tile_grid(M, N, cfg["MT"], cfg["BN"]), cfg["SPLITK"]), (cfg["THREADS"],)

    return launch_config


def supports(M: int, N: int, K: int) -> bool:
    """Any ``N, K >= 1`` and ``1 <= M <= MAX_M``."""
    return 1 <= M <= MAX_M and N >= 1 and K >= 1


LAYOUTS = ("NN", "TN", "NT", "TT")  # A in either layout (read element-wise); B either
#: When a configuration can take B stored transposed (layouts NT, TT).
TRANSPOSED_B_RULE = (
    "B in registers (NBUF = 0) and KC / KG a multiple of 4 (steps of 4 k of a row of W per load)"
)


def transposed_b_ok(cfg: Mapping[str, int]) -> bool:
    """Whether configuration ``cfg`` runs with B stored transposed (:data:`TRANSPOSED_B_RULE`)."""
    return cfg["NBUF"] == 0 and derived(cfg)["KSTEP"] % 4 == 0


def layouts_of(cfg: Mapping[str, int]) -> tuple[str, ...]:
    """The layouts configuration ``cfg`` serves: B row-major always, transposed when
    :func:`transposed_b_ok`."""
    return LAYOUTS if transposed_b_ok(cfg) else LAYOUTS[:2]


def a_copied(layout: str) -> str:
    """A, in every layout: its elements go to SMEM as 4-byte ``cp.async`` copies, so its rows
    need no alignment (``Stage.element_copied``)."""
    return "A"


def make_stage(config: Mapping[str, int]) -> Stage:
    """The skinny stage for one configuration (validated by :func:`check_config`)."""
    return tun.build_stage(
        "skinny",
        "15: skinny M (split-K, B read once)",
        config,
        _make_kernel,
        make_stage,
        SPACE,
        check_config,
        block_of=lambda cfg: (cfg["MT"], cfg["BN"], cfg["KC"]),
        threads_of=lambda cfg: cfg["THREADS"],
        cost="stream",
        launch_config_for=launch_config_for,
        supports=supports,
        limits=f"1 <= M <= {MAX_M} and any N, K >= 1 (more rows: a tiled stage)",
        layouts=layouts_of(config),
        general=False,
        element_copied=a_copied,
    )


STAGE = make_stage(DEFAULT_CONFIG)
