"""Compile ahead of time, into the kernel cache, the kernels this GPU's plans launch from its
tuning data: ``python -m numba_gemm.tools.precompile``.

A new process otherwise pays 3-9 s of NVVM and nvJitLink per kernel on its first call
(``numba_gemm.launch.cache``). The kernels compiled here: for every stage the GPU can run (its
``min_cc`` at most the GPU's compute capability), the stage's default kernel and every
configuration in the tuning data for this GPU (``numba_gemm.plan.tuning.winners`` of each shape
class, winner and alternatives, and the candidates of every measured shape,
``tuning.measured_shapes``), each in both variants (``"vector"``: ``stage.kernel``; ``"scalar"``:
``stage.scalar_kernel``, where there is one), and with B stored transposed also in the
``"vector_loads"`` one where the stage has it (``registry.VECTOR_LOADS``); the FP16 stages also
with float16 C (``hgemm(..., out=<float16>)``, the C type in the signature); plus the split-K
reduction when a configuration splits K, and the ``C = beta * C`` kernel of ``K == 0``
products. Each is keyed as ``numba_gemm.plan`` loads it (``config=stage.config``, the
variant, the signature of ``numba_gemm.launch.numba_signature``), so that the plan finds it.
Each configuration at its tuned ``SPLITK`` only: a plan that gives a candidate another K split
(``plan.cost.split_options``, where its tiles fill less than one wave) compiles that kernel on
its first call, unless ``--shapes`` names the product: then the kernels the automatic FP32 plan
runs for it (in each of ``--layouts``: its stage and configuration at the split it picks, and a
staged plan's inner one) are compiled too (:func:`shape_jobs`), with a GPU or offline with
``--cc`` and ``--sms``. ``python -m numba_gemm.tools.tune --shapes`` compiles and times a model's
products ahead of time instead (autotuning; needs the GPU).
Compilation is CPU-bound (NVVM, nvJitLink): ``--jobs`` worker processes (``spawn``) share the
work and write into the cache directly.

With ``--cc 9.0`` it compiles for that compute capability without a GPU (nvJitLink links offline;
:func:`numba_gemm.launch.cache.can_compile_offline`), e.g. to fill a cache directory on a build
machine (``NUMBA_GEMM_CACHE_DIR``) that GPU machines then share.

Exit status: 0 done, 1 some kernels failed (listed with the reason), 2 no GPU and no ``--cc``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: Kernels beside the stage kernels, by the name and variant the launch layer loads them under:
#: (module, attribute, argument spec of ``numba_gemm.launch.numba_signature``). The staging copy
#: comes in float32 and, for ``hgemm``'s staged plans, float16 and bfloat16 (as bits) variants.
AUX_KERNELS = {
    ("scale_c", ""): ("numba_gemm.kernels._scale", "scale_c", "Sf"),
    ("copy_padded", ""): ("numba_gemm.kernels._pad", "copy_padded", "SS"),
    ("copy_padded", "Q"): ("numba_gemm.kernels._pad", "copy_padded", "QQ"),
    ("copy_padded", "R"): ("numba_gemm.kernels._pad", "copy_padded", "RR"),
}


@dataclass(frozen=True)
class Job:
    """One kernel to compile: a stage (or an auxiliary kernel of :data:`AUX_KERNELS`), its
    configuration as sorted ``(name, value)`` pairs, the variant, the target compute
    capability and, for a 16-bit stage, whether C is of the operands' type (``c16``; else
    float32)."""

    name: str
    config: tuple[tuple[str, int], ...]
    variant: str
    cc: tuple[int, int]
    c16: bool = False

    def __str__(self) -> str:
        cfg = " ".join(f"{k}={v}" for k, v in self.config)
        var = f"/{self.variant}" if self.variant else ""
        return f"{self.name}{var}{'/C16' if self.c16 else ''}{f' {cfg}' if cfg else ''}"


def kernel_for(job: Job):
    """``(dispatcher, signature)`` of a job (builds the configured stage; compiles nothing).

    Raises:
        ValueError: unknown stage, or a configuration the stage rejects.
    """
    from ..kernels.stage import parse_variant_key
    from ..launch.launcher import numba_signature

    if (job.name, job.variant) in AUX_KERNELS:
        import importlib

        module, attr, spec = AUX_KERNELS[job.name, job.variant]
        return getattr(importlib.import_module(module), attr), numba_signature(spec)
    from .. import get_stage

    st = get_stage(job.name)
    if job.config and dict(job.config) != dict(st.config):
        st = st.with_config(dict(job.config))
    variant, layout = parse_variant_key(job.variant)
    if variant == "scalar" and st.scalar_kernel is None:
        raise ValueError(f"stage {job.name!r} has no {job.variant} kernel")
    args = st.args
    if job.c16:  # 16-bit C: the signature plan_for gives the stage for out_dtype=<its operands'>
        if st.precision not in ("fp16", "bf16"):
            raise ValueError(f"stage {job.name!r} writes float32 C only")
        args = args[:2] + args[0] + args[3:]
    return st.kernel_for(variant, layout), numba_signature(args)


def plan(
    cc: tuple[int, int],
    device_name: str = "",
    stages: Iterable[str] | None = None,
    layouts: Iterable[str] = ("NN",),
) -> list[Job]:
    """The jobs for a GPU: defaults and tuned configurations of every stage it can run.

    Args:
        cc: compute capability; stages that do not run on it (``Stage.runs_on``) are skipped.
        device_name: the GPU's name, to find its entry in the user's tuning cache; with ``""``
            only the committed defaults for ``cc`` are read.
        stages: stage names to keep (default: all).
        layouts: operand layouts to compile (``"NN"``, ``"NT"``, ``"TN"``, ``"TT"``), for the
            stages that serve them (``Stage.layouts``).

    Returns:
        Distinct jobs, in ladder order (defaults first, then tuned configurations).

    Raises:
        ValueError: an unknown name in ``stages``.
    """
    import warnings

    from .. import STAGES, get_stage
    from ..kernels._tunable import STREAM_K
    from ..plan import tuning

    wanted = None if stages is None else [get_stage(n).name for n in stages]
    configs: dict[str, list[dict]] = {}
    for st in STAGES:
        if (wanted is None or st.name in wanted) and st.runs_on(cc):
            configs[st.name] = [dict(st.config)]
    device = (device_name, tuple(cc))
    for cls in tuning.CLASSES:
        won = tuning.winners(cls.name, device)
        for name in configs:
            # a stage without data of its own is planned with its tuned_as stage's (as _priced)
            result = won.get(name) or won.get(get_stage(name).tuned_as)
            if result is None:
                continue
            for cand in tuning.candidates(result, name):
                try:  # the config the stage is built with, as the launcher will key it
                    cfg = dict(get_stage(name).with_config(cand["config"]).config)
                except (TypeError, ValueError) as e:
                    warnings.warn(f"skipping tuned config of {name!r} ({e})", stacklevel=2)
                    continue
                configs[name].append(cfg)
                if "ms_sk" in cand:  # its stream-K twin, which the plan prices (cost.stream_k_ms)
                    configs[name].append(dict(cfg, SPLITK=STREAM_K))
    for rec in tuning.measured_shapes(device):
        for cand in rec.get("candidates", []):
            name = cand.get("stage")
            if name in configs:
                try:
                    configs[name].append(dict(get_stage(name).with_config(cand["config"]).config))
                except (TypeError, ValueError, KeyError) as e:
                    warnings.warn(f"skipping measured config of {name!r} ({e})", stacklevel=2)
    jobs: list[Job] = []
    from ..kernels.stage import variant_key

    for st in STAGES:
        for cfg in configs.get(st.name, []):
            variants = ["vector"] + (["scalar"] if st.scalar_kernel is not None else [])
            served = st.with_config(cfg).layouts if cfg != dict(st.config) else st.layouts
            for layout in [lay for lay in layouts if lay in served]:
                loads = ["vector_loads"] if st.has_vector_loads(layout) else []
                for v in variants + loads:
                    for c16 in (False, True) if st.precision in ("fp16", "bf16") else (False,):
                        job = Job(
                            st.name,
                            tuple(sorted(cfg.items())),
                            variant_key(v, layout),
                            tuple(cc),
                            c16,
                        )
                        if job not in jobs:
                            jobs.append(job)
    if stages is None:
        jobs += [Job(name, (), variant, tuple(cc)) for name, variant in AUX_KERNELS]
    return jobs


def shape_jobs(
    shapes: Iterable[tuple[int, int, int]], layouts: Iterable[str], device: Any
) -> list[Job]:
    """The jobs for the kernels the automatic FP32 plan (``plan_for``, as ``sgemm`` makes it for
    dense operands) runs for each product ``(M, N, K)`` in each of ``layouts`` on ``device`` (a
    ``numba_gemm.device.DeviceInfo``: its compute capability, SM count and tuning data decide the
    plan): the plan's stage and configuration at the K split it picks, in the variant it runs, and
    for a staged plan (unaligned rows through padded copies) its inner plan's too; the copies
    themselves are :data:`AUX_KERNELS`. :func:`plan` holds each tuned configuration at its tuned
    split only, so a product whose plan splits K otherwise compiles on its first call.

    Raises:
        ValueError: a dimension < 1, or no FP32 stage serves a product on ``device``.
    """
    from ..kernels.stage import variant_key
    from ..plan.choose import plan_for
    from ..plan.geometry import Geometry

    cc = tuple(device.cc[:2])
    jobs: list[Job] = []
    for M, N, K in shapes:
        for layout in layouts:
            top = plan_for(M, N, K, device=device, geometry=Geometry.dense(M, N, K, layout))
            for p in (top, top.inner):
                if p is None:
                    continue
                job = Job(
                    p.stage.name,
                    tuple(sorted(dict(p.stage.config).items())),
                    variant_key(p.variant, p.geometry.layout),
                    cc,
                )
                if job not in jobs:
                    jobs.append(job)
    return jobs


def run_job(job: Job) -> tuple[Job, str, float, str]:
    """Compile one job into the cache (worker entry point).

    Returns:
        ``(job, status, seconds, error)``: status ``"compiled"``, ``"cached"`` or ``"failed"``.
    """
    from ..launch.cache import load_or_compile

    t0 = time.perf_counter()
    try:
        kernel, sig = kernel_for(job)
        ck = load_or_compile(
            kernel,
            name=job.name,
            config=dict(job.config),
            variant=job.variant,
            signature=sig,
            cc=job.cc,
        )
        status = "cached" if ck.from_cache else "compiled"
        return job, status, time.perf_counter() - t0, ""
    except Exception as e:  # reported per job; the others go on
        return job, "failed", time.perf_counter() - t0, f"{type(e).__name__}: {e}"


def is_cached(job: Job) -> bool:
    """Whether the cache holds a valid entry for ``job`` (read and checked, without warnings:
    a corrupt or stale one is reported as missing and rebuilt by :func:`run_job`)."""
    import warnings

    from ..launch.cache import _read_entry, entry_path, kernel_key

    kernel, sig = kernel_for(job)
    key, material = kernel_key(
        kernel,
        name=job.name,
        config=dict(job.config),
        variant=job.variant,
        signature=sig,
        cc=job.cc,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _read_entry(entry_path(key), key, material) is not None


def _status(job: Job) -> str:
    try:
        return "cached " if is_cached(job) else "missing"
    except Exception:  # e.g. the simulator's kernels: listing must still work
        return "?      "


def _progress(total: int):
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is in the bench/test extras; without it, no bar
        return None
    return tqdm(total=total, unit="kernel", desc="precompile", file=sys.stderr)


def run(jobs: Sequence[Job], workers: int) -> list[tuple[Job, str, float, str]]:
    """Run ``jobs`` in ``workers`` spawned processes (in this one when ``workers`` is 1)."""
    bar = _progress(len(jobs))
    results = []

    def done(res):
        results.append(res)
        if bar is not None:
            bar.set_postfix_str(f"{res[0]} {res[1]}", refresh=False)
            bar.update()

    try:
        if workers <= 1 or len(jobs) <= 1:
            for job in jobs:
                done(run_job(job))
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                futures = {pool.submit(run_job, job): job for job in jobs}
                for fut in as_completed(futures):
                    try:
                        done(fut.result())
                    except Exception as e:  # a worker died (e.g. killed for memory)
                        done((futures[fut], "failed", 0.0, f"{type(e).__name__}: {e}"))
    finally:
        if bar is not None:
            bar.close()
    return results


def _parse_cc(text: str) -> tuple[int, int]:
    try:
        major, minor = (int(x) for x in text.replace("sm_", "").split("."))
    except ValueError:
        msg = f"expected a compute capability like 9.0, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    return major, minor


def _target(cc: tuple[int, int], name: str, device: Any, sms: int | None) -> Any:
    """The ``DeviceInfo`` the plans of ``--shapes`` are made for: this GPU's when it has ``cc``
    (``sms`` must then match its SM count, if given), else one of ``sms`` SMs named ``name``
    (``""``: the tuning data's main entry for ``cc``).

    Raises:
        ValueError: no GPU of ``cc`` here and no ``sms``; ``sms`` < 1 or not this GPU's.
    """
    from ..device import SMEM_OPTIN_LIMIT, DeviceInfo, info

    if sms is not None and sms < 1:
        raise ValueError(f"--sms must be >= 1, got {sms}")
    if device is not None and tuple(device[1]) == tuple(cc):
        here = info()
        if sms is not None and sms != here.sm_count:
            raise ValueError(f"--sms {sms}: this GPU ({here.name}) has {here.sm_count} SMs")
        return here
    if sms is None:
        raise ValueError(
            f"--shapes for sm_{cc[0]}{cc[1]} without such a GPU here needs the target's SM "
            "count: --sms N (132 on H100 SXM and H200)"
        )
    return DeviceInfo(0, name, tuple(cc), sms, SMEM_OPTIN_LIMIT)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m numba_gemm.tools.precompile",
        description="Compile the kernels of this GPU's tuned plans (and every stage's default) "
        "into the on-disk kernel cache, so that new processes do not compile.",
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=min(8, os.cpu_count() or 1),
        help="worker processes (default: min(8, CPUs))",
    )
    parser.add_argument("--stages", nargs="+", metavar="NAME", help="only these stages")
    parser.add_argument(
        "--cc",
        type=_parse_cc,
        metavar="X.Y",
        help="compile for this compute capability (no GPU needed)",
    )
    parser.add_argument(
        "--layouts",
        nargs="+",
        default=["NN"],
        choices=["NN", "NT", "TN", "TT"],
        help="operand layouts to compile (default: NN; transposed operands compile on first "
        "use otherwise)",
    )
    parser.add_argument(
        "--shapes",
        metavar="SPEC",
        help="also the kernels the automatic FP32 plan runs for these products, in each of "
        "--layouts, at the K split it picks (whatever --stages says): MxNxK,... or a file with "
        "one or more a line (e.g. a model's projections)",
    )
    parser.add_argument(
        "--sms",
        type=int,
        metavar="N",
        help="with --shapes and --cc (no GPU): the target GPU's SM count, which the plan's "
        "wave model needs (132 on H100 SXM and H200)",
    )
    parser.add_argument("--list", action="store_true", help="print the kernels and exit")
    parser.add_argument("--clear", action="store_true", help="delete every cache entry and exit")
    args = parser.parse_args(argv)
    if args.sms is not None and args.shapes is None:
        parser.error("--sms is for --shapes (the SM count their plans are priced with)")

    from ..launch import cache
    from ..plan import tuning

    if args.clear:
        print(f"deleted {cache.clear()} entries from {cache.cache_dir()}")
        return 0
    device = tuning.current_device()
    if args.cc is None and device is None:
        print(
            "no GPU found (or NUMBA_ENABLE_CUDASIM is set): run on a GPU, or name a compute "
            "capability with --cc X.Y",
            file=sys.stderr,
        )
        return 2
    cc = args.cc or device[1]
    name = device[0] if device and tuple(device[1]) == tuple(cc) else ""
    from .bench.sizes import read_sizes

    try:
        jobs = plan(cc, name, args.stages, args.layouts)
        if args.shapes is not None:
            jobs += [
                job
                for job in shape_jobs(
                    read_sizes(args.shapes), args.layouts, _target(cc, name, device, args.sms)
                )
                if job not in jobs
            ]
    except ValueError as e:
        parser.error(str(e))
    target = f"{name or 'GPU'} (sm_{cc[0]}{cc[1]})"
    if args.list:
        for job in jobs:
            print(f"{_status(job)}  {job}")
        print(f"{len(jobs)} kernels for {target}; cache: {cache.cache_dir()}")
        return 0
    if (device is None or tuple(device[1]) != tuple(cc)) and not cache.can_compile_offline():
        print(
            f"cannot compile for sm_{cc[0]}{cc[1]} without such a GPU here: offline linking "
            "needs NVVM and nvJitLink (pip install nvidia-nvjitlink) and no "
            "NUMBA_ENABLE_CUDASIM",
            file=sys.stderr,
        )
        return 2

    t0 = time.perf_counter()
    todo = [job for job in jobs if _status(job) != "cached "]  # no workers for cached ones
    results = run(todo, max(1, args.jobs))
    seconds = time.perf_counter() - t0
    compiled = sum(r[1] == "compiled" for r in results)
    cached = len(jobs) - len(todo) + sum(r[1] == "cached" for r in results)
    failed = [r for r in results if r[1] == "failed"]
    for job, _, _, err in failed:
        print(f"FAILED {job}: {err}", file=sys.stderr)
    print(
        f"{target}: {compiled} compiled, {cached} already cached, {len(failed)} failed, "
        f"{seconds:.1f} s; cache: {cache.cache_dir()}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
