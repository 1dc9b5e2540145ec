"""Configuration machinery of the tunable stages (warptiling, double_buffering, multistage).

A configuration is a plain dict of ints:

- tile sizes ``BM, BN, BK`` (block), ``WM, WN`` (warp), ``WNITER`` (warp sub-tiles along N;
  ``WMITER`` is derived), ``TM, TN`` (thread);
- ``MINB``: minimum resident blocks per SM asked of ptxas through ``launch_bounds`` (0: none); it
  caps registers at 65536 / (MINB * NUM_THREADS);
- ``SPLITK``: number of K slices (1: none). With SPLITK > 1 each block computes a partial product
  over its slice of K into a workspace, and the last slice of each C tile to finish sums them
  into C (``_splitk.py``, one kernel): more blocks for shapes whose M x N has too few tiles to
  fill the GPU. ``SPLITK = STREAM_K`` (0): stream-K (``_streamk.py``), a grid of one block per
  resident slot sharing the product's MAC iterations evenly across tile boundaries;
- stage-specific keys (``NBUF``: SMEM buffers of the multistage pipeline).

``check_config`` raises ``ValueError`` naming the first violated constraint; the tuner relies on it
to skip invalid points, and ``Stage.with_config`` to reject them.

Layouts. The tunable kernels take A, B and C as batches of strided matrices (3-D arrays, shape
``(batch, rows, cols)``; a batch stride of 0 broadcasts) and serve four operand layouts, named as
in BLAS by whether A and B are stored transposed: ``"NN"`` (A row-major ``(M, K)``, B row-major
``(K, N)``), ``"NT"`` (B stored as a row-major ``(N, K)``: a column-major B), ``"TN"``, ``"TT"``.
C is row-major. Each operand's storage is either *K-contiguous* (A in N, B in T: its GMEM tile is
transposed on the way to SMEM) or *M/N-contiguous* (A in T, B in N: copied as is); SMEM always
holds ``As[k, m]`` and ``Bs[k, n]``, so the FMA core is the same for every layout. A
configuration serves a layout when each operand's float4s split evenly over the threads in that
orientation (:func:`layout_problem`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from ..backend import cuda, float32
from ..device import SMEM_STATIC_LIMIT, WARP_SIZE, cdiv, tile_grid
from ..ptx.vecmem import rows_view
from . import _splitk, _streamk
from ._common import PLAIN_STORES, device_jit, kernel_jit
from ._epilogue import stores_for
from .stage import Stage

A_PAD = 4  # floats of padding per row of the transposed A tile (keeps rows 16-byte aligned)
MAX_ACCUMULATORS = 128  # per thread: more cannot stay in 255 registers with the fragments

#: ``SPLITK`` of a stream-K configuration (``_streamk``).
STREAM_K = 0

TILE_KEYS = ("BM", "BN", "BK", "WM", "WN", "WNITER", "TM", "TN")
COMMON_KEYS = ("MINB", "SPLITK")


LAYOUTS = ("NN", "NT", "TN", "TT")


def derived(cfg: Mapping[str, int], layout: str = "NN") -> dict:
    """Derived constants: NUM_THREADS, WMITER, WSUBM, WSUBN, per-thread float4 loads, SMEM pitches
    and bytes. A transposed B tile (``layout[1] == "T"``) gets the same padding as A's."""
    BM, BN, BK, WM, WN, WNITER, TM, TN = (cfg[k] for k in TILE_KEYS)
    num_threads = (BM // WM) * (BN // WN) * WARP_SIZE
    wmiter = (WM * WN) // (WARP_SIZE * TM * TN * WNITER)
    bs_pitch = BN + (A_PAD if layout[1] == "T" else 0)
    return dict(
        NUM_THREADS=num_threads,
        WMITER=wmiter,
        WSUBM=WM // max(wmiter, 1),
        WSUBN=WN // WNITER,
        A_LOADS=(BM * BK // 4) // num_threads,  # float4s of the A tile per thread
        B_LOADS=(BK * BN // 4) // num_threads,
        AS_PITCH=BM + A_PAD,
        BS_PITCH=bs_pitch,
        TILE_SMEM_BYTES=4 * BK * (BM + A_PAD + bs_pitch),  # one copy of the A and B tiles
    )


def mover_fits(extent: int, BK: int, threads: int, k_contiguous: bool) -> bool:
    """Whether a ``BK x extent`` GMEM tile's float4s split evenly over ``threads``, read along K
    (``k_contiguous``: storage rows are M or N, each thread reading float4s of one row) or along
    M/N (storage rows are K)."""
    run = BK if k_contiguous else extent  # floats along the storage row
    across = extent if k_contiguous else BK  # storage rows in the tile
    return (
        (extent * BK // 4) % threads == 0
        and threads % (run // 4) == 0
        and across % (threads // (run // 4)) == 0
    )


def layout_problem(cfg: Mapping[str, int], layout: str) -> str | None:
    """Why configuration ``cfg`` cannot serve ``layout`` (None: it can)."""
    if layout not in LAYOUTS:
        return f"layout must be one of {LAYOUTS}, got {layout!r}"
    nt = derived(cfg)["NUM_THREADS"]
    if not mover_fits(cfg["BM"], cfg["BK"], nt, layout[0] == "N"):
        return f"the A tile's float4s do not split evenly over {nt} threads in layout {layout}"
    if not mover_fits(cfg["BN"], cfg["BK"], nt, layout[1] == "T"):
        return f"the B tile's float4s do not split evenly over {nt} threads in layout {layout}"
    return None


def check_keys(cfg: Mapping[str, int], keys: tuple[str, ...]) -> None:
    """Raise ``ValueError`` unless ``cfg`` has exactly ``keys``, each an int."""
    missing, unknown = set(keys) - set(cfg), set(cfg) - set(keys)
    if missing or unknown:
        raise ValueError(
            f"config keys must be {keys}; missing {sorted(missing)}, unknown {sorted(unknown)}"
        )
    if not all(isinstance(cfg[k], int) and not isinstance(cfg[k], bool) for k in keys):
        raise ValueError(f"config values must be ints, got {dict(cfg)}")


def check_rules(cfg: Mapping[str, int], rules: list[tuple[bool, str]]) -> None:
    """Raise ``ValueError`` naming the first ``(holds, message)`` rule that does not hold."""
    for ok, msg in rules:
        if not ok:
            raise ValueError(f"invalid config {dict(cfg)}: {msg}")


def valid_configs(check: Callable[[Mapping[str, int]], None], configs) -> tuple[dict, ...]:
    """The configurations of the iterable ``configs`` that ``check`` accepts, in order."""
    out = []
    for cfg in configs:
        try:
            check(cfg)
        except ValueError:
            continue
        out.append(cfg)
    return tuple(out)


def check_config(
    cfg: Mapping[str, int],
    *,
    extra_keys: tuple[str, ...] = (),
    smem_copies: int = 1,
    smem_limit: int = SMEM_STATIC_LIMIT,
) -> None:
    """Raise ``ValueError`` naming the first constraint ``cfg`` violates.

    Args:
        extra_keys: stage-specific keys expected besides the tile and common keys.
        smem_copies: copies of the A and B tiles the kernel keeps in SMEM.
        smem_limit: SMEM bytes per block available to the kernel.
    """
    check_keys(cfg, TILE_KEYS + COMMON_KEYS + tuple(extra_keys))
    if not all(cfg[k] > 0 for k in TILE_KEYS):
        raise ValueError(f"tile sizes must be positive, got {dict(cfg)}")
    BM, BN, BK, WM, WN, WNITER, TM, TN = (cfg[k] for k in TILE_KEYS)
    if BM % WM or BN % WN:
        raise ValueError(
            f"invalid config {dict(cfg)}: warp tiles must divide the block tile (BM % WM, BN % WN)"
        )
    d = derived(cfg)
    nt = d["NUM_THREADS"]
    smem = smem_copies * d["TILE_SMEM_BYTES"]
    rules = [
        (BM % WM == 0 and BN % WN == 0, "warp tiles must divide the block tile (BM % WM, BN % WN)"),
        (WARP_SIZE <= nt <= 1024, f"NUM_THREADS = (BM/WM)*(BN/WN)*32 = {nt} not in [32, 1024]"),
        (TM % 4 == 0 and TN % 4 == 0 and BK % 4 == 0, "TM, TN and BK must be multiples of 4"),
        (WN % WNITER == 0, "WNITER must divide WN"),
        (
            (WM * WN) % (WARP_SIZE * TM * TN * WNITER) == 0 and d["WMITER"] >= 1,
            "WM*WN must be a multiple of 32*TM*TN*WNITER (WMITER = WM*WN/(32*TM*TN*WNITER))",
        ),
        (WM % max(d["WMITER"], 1) == 0, "WMITER must divide WM"),
        (d["WSUBM"] % TM == 0 and d["WSUBN"] % TN == 0, "TM, TN must divide the warp sub-tile"),
        (
            (d["WSUBM"] // TM) * (d["WSUBN"] // TN) == WARP_SIZE,
            "a warp sub-tile must hold exactly 32 thread tiles",
        ),
        (mover_fits(BM, BK, nt, True), "the A tile's float4s must split evenly over the threads"),
        (mover_fits(BN, BK, nt, False), "the B tile's float4s must split evenly over the threads"),
        (smem <= smem_limit, f"SMEM {smem} B per block exceeds {smem_limit} B"),
        (
            d["WMITER"] * TM * WNITER * TN <= MAX_ACCUMULATORS,
            f"more than {MAX_ACCUMULATORS} accumulators per thread",
        ),
        (
            0 <= cfg["MINB"] <= 4 and cfg["MINB"] * nt <= 2048,
            "MINB (min. blocks per SM) must be 0-4 and MINB * NUM_THREADS <= 2048",
        ),
        (0 <= cfg["SPLITK"] <= 64, "SPLITK must be 1-64 K slices, or 0 (STREAM_K: stream-K)"),
    ]
    for ok, msg in rules:
        if not ok:
            raise ValueError(f"invalid config {dict(cfg)}: {msg}")


#: The grid of tile shapes the tuner sweeps (then filtered by the constraints and by
#: ``THREADS``/``ACCUMULATORS``): block tiles, warp tiles, (TM, TN, WNITER).
_BLOCKS = ((128, 128), (128, 64), (64, 128), (256, 128), (128, 256))
_WARPS = ((64, 32), (32, 64), (64, 64), (32, 32))
_THREADS = ((4, 4, 1), (4, 4, 2), (4, 4, 4), (8, 4, 1), (8, 4, 2), (4, 8, 1), (4, 8, 2))
#: Block sizes and per-thread accumulator counts worth timing: fewer threads or accumulators
#: leave the SM short of warps or of FMA reuse (docs/design.md).
THREADS = (128, 256)
ACCUMULATORS = (32, 64, 128)


def make_space(
    check: Callable[[Mapping[str, int]], None],
    extra: Mapping[str, tuple[int, ...]] | None = None,
    bks: tuple[int, ...] = (8, 16),
) -> tuple[dict, ...]:
    """Every valid tile configuration of a grid of tile shapes, for the tuner's first phase.

    ``extra`` gives the values to try for stage-specific keys; MINB = 0 and SPLITK = 1 here (the
    tuner refines them for the best tiles); ``check`` filters.
    """
    extra = dict(extra or {})
    out = []
    for (BM, BN), BK, (WM, WN), (TM, TN, WNITER) in itertools.product(
        _BLOCKS, bks, _WARPS, _THREADS
    ):
        base = dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, WNITER=WNITER, TM=TM, TN=TN)
        for rest in itertools.product(*extra.values()):
            cfg = dict(base, MINB=0, SPLITK=1, **dict(zip(extra, rest, strict=True)))
            try:
                check(cfg)
            except ValueError:
                continue
            d = derived(cfg)
            acc = d["WMITER"] * TM * WNITER * TN
            if d["NUM_THREADS"] in THREADS and acc in ACCUMULATORS:
                out.append(cfg)
    return tuple(out)


def launch_bounds(cfg: Mapping[str, int]):
    """``launch_bounds`` for ``cuda.jit``: ``(NUM_THREADS, MINB)``, or None when MINB is 0."""
    return (derived(cfg)["NUM_THREADS"], cfg["MINB"]) if cfg["MINB"] else None


@device_jit
def block_work(K, BK, SPLITK):
    """``(batch, k_begin, k_end)`` of this block: grid z is the batch index, or with SPLITK > 1
    (one matrix: the plan never splits K of a batch) the K slice.

    Slices are whole BK tiles; trailing slices may be empty (their blocks then write zeros).
    """
    if SPLITK == 1:
        return cuda.blockIdx.z, 0, K
    per = ((K + SPLITK - 1) // SPLITK + BK - 1) // BK * BK
    k_begin = cuda.blockIdx.z * per
    return 0, k_begin, min(K, k_begin + per)


def make_work(BM: int, BN: int, BK: int, SPLITK: int, grouped: bool = False):
    """``work(u, M, N, K, L)``: a block's ``u``-th unit of work as the *job* tuple ``(bz, row0,
    col0, k_begin, k_end, slot, first, count, counter, m_end)``: matrix ``bz`` of the batch, the
    C tile at ``(row0, col0)``, its K range; the next four say how the epilogue ends it
    (:func:`make_epilogue`); ``m_end`` bounds the tile's rows (M). Without stream-K a block has
    one unit, the grid's tile (x: BN columns, y: BM rows, z: batch or K slice); with it,
    ``_streamk.unit``. ``grouped`` (:func:`grouped_tiles`): unit ``u`` is tile ``u`` of the work
    list of a grouped product, whose group ``g`` (matrix ``g`` of B, rows ``L[g-1] .. L[g]`` of
    A and C) is ``bz``, ``m_end`` its last row + 1."""
    if grouped:

        @device_jit
        def grouped_work(u, M, N, K, L):
            tn = (N + BN - 1) // BN
            start = 0
            base = 0
            for g in range(L.shape[0]):
                end = min(max(int(L[g]), start), M)  # clamped: [start, M]
                tiles = ((end - start + BM - 1) // BM) * tn
                if u < base + tiles:
                    t = u - base
                    return (g, start + (t // tn) * BM, (t % tn) * BN, 0, K, 0, 0, 1, 0, end)
                base += tiles
                start = end
            return (0, M, 0, 0, 0, 0, 0, 1, 0, M)  # (past the list: nothing to do)

        return grouped_work

    if SPLITK == STREAM_K:

        @device_jit
        def stream_k_work(u, M, N, K, L):
            tn = (N + BN - 1) // BN
            t, ib, ie, slot, first, count, counter = _streamk.unit_dev(
                cuda.blockIdx.x, u, ((M + BM - 1) // BM) * tn, (K + BK - 1) // BK, cuda.gridDim.x
            )
            return (
                0,
                (t // tn) * BM,
                (t % tn) * BN,
                ib * BK,
                min(K, ie * BK),
                slot,
                first,
                count,
                counter,
                M,
            )

        return stream_k_work

    @device_jit
    def grid_work(u, M, N, K, L):
        bz, k_begin, k_end = block_work(K, BK, SPLITK)
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        return (bz, row0, col0, k_begin, k_end, 0, 0, SPLITK, 0, M)

    return grid_work


@device_jit
def grouped_tiles(M, N, BM, BN, L):
    """Tiles of the work list of a grouped product (:func:`make_work`): over groups ``g``, the
    ``BM x BN`` tiles of rows ``L[g-1] .. L[g]`` (``L`` clamped non-decreasing into ``[0,
    M]``) and N columns."""
    tn = (N + BN - 1) // BN
    start = 0
    total = 0
    for g in range(L.shape[0]):
        end = min(max(int(L[g]), start), M)
        total += ((end - start + BM - 1) // BM) * tn
        start = end
    return total


def unit_kernel(
    name: str,
    unit: Callable,
    cfg: Mapping[str, int],
    epilogue=None,
    grouped: bool = False,
    tile: tuple[int, int, int] | None = None,
    bounds: tuple[int, int] | None = None,
):
    """The kernel ``name(A, B, C, W, L, alpha, beta)`` of a tunable stage from its body ``unit(u,
    A, B, C, W, L, alpha, beta, E)`` (one unit of work, :func:`make_work`): the body once, or with
    stream-K once per unit of the block (``_streamk.units``). (One body called in a loop only
    where stream-K needs it: NVVM kept a one-trip loop around the body, which cost registers.)
    With a fused ``epilogue`` (``kernels._epilogue``) the kernel takes its operands, the tuple
    ``E``, before ``alpha``: ``name(A, B, C, W, L, E, alpha, beta)``; without, ``E`` is ``()``.
    ``grouped``: a persistent kernel over a grouped product's work list (:func:`make_work`; L
    holds the groups' row ends, the body's ``u`` is a tile of the list). ``tile``: the block of a
    stage whose configuration names it otherwise (stage 15's ``(MT, BN, KC)``), with its
    ``launch_bounds`` ``bounds``; default ``cfg``'s ``(BM, BN, BK)`` and :func:`launch_bounds`."""
    BM, BN, BK = tile if tile is not None else (cfg["BM"], cfg["BN"], cfg["BK"])
    if tile is None:
        bounds = launch_bounds(cfg)
    if grouped:

        def units(A, B, C, W, L, alpha, beta, E):
            M, N = A.shape[1], B.shape[2]
            for u in range(cuda.blockIdx.x, grouped_tiles(M, N, BM, BN, L), cuda.gridDim.x):
                unit(u, A, B, C, W, L, alpha, beta, E)
                cuda.syncthreads()  # everyone is done with SMEM before the next unit fills it

        body = device_jit(units)
    elif cfg["SPLITK"] == STREAM_K:

        def units(A, B, C, W, L, alpha, beta, E):
            M, K, N = A.shape[1], A.shape[2], B.shape[2]
            tiles = ((M + BM - 1) // BM) * ((N + BN - 1) // BN)
            for u in range(
                _streamk.units_dev(cuda.blockIdx.x, tiles, (K + BK - 1) // BK, cuda.gridDim.x)
            ):
                unit(u, A, B, C, W, L, alpha, beta, E)
                cuda.syncthreads()  # everyone is done with SMEM before the next unit fills it

        body = device_jit(units)
    else:

        @device_jit
        def body(A, B, C, W, L, alpha, beta, E):
            unit(0, A, B, C, W, L, alpha, beta, E)

    kernel = entry_kernel(name, body, epilogue, launch_bounds=bounds)
    kernel.py_func.body = getattr(unit, "py_func", unit)  # the unit, not the loop around it
    return kernel


def entry_kernel(name: str, body: Callable, epilogue: Any = None, **options: Any):
    """The kernel ``name(A, B, C, W, L, alpha, beta)`` (:data:`SPLIT_ARGS`) that runs the device
    function ``body(A, B, C, W, L, alpha, beta, E)`` with ``E = ()``; with a fused
    ``epilogue`` (``kernels._epilogue``), ``name(A, B, C, W, L, E, alpha, beta)``, ``E`` its
    operands. ``options``: ``kernel_jit``'s."""
    if epilogue is None:

        def kernel(A, B, C, W, L, alpha, beta):
            body(A, B, C, W, L, alpha, beta, ())
    else:

        def kernel(A, B, C, W, L, E, alpha, beta):
            body(A, B, C, W, L, alpha, beta, E)

    kernel.__name__ = kernel.__qualname__ = name
    kernel.body = getattr(body, "py_func", body)  # what the notebooks show as the kernel's source
    return kernel_jit(**options)(kernel)


#: The tunable stages' kernel arguments: A, B, C (strided batches), W (split-K's or stream-K's
#: workspace, 3-D ``(1, rows, cols)``), L (its int32 tile counters), alpha, beta. W and L are not
#: touched when SPLITK == 1 (the plan passes C and a small counter buffer there).
SPLIT_ARGS = "SSSSIff"


def make_epilogue(
    store_with: Callable, BM: int, BN: int, NT: int, SPLITK: int, epilogue: Any = None
):
    """``epilogue(C, W, L, job, acc, r0, c0, M, N, alpha, beta, vec, E)``: write the results of
    one unit of work (``job``, from :func:`make_work`'s ``work``). ``store_with(stores)`` builds
    the stage's own writer of one thread's results, ``store_results(Cg, acc, r0, c0, alpha, beta,
    M, N, vec, E)`` at C row ``r0``, column ``c0``, from C-writing helpers
    (``_common.make_stores``): the fused ``epilogue``'s (``kernels._epilogue``) where it writes
    C, plain ones where it writes partial sums. Without split-K it writes C of matrix ``bz``;
    with it, the block's partial sums go unscaled to rows ``z*M + [0, M)`` of the workspace and
    :func:`_splitk.make_fixup` ends the tile; with stream-K a unit that computed a whole tile
    writes C, others write their tile to their slot of the workspace (rows ``slot*BM + [0,
    BM)``, BN columns) and :func:`_streamk.make_fixup` ends the tile."""
    stores = stores_for(epilogue)
    store_parts = store_with(PLAIN_STORES)
    store_results = store_parts if epilogue is None else store_with(stores)
    if SPLITK == STREAM_K:
        sk_fixup = _streamk.make_fixup(BM, BN, NT, stores)

        @device_jit
        def sk_epilogue(C, W, L, job, acc, r0, c0, M, N, alpha, beta, vec, E):
            row0, col0, count = job[1], job[2], job[7]
            if count == 1:
                store_results(rows_view(C, 0), acc, r0, c0, alpha, beta, M, N, vec, E)
            else:
                Wg = rows_view(W, 0)
                s0 = job[5] * BM  # this unit's slot: workspace rows s0 + [0, BM)
                store_parts(
                    Wg,
                    acc,
                    s0 + r0 - row0,
                    c0 - col0,
                    float32(1.0),
                    float32(0.0),
                    s0 + BM,
                    BN,
                    vec,
                    (),
                )
                sk_fixup(
                    Wg,
                    L,
                    rows_view(C, 0),
                    job[6],
                    count,
                    job[8],
                    row0,
                    col0,
                    M,
                    N,
                    alpha,
                    beta,
                    vec,
                    E,
                )

        return sk_epilogue

    fixup = _splitk.make_fixup(BM, BN, NT, SPLITK, True, stores)

    @device_jit
    def epilogue_store(C, W, L, job, acc, r0, c0, M, N, alpha, beta, vec, E):
        if SPLITK == 1:
            store_results(rows_view(C, job[0]), acc, r0, c0, alpha, beta, M, N, vec, E)
        else:
            Wg = rows_view(W, 0)
            z0 = cuda.blockIdx.z * M  # this slice's rows of the workspace
            store_parts(Wg, acc, z0 + r0, c0, float32(1.0), float32(0.0), z0 + M, N, vec, ())
            fixup(Wg, L, rows_view(C, 0), job[1], job[2], M, N, alpha, beta, vec, E)

    return epilogue_store


def build_stage(
    name: str,
    label: str,
    cfg: Mapping[str, int],
    make_kernel: Callable[[tuple, bool, str], object],
    factory: Callable[[Mapping[str, int]], Stage],
    space: tuple[dict, ...],
    check: Callable[[Mapping[str, int]], None],
    smem: Callable[[Mapping[str, int], str], int] | None = None,
    min_cc: tuple[int, int] = (0, 0),
    *,
    block_of: Callable[[Mapping[str, int]], tuple[int, int, int]] | None = None,
    threads_of: Callable[[Mapping[str, int]], int] | None = None,
    cost: str = "waves",
    launch_config_for: Callable[[Mapping[str, int]], Callable] | None = None,
    supports: Callable[[int, int, int], bool] | None = None,
    limits: str | None = None,
    layouts: tuple[str, ...] | None = None,
    general: bool = True,
    epilogue: bool = True,
    element_copied: Callable[[str], str] | None = None,
) -> Stage:
    """A ``Stage`` for one configuration of a tunable stage (validated by ``check`` first).

    ``make_kernel(items, vec, layout)`` builds the kernel from the sorted config items (``vec``:
    True vector, False scalar, ``registry.VECTOR_LOADS`` the stage's third variant);
    ``smem(cfg, layout)`` is its dynamic SMEM (None: static SMEM only). By default the block tile
    is ``(BM, BN)``, the launch grid ``(N/BN, M/BM, SPLITK)`` blocks of NUM_THREADS
    (``(N/BN, M/BM, batch)`` for a batch; with stream-K ``(G, 1, 1)``, one block per resident
    slot: ``launch_config(M, N, K, slots)``), the layouts those whose tiles the threads split evenly
    (:func:`layout_problem`); a stage built for one regime of shapes (skinny, skinny_n) gives its
    own ``block_of(cfg)``, ``threads_of(cfg)``, ``cost`` model (the stage contract,
    ``Stage.block``), ``launch_config_for(cfg)``, ``supports`` and ``layouts``, and
    ``general=False`` (chosen by the plan only at its tuned price). The kernel takes
    :data:`SPLIT_ARGS`; the tiled stages' split-K sum is the wide one (``make_epilogue``).
    ``epilogue``: ``make_kernel(items, vec, layout, epilogue)`` builds fused epilogues
    (``Stage.epilogue``; :func:`entry_kernel`). ``element_copied``: ``Stage.element_copied``.
    """
    cfg = dict(cfg)
    check(cfg)
    items = tuple(sorted(cfg.items()))
    if launch_config_for is None:
        nt, splits = derived(cfg)["NUM_THREADS"], cfg["SPLITK"]
        if splits == STREAM_K:

            def launch_config(M, N, K, slots=1):
                tiles = cdiv(M, cfg["BM"]) * cdiv(N, cfg["BN"])
                return (_streamk.blocks(tiles, cdiv(K, cfg["BK"]), slots), 1, 1), (nt,)
        else:

            def launch_config(M, N, K, slots=1):
                return (*tile_grid(M, N, cfg["BM"], cfg["BN"]), splits), (nt,)
    else:
        launch_config = launch_config_for(cfg)
    if layouts is None:
        layouts = tuple(lay for lay in LAYOUTS if layout_problem(cfg, lay) is None)
    return Stage(
        name=name,
        label=label,
        kernel=make_kernel(items, True, "NN"),
        scalar_kernel=make_kernel(items, False, "NN"),
        args=SPLIT_ARGS,
        layouts=layouts,
        layout_kernel=functools.partial(make_kernel, items),
        layout_smem={lay: smem(cfg, lay) for lay in layouts} if smem else {},
        launch_config=launch_config,
        **({} if supports is None else {"supports": supports, "limits": limits}),
        config=cfg,
        factory=factory,
        space=space,
        check_config=check,
        dynamic_smem=smem(cfg, "NN") if smem else 0,
        split_k=cfg["SPLITK"],
        min_cc=min_cc,
        tile=(cfg["BM"], cfg["BN"]) if block_of is None else block_of(cfg)[:2],
        general=general,
        vector_loads=True,
        block_of=block_of,
        threads_of=threads_of,
        cost=cost,
        wide_fixup=block_of is None,
        epilogue=epilogue,
        element_copied=element_copied,
    )
