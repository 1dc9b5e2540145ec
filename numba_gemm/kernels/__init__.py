"""The ordered registry of SGEMM stages: one module per rung of the ladder, in ladder order."""

from . import k01_naive, k02_gmem_coalesce, k03_smem_tiling

#: Every stage, slowest first. Adding a stage = one module + one line here.
STAGES = (
    k01_naive.STAGE,
    k02_gmem_coalesce.STAGE,
    k03_smem_tiling.STAGE,
)

__all__ = ["STAGES"]
