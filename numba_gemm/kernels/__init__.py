"""The ordered registry of SGEMM stages: one module per rung of the ladder, in ladder order."""

from . import (
    k01_naive,
    k02_gmem_coalesce,
    k03_smem_tiling,
    k04_blocktiling_1d,
    k05_blocktiling_2d,
    k06_vectorize,
    k07_bank_conflict_free,
    k08_warptiling,
    k09_double_buffering,
    k10_multistage,
    k11_tf32_mma,
    k12_tf32_mma_multistage,
    k13_tf32x3_mma,
    k14_hgemm_mma,
    k15_skinny,
    k16_skinny_n,
    k17_hgemm_wgmma,
    k18_tf32_wgmma,
    k19_tf32x3_wgmma,
    k20_hgemm_tma,
    k21_tf32_tma,
    k22_tf32_tma_rs,
    k23_tf32x3_tma,
    k24_bf16_tma,
)

#: Every stage, slowest first. Adding a stage = one module + one line here.
STAGES = (
    k01_naive.STAGE,
    k02_gmem_coalesce.STAGE,
    k03_smem_tiling.STAGE,
    k04_blocktiling_1d.STAGE,
    k05_blocktiling_2d.STAGE,
    k06_vectorize.STAGE,
    k07_bank_conflict_free.STAGE,
    k08_warptiling.STAGE,
    k09_double_buffering.STAGE,
    k10_multistage.STAGE,
    k11_tf32_mma.STAGE,
    k12_tf32_mma_multistage.STAGE,
    k13_tf32x3_mma.STAGE,
    k14_hgemm_mma.STAGE,
    k15_skinny.STAGE,
    k16_skinny_n.STAGE,
    k17_hgemm_wgmma.STAGE,
    k18_tf32_wgmma.STAGE,
    k19_tf32x3_wgmma.STAGE,
    k20_hgemm_tma.STAGE,
    k21_tf32_tma.STAGE,
    k22_tf32_tma_rs.STAGE,
    k23_tf32x3_tma.STAGE,
    k24_bf16_tma.STAGE,
)


def get_stage(name: str):
    """The registered stage called ``name`` (see ``STAGES``).

    Raises:
        ValueError: no stage has that name; the message lists the valid names.
    """
    for s in STAGES:
        if s.name == name:
            return s
    valid = ", ".join(s.name for s in STAGES)
    raise ValueError(f"unknown stage {name!r}; valid stages: {valid}")


__all__ = ["STAGES", "get_stage"]
