"""Stream-K: the grid's blocks share the product's MAC iterations evenly, across tile boundaries.

A data-parallel grid gives each block one C tile: with T tiles and G resident blocks (SMs x
blocks per SM) it runs ``ceil(T / G)`` waves, and the last one may be nearly empty (4097^3 in
128 x 128 tiles: 1089 tiles on 264 slots, 4.1 waves run as 5; 256 x 2304 x 768: 36 tiles for 132
SMs). Split-K multiplies the blocks by a whole factor, which rarely lands on a multiple of G.
Stream-K launches exactly G blocks and deals out the T x I MAC iterations (I = K tiles of BK per
C tile) in equal contiguous ranges: block c takes iterations ``[c*q, (c+1)*q)``, ``q = ceil(T*I /
G)``, walking tile by tile; a range may start or end inside a tile, so a tile can have several
contributors. Every block then does the same work, whatever T and G.

Hybrid ("two-tile stream-K + data-parallel", Osama et al., section 5): when T >= 2G, all but the
last ``G + T mod G`` tiles run as whole-tile waves (tile ``c + u*G`` for block c's u-th unit) and
only those last tiles are shared, so each block's stream-K range is one to two tiles long and
partial tiles stay few.

A block's *units* are its whole tiles, then its stream-K segments (one per tile its range
touches). A segment covering a whole tile writes C. Otherwise the block writes its unscaled
partial sums to a workspace slot and arrives at the tile's counter; the last arrival sums the
contributors' partials in block order (deterministic) and writes ``C = alpha * sum + beta * C``:
no block waits for another, so nothing depends on every block being resident. Contributors of
tile ``t`` (in the stream-K region) are blocks ``c0 = t*I // q`` to ``c1 = ((t+1)*I - 1) // q``;
block c's partial of tile t goes to slot ``c + t``: consecutive per tile, distinct across tiles
(a tile's last contributor is at most the next one's first), at most ``G + T`` slots of
``BM x BN`` floats.

This module holds the decomposition as plain functions (the plan prices it and the tests check
it on the host) and their device versions; the tunable stages' kernels loop over
:func:`units`, and ``_tunable`` routes each unit's epilogue.

Source: M. Osama, D. Merrill, C. Cecka, M. Garland, J. D. Owens, "Stream-K: Work-centric Parallel
Decomposition for Dense Matrix-Matrix Multiplication on the GPU", PPoPP 2023 (the even split of
MAC iterations and the hybrid schedule); the fixup by last arrival is this package's split-K one
(``_splitk``), in place of the paper's owner block waiting on flags.
"""

from __future__ import annotations

from ..device import cdiv
from . import _splitk
from ._common import PLAIN_STORES, device_jit


def dp_tiles(T, G):
    """Tiles run as whole-tile waves before the stream-K region: none when ``T < 2G``; all when
    ``T`` is a multiple of ``G`` (no tail to share); else all but the last ``G + T mod G``."""
    if T % G == 0:
        return T
    if T < 2 * G:
        return 0
    return (T // G - 1) * G


def _decomposition(cdiv, dp_tiles):
    # the same source for the host (plain functions) and the kernels (device functions)

    def units(c, T, I, G):
        """Units of block ``c`` of ``G``: its whole tiles, then one per stream-K tile it
        touches."""
        dp = dp_tiles(T, G)
        tot = (T - dp) * I
        q = cdiv(tot, G)
        b = c * q
        e = min(b + q, tot)
        n = dp // G
        if b < e:
            n += (e - 1) // I - b // I + 1
        return n

    def unit(c, u, T, I, G):
        """Unit ``u`` of block ``c``: ``(tile, it_begin, it_end, slot, first, count, counter)``.

        ``tile``: the C tile's index (row-major over the tile grid); ``[it_begin, it_end)``: its
        K tiles this unit computes; ``count``: contributors of the tile (1: the unit writes C);
        otherwise ``slot`` is this unit's workspace slot, ``first`` the tile's first
        contributor's slot (the tile's slots are ``first .. first + count - 1``) and ``counter``
        the tile's arrival counter.
        """
        dp = dp_tiles(T, G)
        nd = dp // G
        if u < nd:
            return c + u * G, 0, I, 0, 0, 1, 0
        tot = (T - dp) * I
        q = cdiv(tot, G)
        b = c * q
        e = min(b + q, tot)
        t = b // I + (u - nd)  # tile in the stream-K region
        ib = max(b, t * I) - t * I
        ie = min(e, (t + 1) * I) - t * I
        c0 = (t * I) // q
        c1 = ((t + 1) * I - 1) // q
        return dp + t, ib, ie, c + t, c0 + t, c1 - c0 + 1, t

    return units, unit


units, unit = _decomposition(cdiv, dp_tiles)
#: Device versions (the kernels call them with the grid's block index and size).
units_dev, unit_dev = (
    device_jit(f) for f in _decomposition(device_jit(cdiv), device_jit(dp_tiles))
)


def quantum(T, I, G):
    """MAC iterations per block in the stream-K region (the last blocks may get fewer)."""
    return cdiv((T - dp_tiles(T, G)) * I, G)


def blocks(T, I, slots):
    """Blocks of a stream-K grid: one per slot (resident block), never more than iterations."""
    return max(1, min(slots, T * I))


def partial_slots(T, G):
    """Workspace slots a stream-K grid of ``G`` blocks over ``T`` tiles may write."""
    return G + T


def make_fixup(BM: int, BN: int, NT: int, stores=PLAIN_STORES):
    """``fixup(Wg, L, Cg, first, count, counter, row0, col0, M, N, alpha, beta, vec, E)``: ends a
    stream-K unit that wrote its partial sums of the ``BM x BN`` tile at ``(row0, col0)`` to its
    slot of ``Wg`` (2-D, ``slots*BM x BN``: slot s is rows ``s*BM + [0, BM)``). The last of the
    tile's ``count`` contributors to arrive at ``L[counter]`` sums slots ``first .. first +
    count - 1`` in order and writes ``Cg = alpha * sum + beta * Cg`` (``NT`` threads; through
    ``stores``, a fused epilogue's C writes with operands ``E``: ``_common.make_stores``, default
    :data:`~._common.PLAIN_STORES`: none)."""
    sum_tile = _splitk.make_tile_sum(BM, BN, NT, _splitk.FIXUP_DEPTH, 1, stores)

    @device_jit
    def fixup(Wg, L, Cg, first, count, counter, row0, col0, M, N, alpha, beta, vec, E):
        if _splitk.arrive(L, counter, count):
            sum_tile(
                Wg,
                Cg,
                first,
                1,
                count,
                BM,
                row0,
                col0,
                Wg.shape[0],
                Wg.shape[1],
                0,
                row0,
                col0,
                M,
                N,
                alpha,
                beta,
                vec,
                E,
            )

    return fixup


__all__ = [
    "units",
    "unit",
    "units_dev",
    "unit_dev",
    "dp_tiles",
    "quantum",
    "blocks",
    "partial_slots",
    "make_fixup",
]
