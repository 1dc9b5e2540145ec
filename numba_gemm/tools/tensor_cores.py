"""``python -m numba_gemm.tools.tensor_cores``: tensor-core stages against cuBLAS, same precision.

Tensor-core stages on the GPU against cuBLAS FP32, TF32, FP16 and BF16 (PyTorch), in the same
process.

For each ``--sizes`` N (M = N = K): cuBLAS FP32 (``torch.mm``, TF32 off), cuBLAS TF32 (TF32 on),
cuBLAS FP16 and BF16 (``torch.mm`` on float16 / bfloat16 tensors: FP32 accumulation,
reduced-precision split-K reductions off; 16-bit output, and FP32 output through ``out_dtype``
where this PyTorch has it), then ``sgemm`` with ``compute="fp32"`` (the SIMT ladder's automatic
pick), ``"tf32"`` and ``"3xtf32"``, ``hgemm`` on float16 and on bfloat16 operands with FP32 and
16-bit output, and each tensor-core stage by name (the 16-bit ones through ``hgemm``). Every
implementation is first checked against a float64 product of its own inputs (relative Frobenius
error; NaN-poisoned output), then timed: kernel time (CUDA events behind a hold kernel, median,
``check.time_kernel``) and end-to-end time of the call made back to back
(``timing.time_calls``). Each row names its baseline (the cuBLAS of the same precision)
and its share of it, in the same timing.

With ``--sweep``, every configuration of the tunable tensor-core stages' spaces (``SWEPT``;
``--stages`` names a subset, ``--where KEY=VALUE ...`` keeps the configurations that match) is
compiled first in parallel processes (``numba_gemm.tools.precompile``, ``--jobs``) and then timed
(kernel time) at the first size. Writes ``tensor_cores.csv`` (and ``sweep.csv``) under ``--out``
and prints the rows.

The FP32 stages' tiles are swept by ``numba_gemm.tools.tune``; ``python -m numba_gemm.bench``
rates every stage against cuBLAS FP32 (and shows cuBLAS TF32 with ``--tf32``), never against
cuBLAS FP16: this tool is where each arithmetic meets cuBLAS in its own precision.

    python -m numba_gemm.tools.tensor_cores --out DIR [--sizes 4096 8192] [--sweep] [--jobs 16]

Needs PyTorch with a CUDA GPU (compute capability 8.0 or newer) for the run. Exit status: 0.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

from ..api import explain, hgemm, sgemm
from ..kernels import STAGES, get_stage
from ..kernels.stage import variant_key
from ..plan.choose import plan_for
from ..plan.geometry import Geometry
from . import precompile, tune
from .check import time_kernel
from .reference import rel_error
from .timing import time_calls

#: Which cuBLAS row each implementation is compared with (same inputs, same arithmetic).
FP32, TF32, FP16, FP16_OUT16, BF16, BF16_OUT16 = (
    "cuBLAS FP32",
    "cuBLAS TF32",
    "cuBLAS FP16 (FP32 out)",
    "cuBLAS FP16 (FP16 out)",
    "cuBLAS BF16 (FP32 out)",
    "cuBLAS BF16 (BF16 out)",
)
#: The tunable tensor-core stages ``--sweep`` times, by arithmetic.
SWEPT = {
    "tf32": ("tf32_mma_multistage", "tf32_wgmma", "tf32_tma", "tf32_tma_rs"),
    "3xtf32": ("tf32x3_mma", "tf32x3_wgmma", "tf32x3_tma"),
    "fp16": ("hgemm_mma", "hgemm_wgmma", "hgemm_tma"),
    "bf16": ("bf16_tma",),
}
BASELINE_OF = {"tf32": TF32, "3xtf32": FP32, "fp16": FP16, "bf16": BF16}
#: The 16-bit arithmetics: (torch dtype name, cuBLAS row with FP32 C, with 16-bit C).
HALVES = {"fp16": ("float16", FP16, FP16_OUT16), "bf16": ("bfloat16", BF16, BF16_OUT16)}


def _write(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def layout_of(name: str) -> str:
    """The layout stage ``name`` is run in (``tune.layout_of``: ``NN``, or ``NT`` for a stage
    that does not take row-major B, ``tf32_tma``)."""
    return tune.layout_of(get_stage(name))


def swept(name: str, where: list[str]) -> list[dict]:
    """The configurations of stage ``name``'s space that match every ``KEY=VALUE`` of ``where``
    (keys the stage's configurations lack do not filter)."""
    want = dict(w.split("=") for w in where)
    return [
        c for c in get_stage(name).space if all(str(c[k]) == v for k, v in want.items() if k in c)
    ]


def sweep_stages(only: list[str] | None, cc) -> list[tuple[str, str]]:
    """``(mode, stage name)`` of every swept stage that runs on ``cc`` (and is in ``only``)."""
    return [
        (m, n)
        for m, names in SWEPT.items()
        for n in names
        if (not only or n in only) and get_stage(n).runs_on(cc)
    ]


def precompile_sweep(jobs: int, where: list[str], only: list[str] | None) -> None:
    """Compile every swept configuration into the kernel cache, ``jobs`` processes at once."""
    import torch  # optional: the run needs PyTorch on a GPU

    cc = torch.cuda.get_device_capability()
    todo = [
        precompile.Job(n, tuple(sorted(c.items())), variant_key("vector", layout_of(n)), cc)
        for _, n in sweep_stages(only, cc)
        for c in swept(n, where)
    ]
    res = precompile.run(todo, jobs)
    failed = [r for r in res if r[1] == "failed"]
    print(f"precompiled {len(res)} kernels, {len(failed)} failed", flush=True)
    for job, _, _, err in failed:
        print(f"  {job}: {err}", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m numba_gemm.tools.tensor_cores",
        description="Tensor-core stages and automatic picks against cuBLAS of their own "
        "precision (FP32, TF32, FP16, BF16), kernel and end-to-end time; --sweep: every "
        "configuration of the tunable tensor-core stages.",
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sweep", action="store_true")
    p.add_argument(
        "--where",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="sweep only the configurations with these values (e.g. WN=32 MINB=2)",
    )
    p.add_argument(
        "--stages",
        nargs="*",
        default=None,
        metavar="NAME",
        help="sweep only these stages (default: every tunable tensor-core stage)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="compile processes for --sweep (default: all cores)",
    )
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    import torch  # optional: see precompile_sweep

    if args.sweep:
        precompile_sweep(args.jobs, args.where, args.stages)
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    gpu = torch.cuda.get_device_name()
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows, sweep = [], []

    def record(table, n, impl, baseline, err, k_ms, e_ms, note=""):
        flop = 2.0 * n**3
        base = {r["impl"]: r for r in rows if r["n"] == n}.get(baseline)

        def pct(key, ms):
            return 100.0 * base[key] / ms if base and ms and base[key] else ""

        table.append(
            dict(
                gpu=gpu,
                n=n,
                impl=impl,
                baseline=baseline,
                rel_error=err,
                kernel_ms=k_ms,
                e2e_ms=e_ms,
                tflops_kernel=flop / k_ms / 1e9 if k_ms else "",
                tflops_e2e=flop / e_ms / 1e9 if e_ms else "",
                pct_baseline_kernel=pct("kernel_ms", k_ms),
                pct_baseline_e2e=pct("e2e_ms", e_ms),
                note=note,
            )
        )
        print(table[-1], flush=True)

    def run_size(n):
        a = torch.randn(n, n, device="cuda", generator=gen)
        b = torch.randn(n, n, device="cuda", generator=gen)
        ref = (a.double() @ b.double()).cpu().numpy()
        c = torch.empty(n, n, device="cuda")
        # per 16-bit arithmetic: A, B, their float64 product, a 16-bit C
        half = {}
        for mode, (dt, _, _) in HALVES.items():
            x, y = a.to(getattr(torch, dt)), b.to(getattr(torch, dt))
            ref_h = (x.double() @ y.double()).cpu().numpy()
            half[mode] = (x, y, ref_h, torch.empty(n, n, device="cuda", dtype=x.dtype))

        def err_of(run, out, want):
            out.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            return rel_error(out.double().cpu().numpy(), want)

        def measure(label, baseline, run, call, out, want, note=""):
            try:
                err = err_of(run, out, want)
                record(
                    rows,
                    n,
                    label,
                    baseline,
                    err,
                    time_kernel(run, reps=args.reps).median,
                    time_calls(call, reps=args.reps).median if call else "",
                    note,
                )
            except Exception as e:  # noqa: BLE001 - a failing implementation is reported
                record(rows, n, label, baseline, "", "", "", f"FAILED {type(e).__name__}: {e}")

        for label, tf32 in ((FP32, False), (TF32, True)):
            torch.backends.cuda.matmul.allow_tf32 = tf32

            def mm():
                torch.mm(a, b, out=c)

            measure(label, FP32, mm, mm, c, ref, "torch.mm")
        torch.backends.cuda.matmul.allow_tf32 = False

        for mode, (dt, base32, base16) in HALVES.items():
            x, y, ref_h, c_h = half[mode]

            def mm_32(x=x, y=y):  # GemmEx with FP32 C (PyTorch >= 2.7's out_dtype)
                torch.mm(x, y, out_dtype=torch.float32, out=c)

            def mm_16(x=x, y=y, c_h=c_h):
                torch.mm(x, y, out=c_h)

            measure(base32, base32, mm_32, mm_32, c, ref_h, "torch.mm(out_dtype=float32)")
            measure(base16, base16, mm_16, mm_16, c_h, ref_h, f"torch.mm, {dt}")

        calls = [
            (f"sgemm compute={m}", BASELINE_OF.get(m, FP32), dict(compute=m))
            for m in ("fp32", "tf32", "3xtf32")
        ]
        cc = torch.cuda.get_device_capability()
        calls += [
            (f"stage {s.name}", BASELINE_OF[s.precision], dict(stage=s.name))
            for s in STAGES  # every FP32-input tensor-core stage by name
            if s.precision in ("tf32", "3xtf32") and s.runs_on(cc)
        ]
        bt = b.t().contiguous().t()  # the same B stored transposed, for the NT-only stages
        for label, baseline, kw in calls:
            y = bt if "stage" in kw and layout_of(kw["stage"]) == "NT" else b
            plan = explain(a, y, out=c, **kw)
            measure(
                label,
                baseline,
                lambda plan=plan, y=y: plan.launch(a, y, c),
                lambda kw=kw, y=y: sgemm(a, y, out=c, **kw),
                c,
                ref,
                f"{plan.stage.name} {dict(plan.stage.config)}"
                + (" (B stored transposed)" if y is bt else ""),
            )
        for mode, (dt, base32, base16) in HALVES.items():
            x, y, ref_h, c_h = half[mode]
            if not any(s.precision == mode and s.runs_on(cc) for s in STAGES):
                continue
            for out, baseline in ((c, base32), (c_h, base16)):
                plan = plan_for(
                    n, n, n, compute=mode, out_dtype=str(out.dtype).replace("torch.", "")
                )
                measure(
                    f"hgemm {dt} out={out.dtype}",
                    baseline,
                    lambda plan=plan, out=out, x=x, y=y: plan.launch(x, y, out),
                    lambda out=out, x=x, y=y: hgemm(x, y, out=out),
                    out,
                    ref_h,
                    f"{plan.stage.name} {dict(plan.stage.config)}",
                )
            for st in STAGES:  # every 16-bit stage by name, FP32 C
                if st.precision == mode and st.runs_on(cc):
                    plan = plan_for(n, n, n, stage=st.name, compute=mode)
                    measure(
                        f"stage {st.name}",
                        base32,
                        lambda plan=plan, x=x, y=y: plan.launch(x, y, c),
                        lambda st=st, x=x, y=y: hgemm(x, y, out=c, stage=st.name),
                        c,
                        ref_h,
                        f"{dict(st.config)}",
                    )

        if args.sweep and n == args.sizes[0]:
            for mode, name in sweep_stages(args.stages, torch.cuda.get_device_capability()):
                x, y, want = half[mode][:3] if mode in HALVES else (a, b, ref)
                g = None
                if layout_of(name) == "NT":
                    y, g = y.t().contiguous().t(), Geometry.dense(n, n, n, "NT")
                for cfg in swept(name, args.where):
                    st = get_stage(name).with_config(cfg)  # the space: valid ones
                    try:
                        plan = plan_for(
                            n,
                            n,
                            n,
                            stage=st,
                            geometry=g,
                            compute=mode if mode in HALVES else None,
                        )
                        run = lambda plan=plan, x=x, y=y: plan.launch(x, y, c)  # noqa: E731
                        err = err_of(run, c, want)
                        k_ms = time_kernel(run, reps=args.reps).median
                        record(
                            sweep, n, f"sweep {name}", BASELINE_OF[mode], err, k_ms, "", str(cfg)
                        )
                    except Exception as e:  # noqa: BLE001
                        record(
                            sweep,
                            n,
                            f"sweep {name}",
                            BASELINE_OF[mode],
                            "",
                            "",
                            "",
                            f"{cfg} FAILED {type(e).__name__}: {e}",
                        )
                _write(args.out / "sweep.csv", sweep)

    for n in args.sizes:
        run_size(n)
        _write(args.out / "tensor_cores.csv", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
