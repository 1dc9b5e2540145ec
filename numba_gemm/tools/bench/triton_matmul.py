"""Optional bench peer: a standard FP32 matrix product written in Triton.

Not part of numba_gemm and never imported by it: ``numba_gemm.bench.baselines`` imports this
module only when Triton (and PyTorch, whose tensors Triton launches on) is importable on a GPU.
It is the block-tiled kernel of Triton's matmul tutorial ("Matrix Multiplication", grouped
ordering of the block tiles for L2 reuse): each program computes a ``BLOCK_M x BLOCK_N`` tile
of C, walking K in ``BLOCK_K`` steps with masked loads at the edges, accumulating in float32;
``triton.autotune`` picks one of :data:`CONFIGS` per ``(M, N, K)`` on first call.

FP32, not TF32: ``tl.dot`` of float32 tiles uses TF32 tensor cores by default; here it runs with
``input_precision="ieee"`` (``allow_tf32=False`` on Triton < 3), full FP32 FMAs, so that it is
comparable with cuBLAS FP32 and the numba_gemm stages (and passes their 1e-5 bound).

Shapes: A ``(M, K)``, B ``(K, N)``, C ``(M, N)``, float32 CUDA tensors, any strides;
``C = A @ B`` (no alpha/beta).
"""

from __future__ import annotations

import inspect
from typing import Any

import triton
import triton.language as tl


def _ieee_keyword() -> bool:
    try:
        return "input_precision" in inspect.signature(tl.dot).parameters
    except (TypeError, ValueError):  # no signature: assume a current Triton
        return True


if _ieee_keyword():

    @triton.jit
    def _dot_fp32(a, b):
        return tl.dot(a, b, input_precision="ieee")

else:  # Triton 2.x

    @triton.jit
    def _dot_fp32(a, b):
        return tl.dot(a, b, allow_tf32=False)


def _config(bm: int, bn: int, bk: int, stages: int, warps: int) -> Any:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
        num_stages=stages,
        num_warps=warps,
    )


#: Autotuning candidates (tiles for FP32 FMA work, not tensor cores): big tiles for large
#: products, small ones so that small products still fill the SMs.
CONFIGS = [
    _config(128, 128, 32, 3, 8),
    _config(128, 128, 16, 4, 8),
    _config(128, 64, 32, 4, 4),
    _config(64, 128, 32, 4, 4),
    _config(64, 64, 32, 4, 4),
    _config(32, 64, 32, 4, 4),
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # --- which C tile: grouped ordering, GROUP_M tile rows at a time (L2 reuse of B)
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # --- GMEM -> registers/SMEM, FMA: rows past M / columns past N wrap (masked at the store)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc += _dot_fp32(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # --- epilogue: write C
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, acc, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def matmul(a: Any, b: Any, out: Any) -> Any:
    """``out = a @ b`` for float32 CUDA tensors a ``(M, K)``, b ``(K, N)``, out ``(M, N)``, on
    PyTorch's current stream; returns ``out``. No checks (a bench peer, not an API)."""
    M, K = a.shape
    N = b.shape[1]

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    matmul_kernel[grid](
        a,
        b,
        out,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
    )
    return out
