"""Per-stage resource report without a GPU: ``python -m numba_gemm.tools.resources``.

Every kernel of every stage (the 128-bit variant and, where there is one, the scalar-GMEM variant)
is compiled to PTX for sm_90 with ``numba.cuda.compile_ptx`` (NVVM from the ``cuda-toolkit`` pip
packages) and assembled with ``ptxas -arch=sm_90 -v`` (pip package ``nvidia-cuda-nvcc``; the
system ptxas may be too old for the PTX that NVVM 13.x emits). Reported per kernel: registers per
thread, spill bytes, stack frame (local memory), static SMEM, threads per block, the theoretical
occupancy on sm_90, and the PTX evidence for vectorization (128-bit global/shared loads and
stores), local memory (``ld.local``/``st.local``) and tensor cores (``mma.sync`` and ``ldmatrix``
instructions in the PTX: per unrolled main loop, plus the prologue's).

Occupancy model (CUDA Occupancy Calculator, compute capability 9.0): 65536 registers, 64 warps,
32 blocks and 228 KB of SMEM per SM; registers allocated per warp in units of 256; 1 KB of SMEM
reserved per block; at most 227 KB of SMEM per block.

Must run with the simulator off (``NUMBA_ENABLE_CUDASIM`` unset): it compiles real kernels. It
compiles with the backend of ``numba_gemm.backend`` (``NUMBA_GEMM_BACKEND=numba-cuda-mlir``:
numba-cuda-mlir's ``compile_ptx``, also without a GPU); ``--stages`` names the stages ported
to it (docs/numba-cuda-mlir.md).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..launch.cache import cache_dir, kernel_key, offline_device

#: Argument types of every stage kernel: A, B, C as 2D C-contiguous float32, alpha, beta.
KERNEL_SIGNATURE = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32, float32)"

# sm_90 per-SM limits (CUDA C Programming Guide, "Technical Specifications per Compute Capability").
SM90 = dict(
    regs=65536,
    warps=64,
    blocks=32,
    smem=228 * 1024,
    smem_block_max=227 * 1024,
    smem_reserved=1024,
    reg_unit=256,
)


@dataclass(frozen=True)
class KernelResources:
    """What ptxas and the PTX say about one compiled kernel (sm_90)."""

    stage: str
    variant: str  # "vector" (the default kernel) or "scalar" (scalar-GMEM fallback)
    registers: int
    spill_stores: int  # bytes
    spill_loads: int  # bytes
    stack_frame: int  # bytes of local memory per thread
    smem_static: int  # bytes per block
    smem_dynamic: int  # bytes per block, asked at launch
    threads: int  # per block
    blocks_per_sm: int
    occupancy: float  # active warps / 64
    ptx_ld_global_v4: int
    ptx_ld_shared_v4: int
    ptx_st_global_v4: int
    ptx_st_shared_v4: int
    ptx_local: int  # ld.local + st.local in the PTX
    ptx_mma: int = 0  # mma.sync instructions in the PTX
    ptx_ldmatrix: int = 0  # ldmatrix instructions in the PTX
    ptx_wgmma: int = 0  # wgmma.mma_async instructions in the PTX
    ptx_ld_v4: int = 0  # generic-address ld.v4.f32 (numba-cuda-mlir's inline-PTX load4)
    ptx_st_v4: int = 0  # generic-address st.v4.f32 (its store4)

    @property
    def uses_local_memory(self) -> bool:
        return bool(self.spill_stores or self.spill_loads or self.stack_frame or self.ptx_local)


def find_ptxas() -> str:
    """Path of a ptxas that understands NVVM 13 PTX.

    Order: ``$NUMBA_GEMM_PTXAS``; the pip package ``nvidia-cuda-nvcc`` (``nvidia/cu13/bin`` or
    ``nvidia/cuda_nvcc/bin``); ``ptxas`` on ``PATH``.

    Raises:
        FileNotFoundError: none found (install the ``test`` extra: ``pip install -e .[test]``).
    """
    env = os.environ.get("NUMBA_GEMM_PTXAS")
    if env:
        return env
    with contextlib.suppress(ImportError):
        import nvidia

        for root in nvidia.__path__:
            for sub in ("cu13/bin/ptxas", "cuda_nvcc/bin/ptxas", "cu12/bin/ptxas"):
                p = Path(root) / sub
                if p.exists():
                    return str(p)
    found = shutil.which("ptxas")
    if found:
        return found
    raise FileNotFoundError(
        "ptxas not found: install the pip package nvidia-cuda-nvcc (part of the 'test' extra) "
        "or set NUMBA_GEMM_PTXAS"
    )


def compile_kernel_ptx(kernel: Any, cc: tuple = (9, 0), sig: str = KERNEL_SIGNATURE) -> str:
    """PTX of a kernel (a ``cuda.jit`` dispatcher) for compute capability ``cc``; ``sig``: its
    Numba signature (default: the stage kernels')."""
    from ..backend import cuda

    opts = getattr(kernel, "targetoptions", {})
    with offline_device(cc):
        ptx, _ = cuda.compile_ptx(
            kernel.py_func,
            sig,
            cc=cc,
            launch_bounds=opts.get("launch_bounds"),
        )
    return ptx


_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)


def assemble(ptx: str, arch: str = "sm_90", options: Sequence[str] = ()) -> tuple[bytes, str]:
    """``(cubin, log)``: PTX text through ``ptxas -arch=<arch> <options>``.

    Raises:
        RuntimeError: ptxas failed (its exit status and log in the message)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp) / "kernel.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        cmd = [find_ptxas(), f"-arch={arch}", *options, str(src), "-o", str(cubin)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        log = res.stdout + res.stderr
        if res.returncode != 0:
            raise RuntimeError(f"ptxas failed ({res.returncode}):\n{log}")
        return cubin.read_bytes(), log


def ptxas_report(ptx: str, arch: str = "sm_90", max_registers: int | None = None) -> dict:
    """Run ``ptxas -v`` on PTX text; return registers, smem, stack and spill bytes."""
    options = ["-v", *([f"--maxrregcount={max_registers}"] if max_registers else [])]
    _, log = assemble(ptx, arch, options)
    frame = _PTXAS_FRAME.search(log)
    smem = _PTXAS_SMEM.search(log)
    return dict(
        registers=int(_PTXAS_REGS.search(log).group(1)),
        smem_static=int(smem.group(1)) if smem else 0,
        stack_frame=int(frame.group(1)),
        spill_stores=int(frame.group(2)),
        spill_loads=int(frame.group(3)),
    )


def occupancy_sm90(registers: int, smem_bytes: int, threads: int) -> tuple[int, float]:
    """Theoretical ``(blocks per SM, occupancy)`` on sm_90 for one kernel configuration."""
    warps = -(-threads // 32)
    regs_per_warp = -(-registers * 32 // SM90["reg_unit"]) * SM90["reg_unit"]
    by_regs = (SM90["regs"] // regs_per_warp) // warps if registers else SM90["blocks"]
    by_warps = SM90["warps"] // warps
    by_smem = SM90["smem"] // (smem_bytes + SM90["smem_reserved"])
    if smem_bytes > SM90["smem_block_max"]:
        by_smem = 0
    blocks = min(by_regs, by_warps, by_smem, SM90["blocks"])
    return blocks, blocks * warps / SM90["warps"]


def ptx_counts(ptx: str) -> dict:
    """Vector and local-memory instruction counts in PTX text."""

    def count(pattern: str) -> int:
        return len(re.findall(pattern, ptx))

    return dict(
        ptx_ld_global_v4=count(r"ld\.global(?:\.nc)?\.v4\.f32"),
        ptx_mma=count(r"\bmma\.sync\."),
        ptx_ldmatrix=count(r"\bldmatrix\.sync\."),
        ptx_wgmma=count(r"\bwgmma\.mma_async\."),
        ptx_ld_shared_v4=count(r"ld\.shared\.v4\.f32"),
        ptx_st_global_v4=count(r"st\.global\.v4\.f32"),
        ptx_st_shared_v4=count(r"st\.shared\.v4\.f32"),
        ptx_local=count(r"\b(?:ld|st)\.local\."),
        ptx_ld_v4=count(r"\bld\.v4\.f32"),
        ptx_st_v4=count(r"\bst\.v4\.f32"),
    )


def target_of(stage: Any) -> tuple[tuple, str]:
    """``(cc, ptxas arch)`` a stage's kernels are compiled for offline: sm_90, or sm_90a for a
    stage with architecture-specific instructions (``Stage.arch``, e.g. wgmma)."""
    if getattr(stage, "arch", None) is not None:
        major, minor = stage.arch
        return (major, minor, "a"), f"sm_{major}{minor}a"
    return (9, 0), "sm_90"


#: Folder of the stored reports, under the kernel cache's (``launch.cache.cache_dir``).
CACHE_SUBDIR = "resources"
#: Layout of a stored report; a new one makes every stored report a miss.
CACHE_FORMAT = 1


@functools.cache
def _this_module_digest() -> str:
    """SHA-256 of this file: the occupancy model and the PTX counts of a stored report."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


@functools.cache
def _ptxas_version() -> str:
    """``ptxas --version`` of :func:`find_ptxas` (read once per process)."""
    exe = find_ptxas()
    res = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    return res.stdout.strip() or f"unknown ({exe})"


def _report_key(stage: Any, kernel: Any, variant: str, layout: str, sig: str, cc, arch) -> tuple:
    """``(hex SHA-256, material)`` naming one kernel's report: the kernel cache's key material
    (kernel sources, closure, configuration, target options, toolchain: ``cache.kernel_key``),
    the layout, the ptxas target, ptxas's version and this module (the occupancy model and the
    PTX counts)."""
    _, material = kernel_key(
        kernel, name=stage.name, config=stage.config, variant=variant, signature=sig, cc=cc
    )
    material = dict(
        material,
        report=CACHE_FORMAT,
        report_code=_this_module_digest(),
        layout=layout,
        ptxas_arch=arch,
        ptxas=_ptxas_version(),
    )
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest(), json.loads(text)


def _stored(path: Path, material: dict) -> KernelResources | None:
    """The report stored at ``path`` if it was made from ``material``; None if absent, unreadable
    or made from anything else."""
    try:
        data = json.loads(path.read_text())
        if data["material"] == material:
            return KernelResources(**data["report"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _store(path: Path, material: dict, rep: KernelResources) -> None:
    """Write one report (atomically: a temporary file renamed); a write that fails is skipped."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"material": material, "report": asdict(rep)}, f)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def kernel_resources(
    stage: Any, kernel: Any, variant: str, layout: str = "NN", cache: bool = True
) -> KernelResources:
    """Compile one kernel of ``stage`` (for operand ``layout``) for sm_90 and collect its
    :class:`KernelResources`.

    ``cache``: reuse the report stored by an earlier compile of the same kernel, in
    ``resources/`` under the kernel cache's folder (``launch.cache.cache_dir``), and store a new
    one there. It is keyed by everything the kernel cache keys a cubin by (the kernels' sources,
    the kernel's closure and configuration, the toolchain's versions) plus the layout and
    ptxas's version, so a report of other sources or another ptxas is never read."""
    from ..launch.launcher import numba_signature

    cc, arch = target_of(stage)
    sig = numba_signature(stage.args)
    path = material = None
    if cache:
        key, material = _report_key(stage, kernel, variant, layout, sig, cc, arch)
        path = cache_dir() / CACHE_SUBDIR / f"{key}.json"
        got = _stored(path, material)
        if got is not None:
            return got
    rep = _compile_report(stage, kernel, variant, layout, sig, cc, arch)
    if path is not None:
        _store(path, material, rep)
    return rep


def _compile_report(
    stage: Any, kernel: Any, variant: str, layout: str, sig: str, cc, arch
) -> KernelResources:
    from ..kernels.stage import variant_key

    ptx = compile_kernel_ptx(kernel, cc=cc, sig=sig)
    rep = ptxas_report(
        ptx, arch=arch, max_registers=getattr(kernel, "targetoptions", {}).get("max_registers")
    )
    _, block = stage.launch_config(4096, 4096, 4096)
    threads = 1
    for b in block:
        threads *= b
    smem = stage.smem_for(layout)
    blocks, occ = occupancy_sm90(rep["registers"], rep["smem_static"] + smem, threads)
    return KernelResources(
        stage=stage.name,
        variant=variant_key(variant, layout),
        smem_dynamic=smem,
        threads=threads,
        blocks_per_sm=blocks,
        occupancy=occ,
        **rep,
        **ptx_counts(ptx),
    )


def stage_resources(
    stage: Any, layouts: Sequence[str] = ("NN",), cache: bool = True
) -> list[KernelResources]:
    """Resources of every kernel variant of ``stage`` (vector first, then scalar fallback, then
    ``vector_loads`` with B stored transposed, where the plan runs it), for each of ``layouts``
    that the stage serves (none of them: its first layout, e.g. ``tf32_tma``'s NT); ``cache``:
    as :func:`kernel_resources`."""
    out = []
    for layout in [lay for lay in layouts if lay in stage.layouts] or [stage.layouts[0]]:
        out.append(
            kernel_resources(
                stage,
                stage.kernel_for("vector", layout),
                "vector" if stage.scalar_kernel else "-",
                layout,
                cache,
            )
        )
        if stage.scalar_kernel is not None:
            out.append(
                kernel_resources(stage, stage.kernel_for("scalar", layout), "scalar", layout, cache)
            )
        if stage.has_vector_loads(layout):
            out.append(
                kernel_resources(
                    stage, stage.kernel_for("vector_loads", layout), "vector_loads", layout, cache
                )
            )
    return out


def format_table(rows: Sequence[KernelResources]) -> str:
    head = (
        f"{'stage':<20} {'variant':<15} {'regs':>4} {'spill':>9} {'stack':>5} {'smem':>7} "
        f"{'thr':>4} {'blk/SM':>6} {'occ':>5} {'ldg.v4':>6} {'lds.v4':>6} {'stg.v4':>6} "
        f"{'sts.v4':>6} {'local':>5} {'mma':>4} {'ldsm':>4} {'wgmma':>5}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.stage:<20} {r.variant:<15} {r.registers:>4} "
            f"{f'{r.spill_stores}/{r.spill_loads}':>9} {r.stack_frame:>5} "
            f"{r.smem_static + r.smem_dynamic:>7} "
            f"{r.threads:>4} {r.blocks_per_sm:>6} {r.occupancy:>5.0%} {r.ptx_ld_global_v4:>6} "
            f"{r.ptx_ld_shared_v4:>6} {r.ptx_st_global_v4:>6} {r.ptx_st_shared_v4:>6} "
            f"{r.ptx_local:>5} {r.ptx_mma:>4} {r.ptx_ldmatrix:>4} {r.ptx_wgmma:>5}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m numba_gemm.tools.resources",
        description="Registers, spills, local memory, SMEM and sm_90 occupancy of every stage, "
        "from numba.cuda.compile_ptx + ptxas -v (no GPU needed).",
    )
    parser.add_argument("--stages", nargs="*", help="stage names (default: all)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON to FILE")
    parser.add_argument(
        "--tuned",
        metavar="CLASS",
        choices=("small", "medium", "large"),
        help="report the tunable stages with their tuned configuration for this "
        "shape class from the committed sm_90 defaults (numba_gemm/tuning)",
    )
    parser.add_argument(
        "--layouts",
        nargs="+",
        default=["NN"],
        choices=["NN", "NT", "TN", "TT"],
        help="operand layouts to report for the stages that serve them (default: NN)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="compile every kernel again, without reading or writing the stored reports "
        "(resources/ under the kernel cache's folder, keyed by sources, toolchain and ptxas)",
    )
    args = parser.parse_args(argv)

    from ..device import SIMULATOR

    if SIMULATOR:
        parser.error("unset NUMBA_ENABLE_CUDASIM: the report compiles real kernels")
    from .. import STAGES, get_stage

    stages = [get_stage(n) for n in args.stages] if args.stages else list(STAGES)
    if args.tuned:
        from ..plan.tuning import winners

        tuned = winners(args.tuned, device=("", (9, 0)))
        stages = [s.with_config(tuned[s.name]["config"]) if s.name in tuned else s for s in stages]
    rows = [r for s in stages for r in stage_resources(s, args.layouts, not args.no_cache)]
    print(format_table(rows))
    print(
        "\nspill = store/load bytes; stack = local-memory bytes per thread; smem = static + "
        "dynamic bytes per block; occ = theoretical occupancy on sm_90; *.v4, local, mma "
        "(mma.sync) and ldsm (ldmatrix) = instruction counts in the PTX"
    )
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
