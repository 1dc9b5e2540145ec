"""Tensor-core stages on the GPU against cuBLAS FP32 and TF32 (PyTorch), same process.

For each ``--sizes`` N (M = N = K): cuBLAS FP32 (``torch.mm``, TF32 off) and cuBLAS TF32 (TF32
on), then ``sgemm`` with ``compute="fp32"`` (the SIMT ladder's automatic pick), ``"tf32"`` and
``"3xtf32"``, and each tensor-core stage by name. Every implementation is first checked against a
float64 product (relative Frobenius error; NaN-poisoned output), then timed: kernel time (CUDA
events behind a hold kernel, median, ``check.time_kernel``) and end-to-end time of the call made
back to back (``timing.time_calls``). With ``--sweep``, the BK = 32 configurations of
``tf32_mma_multistage``'s SPACE are also timed (kernel time) at the first size. Writes
``tensor_cores.csv`` and prints it.

    python bench/tensor_cores.py --out DIR [--sizes 4096 8192] [--sweep]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sweep", action="store_true")
    args = p.parse_args(argv)

    import torch

    import numba_gemm
    from numba_gemm.check import time_kernel
    from numba_gemm.kernels import k12_tf32_mma_multistage as k12
    from numba_gemm.reference import rel_error
    from numba_gemm.timing import time_calls

    gpu = torch.cuda.get_device_name()
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []

    def record(n, impl, err, k_ms, e_ms, note=""):
        flop = 2.0 * n**3
        rows.append(dict(gpu=gpu, n=n, impl=impl, rel_error=err, kernel_ms=k_ms, e2e_ms=e_ms,
                         tflops_kernel=flop / k_ms / 1e9 if k_ms else "",
                         tflops_e2e=flop / e_ms / 1e9 if e_ms else "", note=note))
        print(rows[-1], flush=True)

    def run_size(n):
        a = torch.randn(n, n, device="cuda", generator=gen)
        b = torch.randn(n, n, device="cuda", generator=gen)
        ref = (a.double() @ b.double()).cpu().numpy()
        c = torch.empty(n, n, device="cuda")

        def err_of(run):
            c.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            return rel_error(c.double().cpu().numpy(), ref)

        for label, tf32 in (("cuBLAS FP32 (torch.mm)", False), ("cuBLAS TF32 (torch.mm)", True)):
            torch.backends.cuda.matmul.allow_tf32 = tf32

            def mm():
                torch.mm(a, b, out=c)

            err = err_of(mm)
            record(n, label, err, time_kernel(mm, reps=args.reps).median,
                   time_calls(mm, reps=args.reps).median)
        torch.backends.cuda.matmul.allow_tf32 = False

        calls = [(f"sgemm compute={m}", dict(compute=m)) for m in ("fp32", "tf32", "3xtf32")]
        calls += [(f"stage {s}", dict(stage=s))
                  for s in ("tf32_mma", "tf32_mma_multistage", "tf32x3_mma")]
        for label, kw in calls:
            def call(kw=kw):
                numba_gemm.sgemm(a, b, out=c, **kw)

            try:
                err = err_of(call)
                plan = numba_gemm.explain(a, b, out=c, **kw)
                run = plan.launch
                k_ms = time_kernel(lambda run=run: run(a, b, c), reps=args.reps).median
                e_ms = time_calls(call, reps=args.reps).median
                record(n, label, err, k_ms, e_ms,
                       f"{plan.stage.name} {dict(plan.stage.config)}")
            except Exception as e:  # noqa: BLE001 - a failing stage is reported, not fatal
                record(n, label, "", "", "", f"FAILED {type(e).__name__}: {e}")

        if args.sweep and n == args.sizes[0]:
            for mode in ("tf32",):
                for cfg in [x for x in k12.SPACE if x["BK"] == 32]:
                    st = k12.make_stage(cfg, mode)  # SPACE holds valid configurations only
                    try:
                        plan = numba_gemm.explain(a, b, out=c, stage=st)
                        err = err_of(lambda plan=plan: plan.launch(a, b, c))
                        k_ms = time_kernel(lambda plan=plan: plan.launch(a, b, c),
                                           reps=args.reps).median
                        record(n, f"sweep {st.name}", err, k_ms, "", str(cfg))
                    except Exception as e:  # noqa: BLE001
                        record(n, f"sweep {st.name}", "", "", "", f"{cfg} FAILED {e}")

    for n in args.sizes:
        run_size(n)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "tensor_cores.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
