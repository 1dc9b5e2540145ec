"""Grouped products (mixture-of-experts layers) in one launch: ``C[rows of g] = A[rows of g] @
B[g]`` for every group ``g`` at once.

The groups' rows are given on the device (``offsets``: each group's end row, as
``torch._grouped_mm`` takes them), so the host never reads them: the kernel is persistent
(``kernels._tunable.unit_kernel(..., grouped=True)``) and each block walks a *work list* of every
group's ``BM x BN`` C tiles, ``gridDim.x`` apart, finding a tile's group by scanning the offsets
(``kernels._tunable.make_work``). Empty groups have no tiles. The tiles are stage 10's
(``multistage``) or stage 9's (``double_buffering``): A and C are passed as batches of stride 0
(every group sees the whole A and C; its tiles start at its first row and stop at its end row), B
as the batch of the groups' matrices.

The configuration (``dispatch.grouped_runner``, :func:`few_rows_choice`): for a mean group (``T /
E`` rows) of a handful of rows, stage 15's skinny tiles (:data:`SKINNY_RULE`: the same persistent
walk over ``MT x BN`` tiles, a group of more than MT rows taking several); with B row-major under
:data:`FEW_ROWS` rows, :data:`FEW_ROWS_CONFIG`'s 32-row tiles; else the planner's tiles for the
mean group, without split-K (``dispatch.planned_grouped_stage``: with B transposed the cheaper of
multistage's and stage 9's, whose register-staged copy reads that B 16 bytes at a time along K).
The grid is one wave of resident blocks (at least two), at most the list's largest possible
length.
"""

from __future__ import annotations

from typing import Any

from ..arrays import F32, Operand
from ..device import cdiv
from ..kernels import k09_double_buffering as k09
from ..kernels import k10_multistage as k10
from ..kernels import k15_skinny as k15
from ..kernels._tunable import SPLIT_ARGS
from .launcher import load_kernel

#: Groups of a few rows: 32-row tiles (multistage's smallest), 256 columns, 128 threads. The
#: planner's tiles for one product of the mean group's rows (64 to 256 rows) multiply-add rows
#: that are not there, and with E groups there are tiles enough for the GPU at any BM. The best
#: of ``tools.grouped --sweep``'s ten configurations on shapes apart from the bench's
#: (docs/design.md §3.2): geometric mean 0.75x the planner's kernel time over the 30 problems of
#: fewer than 256 rows a group (0.51-1.09x), 1.005x over the 6 of 384.
FEW_ROWS_CONFIG = {
    "BM": 32,
    "BN": 256,
    "BK": 16,
    "WM": 32,
    "WN": 64,
    "WNITER": 2,
    "TM": 8,
    "TN": 4,
    "MINB": 0,
    "SPLITK": 1,
    "NBUF": 3,
}
#: mean rows per group below which :data:`FEW_ROWS_CONFIG` serves
FEW_ROWS = 256


def _skinny(mt: int) -> dict:
    return {"MT": mt, "BN": 128, "THREADS": 256, "KC": 64, "SPLITK": 1, "MINB": 0, "NBUF": 0}


#: Groups of a handful of rows: stage 15's skinny tiles (MT rows by 128 columns, B streamed once
#: a tile from registers, either layout), ``(most mean rows, layouts, configuration)`` in order.
#: From ``tools.grouped --sweep`` (docs/design.md §3.2; thresholds halfway, geometrically,
#: between the swept means 1, 4, 16 and 48): 4 rows at a mean of 1 token a group (kernel time
#: 0.48x the 32-row tiles' NN, 0.35x NT), 8 rows at 4 (0.56x, 0.49x); at 16, 16 rows for B
#: transposed only (0.77x NT; NN 0.93x but up to 1.18x, so the 32-row tiles keep NN).
SKINNY_RULE = (
    (2, ("NN", "NT"), _skinny(4)),
    (8, ("NN", "NT"), _skinny(8)),
    (28, ("NT",), _skinny(16)),
)


def _items(cfg: dict) -> tuple:
    return tuple(sorted(cfg.items()))


# the choices as (stage name, sorted configuration items): hashable, built once (a call's key)
_SKINNY = tuple((most, layouts, ("skinny", _items(cfg))) for most, layouts, cfg in SKINNY_RULE)
_FEW = ("multistage", _items(FEW_ROWS_CONFIG))


def few_rows_choice(rows: int, layout: str) -> tuple[str, tuple] | None:
    """``(stage name, configuration as sorted items)`` of a grouped product whose mean group has
    ``rows`` rows, in ``layout`` (``"NN"`` or ``"NT"``): :data:`SKINNY_RULE`'s skinny tiles,
    else with B row-major :data:`FEW_ROWS_CONFIG` under :data:`FEW_ROWS` rows; None from there
    on, and with B transposed past the skinny tiles (the planner's tiles for the mean group,
    ``dispatch.planned_grouped_stage``)."""
    for most, layouts, choice in _SKINNY:
        if rows <= most and layout in layouts:
            return choice
    if rows < FEW_ROWS and layout == "NN":
        return _FEW
    return None


#: The stages that build a grouped kernel: their kernel factories (``grouped=True``).
GROUPED_KERNELS = {
    "double_buffering": k09._make_kernel,
    "multistage": k10._make_kernel,
    "skinny": k15._make_kernel,
}


class GroupedRunner:
    """The kernel of one grouped configuration on one GPU: the tiles of ``stage`` (multistage,
    or skinny for groups of a few rows) for layout ``layout`` (``"NN"``: B ``(E, K, N)``
    row-major; ``"NT"``: stored ``(E, N, K)``), variant ``vec`` (128-bit accesses: rows 16-byte
    aligned)."""

    def __init__(self, stage: Any, layout: str, vec: bool, device: Any) -> None:
        self.stage, self.layout, self.vec, self.device = stage, layout, vec, device
        items = tuple(sorted(stage.config.items()))
        self._kernel = load_kernel(
            GROUPED_KERNELS[stage.name](items, vec, layout, None, True),
            name=stage.name,
            config=dict(stage.config),
            variant=("vector" if vec else "scalar") + "-grouped-" + layout,
            spec=SPLIT_ARGS,
            smem=stage.smem_for(layout),
            device=device,
        )
        self.threads = stage.threads()
        self.slots = max(2, device.sm_count * self._kernel.blocks_per_sm(self.threads))

    def kernel(self) -> Any:
        """The loaded kernel (``launcher.Kernel``, or the dispatcher on the simulator)."""
        return self._kernel

    def run(self, A: Operand, B: Operand, C: Operand, offsets: Operand, stream: Any) -> None:
        """Enqueue the grouped product: A ``(T, K)``, B ``(E, K, N)`` (strides as stored), C
        ``(T, N)``, offsets ``(E,)`` int32."""
        (T, K), (E, _, N) = A.shape, B.shape
        bm, bn = self.stage.tile
        d = self.device.id
        a3 = Operand(A.obj, A.ptr, (E, T, K), (0, 4 * K, 4), F32, d)
        b3 = Operand(B.obj, B.ptr, (E, K, N), tuple(B.strides), F32, d)
        c3 = Operand(C.obj, C.ptr, (E, T, N), (0, 4 * N, 4), F32, d)
        most = (cdiv(T, bm) + E) * cdiv(N, bn)  # the longest the work list can be
        grid = (max(1, min(self.slots, most)), 1, 1)
        self._kernel.launch(grid, (self.threads, 1, 1), stream, (a3, b3, c3, c3, offsets), (1, 0))


def rows_in_place(ops: list[Operand], cols: int) -> Operand | None:
    """The C-contiguous ``(T, cols)`` operand that row blocks ``ops`` (each a C-contiguous
    ``(M_i, cols)`` float32) make where they lie, each non-empty one starting where the one
    before it ends (as ``torch.split`` of one tensor, or slices of one array, give them); None
    when they do not, or all are empty."""
    first, end, rows = None, 0, 0
    for x in ops:
        if x.shape[0] == 0:
            continue
        if first is None:
            first = x
        elif x.ptr != end:
            return None
        end, rows = x.ptr + 4 * cols * x.shape[0], rows + x.shape[0]
    if first is None:
        return None
    return Operand(first.obj, first.ptr, (rows, cols), (4 * cols, 4), F32, first.device)


def matrices_in_place(ops: list[Operand]) -> Operand | None:
    """The ``(E, K, N)`` operand of matrices ``ops`` (each ``(K, N)``, strides alike) where
    they lie, one non-negative stride apart (``list(w)`` of an ``(E, K, N)`` tensor, or one
    matrix E times); None when they do not."""
    x0 = ops[0]
    step = ops[1].ptr - x0.ptr if len(ops) > 1 else 0
    if step < 0 or any(
        x.ptr != x0.ptr + i * step or tuple(x.strides) != tuple(x0.strides)
        for i, x in enumerate(ops)
    ):
        return None
    return Operand(x0.obj, x0.ptr, (len(ops), *x0.shape), (step, *x0.strides), F32, x0.device)
