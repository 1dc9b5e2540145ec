"""The plan (chosen once, visible, one alignment rule), the direct launch's parameter layout, and
concurrent callers."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import requires_gpu
from helpers import off_simulator, randn
from numba import cuda

import numba_gemm
from numba_gemm import dispatch, plan_for
from numba_gemm.arrays import operand, rows_aligned
from numba_gemm.plan.geometry import Alignment, Geometry
from numba_gemm.tools.reference import reference_f64, rel_error

ROOT = Path(__file__).resolve().parents[1]


def test_plan_is_a_record_that_says_why():
    """A plan is decided anew by each ``plan_for`` (the API keeps one runner per request) and is
    a frozen record: the same request gives an equal decision."""
    p = plan_for(40, 30, 20)
    q = plan_for(40, 30, 20)
    assert (q.stage.name, dict(q.stage.config), q.variant, q.grid) == (
        p.stage.name,
        dict(p.stage.config),
        p.variant,
        p.grid,
    )
    assert plan_for(40, 30, 20, stage="smem_tiling").stage.name == "smem_tiling"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.grid = (1, 1, 1)
    text = repr(p)
    assert p.stage.name in text and "why:" in text and p.reason in text
    assert p.grid[2] == p.split_k and len(p.block) == 3


@pytest.mark.parametrize(
    "ptr, cols, ok", [(0, 4, True), (16, 8, True), (4, 4, False), (0, 6, False), (32, 1, False)]
)
def test_alignment_rule(ptr, cols, ok):
    assert rows_aligned(ptr, cols) is ok


def test_plan_variant_follows_the_alignment_rule():
    """A shape whose rows cannot be 16-byte aligned gets the scalar-GMEM kernel, whatever the
    caller claims; the vector kernel only when every row of A, B and C is aligned, leaving out
    the rows of an operand the stage copies element by element in every variant
    (``Stage.free_rows``: multistage's A in layout N, skinny's in any), base pointers aligned."""
    assert plan_for(64, 64, 64, stage="multistage").variant == "vector"
    assert plan_for(64, 64, 64, stage="multistage", alignment=Alignment.NONE).variant == "scalar"
    assert plan_for(64, 62, 64, stage="multistage").variant == "scalar"  # N % 4
    assert plan_for(64, 64, 63, stage="double_buffering").variant == "scalar"  # K % 4
    assert plan_for(64, 62, 64, stage="smem_tiling").variant == "vector"  # no scalar variant
    # K % 4: A's rows, which multistage and skinny copy 4 bytes at a time
    for name, M in (("multistage", 64), ("skinny", 3)):
        p = plan_for(M, 64, 63, stage=name)
        assert p.variant == "vector" and "copies element by element" in p.reason
        assert plan_for(M, 64, 63, stage=name, alignment=Alignment.NONE).variant == "scalar"
        assert plan_for(M, 62, 63, stage=name).variant == "scalar"  # B's and C's rows too
        nt = Geometry.dense(M, 64, 63, "NT")  # B stored transposed: its rows are K long
        assert plan_for(M, 64, 63, stage=name, geometry=nt).variant == "scalar"
    tn = Geometry.dense(62, 64, 64, "TN")  # A stored transposed, rows M long: 16-byte copies
    assert plan_for(62, 64, 64, stage="multistage", geometry=tn).variant == "scalar"


def test_misaligned_view_runs_the_scalar_kernel(rng):
    """A view starting 4 bytes into an allocation: the plan of the call (``explain``) is the
    scalar variant, and the result is right."""
    M, N, K = 20, 24, 16
    a = randn(rng, (M, K))
    buf = cuda.to_device(np.concatenate([[np.float32(7)], a.ravel()]))
    d_a = buf[1:].reshape(M, K)
    assert not rows_aligned(operand(d_a).ptr, K)
    b = randn(rng, (K, N))
    d_b = cuda.to_device(b)
    d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
    p = numba_gemm.explain(d_a, d_b, stage="multistage", out=d_c)
    assert p.variant == "scalar" and "not 16-byte aligned" in p.reason
    numba_gemm.sgemm(d_a, d_b, stage="multistage", out=d_c)
    ran = dispatch.PLANS[(0, M, N, K, False, "multistage", None)]  # the plan the call ran
    assert (ran.plan.stage.config, ran.plan.variant) == (p.stage.config, p.variant)
    main = ran.kernel()
    assert getattr(main, "dispatcher", None) in (None, p.stage.scalar_kernel)  # (GPU: a cubin)
    assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= 1e-5


@pytest.mark.parametrize("name, M", [("multistage", 37), ("skinny", 5)])
def test_unaligned_rows_of_a_copied_by_element_run_the_vector_kernel(name, M, rng):
    """K % 4 with N % 4 == 0: A's rows are unaligned, but multistage and skinny copy A 4 bytes
    at a time in every variant, so the call runs their vector kernel (128-bit copies of B and
    stores of C, which the simulator checks for alignment) and the result is right; an A
    starting 4 bytes into its allocation takes the scalar kernel again."""
    N, K = 36, 37
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
    p = numba_gemm.explain(d_a, d_b, stage=name, out=d_c)
    assert p.variant == "vector" and "copies element by element" in p.reason
    numba_gemm.sgemm(d_a, d_b, stage=name, out=d_c)
    ran = dispatch.PLANS[(0, M, N, K, True, name, None)]  # keyed by the pointers
    assert ran.plan.variant == "vector"
    assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= p.stage.rtol
    buf = cuda.to_device(np.concatenate([[np.float32(7)], a.ravel()]))
    d_a1 = buf[1:].reshape(M, K)
    assert numba_gemm.explain(d_a1, d_b, stage=name, out=d_c).variant == "scalar"


def test_grids_past_cuda_limits_are_refused_before_launch():
    """gridDim.y is at most 65535: a product too tall for a kernel raises, nothing launched."""
    with pytest.raises(ValueError, match="exceeds CUDA's limits"):
        plan_for(65536 * 128 + 1, 8, 8, stage="multistage")
    assert plan_for(65535 * 128, 8, 8, stage="multistage").grid[1] == 65535


def test_numpy_string_stage_name(rng):
    a, b = randn(rng, (5, 3)), randn(rng, (3, 4))
    out = numba_gemm.sgemm(cuda.to_device(a), cuda.to_device(b), stage=np.str_("naive"))
    assert rel_error(out.copy_to_host(), reference_f64(a, b)) <= 1e-5


def test_plan_for_rejects_bad_requests():
    with pytest.raises(ValueError, match="valid stages"):
        plan_for(8, 8, 8, stage="nope")
    with pytest.raises(TypeError, match="stage must be"):
        plan_for(8, 8, 8, stage=3)
    with pytest.raises(ValueError, match=">= 1"):
        plan_for(0, 8, 8)


def test_producer_streams_are_waited_for_on_the_device(monkeypatch):
    """CAI v3 producer streams: an event wait unless the stream is the launch stream or both
    are default streams (which the driver orders itself). Never a host synchronization."""
    from numba_gemm.launch import driver as _driver

    waits = []
    monkeypatch.setattr(_driver, "wait_for", lambda p, c, ctx: waits.append((p, c, ctx)))

    class Op:
        def __init__(self, stream):
            self.stream = stream

    plan = SimpleNamespace(kernel=lambda: SimpleNamespace(ctx=42))
    dispatch.order_after_producers(0, plan, Op(None), Op(1), Op(2), Op(0))
    assert waits == []
    dispatch.order_after_producers(0, plan, Op(777), Op(None))
    assert waits == [(777, 0, 42)]  # in the operands' GPU's context
    waits.clear()
    dispatch.order_after_producers(555, plan, Op(555), Op(1))
    assert waits == [(1, 555, 42)]


def test_concurrent_callers_on_their_own_streams(rng):
    """8 host threads x 15 calls, each thread on its own stream with its own shapes: every
    result is right. The simulator cannot run kernels from several host threads at once, so
    there the launches take turns (plans are still chosen concurrently; the next test) and each
    thread makes 3 calls (15 took 95 s of the suite); on a GPU they run concurrently."""
    shapes = [(5 + t, 6 + 2 * t, 3 + t) for t in range(8)]
    errors: list = []
    sim = numba_gemm.device.SIMULATOR
    turns = threading.Lock() if sim else contextlib.nullcontext()
    stage = "naive" if sim else None
    # the streams are made here: numba-cuda's lazy driver initialisation is not safe to race
    # from several threads (cuCtxGetCurrent -> CUDA_ERROR_NOT_INITIALIZED when every thread's
    # first CUDA call comes at once)
    streams = [cuda.stream() for _ in range(8)]

    def worker(t):
        try:
            M, N, K = shapes[t]
            r = np.random.default_rng(t)
            s = streams[t]
            for i in range(3 if sim else 15):
                a, b = randn(r, (M, K)), randn(r, (K, N))
                d_c = cuda.to_device(np.full((M, N), np.nan, np.float32))
                with turns:
                    numba_gemm.sgemm(
                        cuda.to_device(a), cuda.to_device(b), out=d_c, stream=s, stage=stage
                    )
                s.synchronize()
                err = rel_error(d_c.copy_to_host(), reference_f64(a, b))
                if not err <= 1e-5:
                    errors.append((t, i, err))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((t, repr(e)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_plans_chosen_concurrently_are_one_runner(monkeypatch):
    """Threads racing to plan the same new shapes (``dispatch.plan_runner``, what a first call
    does) all end up with the one kept runner per shape."""
    monkeypatch.setattr(dispatch, "PLANS", {})
    got: dict = {}
    barrier = threading.Barrier(8)

    def worker(t):
        barrier.wait()
        got[t] = [
            dispatch.kept(
                (0, 100 + i, 50, 30 + i, True, None, None),
                lambda i=i: dispatch.plan_runner(100 + i, 50, 30 + i, None, None, True, 0),
            )
            for i in range(20)
        ]

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i in range(20):
        assert len({id(got[t][i]) for t in range(8)}) == 1


def test_kernel_parameter_layout_matches_numba():
    """The direct launch packs Numba's kernel ABI by hand. Checked on the CPU, without the
    simulator: (1) the PTX of a stage kernel, the split-K reduction and the K=0 scaling kernel
    has the parameters, in size and order, that ``launch`` packs; (2) Numba's own argument
    flattening (``_Kernel._prepare_args``) gives the same values for the same array."""
    # numba-cuda's ABI (numba-cuda-mlir's: test_backend)
    res = off_simulator(
        [str(ROOT / "tests" / "abi_check.py")], timeout=600, NUMBA_GEMM_BACKEND="numba-cuda"
    )
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert "ABI OK" in res.stdout


@requires_gpu
def test_second_gpu_operands_stay_there(rng):
    """PyTorch tensors on cuda:1 (without set_device): computed there, result there."""
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    a, b = randn(rng, (300, 200)), randn(rng, (200, 100))
    ta, tb = torch.from_numpy(a).to("cuda:1"), torch.from_numpy(b).to("cuda:1")
    before = torch.cuda.current_device()
    c = numba_gemm.sgemm(ta, tb)
    assert c.device == ta.device and torch.cuda.current_device() == before
    assert rel_error(c.cpu().numpy(), reference_f64(a, b)) <= 1e-5
    out = torch.full((300, 100), float("nan"), device="cuda:1")
    numba_gemm.sgemm(ta, tb, out=out)
    torch.cuda.synchronize("cuda:1")
    assert rel_error(out.cpu().numpy(), reference_f64(a, b)) <= 1e-5
    with pytest.raises(ValueError, match="GPU"):
        numba_gemm.sgemm(ta, tb.to("cuda:0"))


@pytest.mark.parametrize("spec", ["AAAff", "SSSff", "SSSSIff"])
@pytest.mark.parametrize("gpus", [1, 2])
def test_gemm_launcher_writes_numbas_kernel_abi(monkeypatch, gpus, spec):
    """The hot-path launcher writes only the pointers and scalars per call; what the driver
    would read (each parameter through the void*[] it gets) must be Numba's full argument list
    for these arrays, call after call. With two GPUs it launches in the kernel's context and
    gives the caller's back. The driver is replaced by a recorder: this runs on the CPU."""
    import ctypes
    from types import SimpleNamespace

    from numba_gemm.device import DeviceInfo
    from numba_gemm.launch import driver as _driver
    from numba_gemm.launch import launcher as launch

    lay = launch._layout(spec)
    seen, ctx_calls = [], []

    def fake_raw(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        ptrs = (ctypes.c_void_p * len(lay.sizes)).from_address(params.value)
        vals = [
            ctypes.c_int64.from_address(p).value
            if size == 8
            else ctypes.c_float.from_address(p).value
            for p, size in zip(ptrs, lay.sizes, strict=True)
        ]
        seen.append(
            (fn.value, (gx, gy, gz), (bx, by, bz), smem, stream.value if stream else 0, vals)
        )
        return 0

    monkeypatch.setattr(_driver, "raw_launch", lambda: fake_raw)
    monkeypatch.setattr(_driver, "device_count", lambda: gpus)
    monkeypatch.setattr(_driver, "current_context", lambda: 55)
    monkeypatch.setattr(_driver, "set_current_context", ctx_calls.append)
    dev = DeviceInfo(0, "fake", (9, 0), 132, 227 * 1024)
    k = launch.Kernel("fake", dev, spec, 4096, None, fn=1234, ctx=77)
    M, N, K = 33, 20, 12
    if spec == "AAAff":
        shapes = [((M, K), None), ((K, N), None), ((M, N), None)]
    else:  # a batch of 3: A transposed with pitch 40, B broadcast, C pitched
        shapes = [
            ((3, M, K), (4 * 40 * K, 4, 4 * 40)),
            ((3, K, N), (0, 4 * N, 4)),
            ((3, M, N), (4 * 24 * M, 4 * 24, 4)),
        ]
    split = None
    if spec == "SSSSIff":  # split-K: a workspace and counters per stream, asked for per call
        shapes += [((1, 2 * M, N), (0, 4 * N, 4)), ((5,), None)]
        bufs = {
            s: tuple(SimpleNamespace(ptr=(1 << 40) * (j + 1) + 64 * s) for j in range(2))
            for s in (0, 99)
        }
        split = bufs.__getitem__
    fixed = [SimpleNamespace(ptr=0, shape=sh, strides=st) for sh, st in shapes]
    run = launch.gemm_launcher(k, spec, fixed, (1, 2, 1), (128, 1, 1), split)
    for i, (alpha, beta, stream) in enumerate([(0.5, 2.0, 0), (1.0, 0.0, 99)]):
        A, B, C = (
            SimpleNamespace(ptr=(1 << 36) * (j + 1) + 4096 * i, shape=sh, strides=st)
            for j, (sh, st) in enumerate(shapes[:3])
        )
        run(A.ptr, B.ptr, C.ptr, alpha, beta, stream)
        fn, grid, block, smem, s, vals = seen[-1]
        assert (fn, grid, block, smem, s) == (1234, (1, 2, 1), (128, 1, 1), 4096, stream)
        rest = (
            [
                SimpleNamespace(ptr=b.ptr, shape=sh, strides=st)
                for b, (sh, st) in zip(split(stream), shapes[3:], strict=True)
            ]
            if split
            else []
        )
        assert vals == launch.array_fields((A, B, C, *rest), lay.itemsizes) + [alpha, beta]
    # one GPU: the kernel's context is made current once per thread; two: switched and back
    assert ctx_calls == ([77] if gpus == 1 else [77, 55, 77, 55])


@requires_gpu
def test_popped_context_and_producer_streams_from_worker_threads(rng):
    """A thread whose first call ran inside ``with cuda.gpus[0]:`` calls again after the block
    popped the context (the launcher makes it current again); a fresh thread with no context
    passes operands produced on another stream (the wait is made in the operands' context)."""
    M, N, K = 70, 90, 50
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    producer, consumer = cuda.stream(), cuda.stream()
    d_a, d_b = cuda.to_device(a, stream=producer), cuda.to_device(b, stream=producer)
    plain_a, plain_b = cuda.to_device(a), cuda.to_device(b)
    outs = [cuda.to_device(np.full((M, N), np.nan, np.float32)) for _ in range(3)]
    errors: list = []

    def first():
        try:
            with cuda.gpus[0]:
                numba_gemm.sgemm(plain_a, plain_b, out=outs[0])
            numba_gemm.sgemm(plain_a, plain_b, out=outs[1])  # context popped by now
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    def second():
        try:
            numba_gemm.sgemm(d_a, d_b, out=outs[2], stream=consumer)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    for fn in (first, second):
        th = threading.Thread(target=fn)
        th.start()
        th.join()
    assert not errors, errors
    cuda.synchronize()
    for d_c in outs:
        assert rel_error(d_c.copy_to_host(), reference_f64(a, b)) <= 1e-5


def test_split_buffers_follow_a_growing_workspace(monkeypatch):
    """A split-K plan memoizes its per-stream workspace views; when another plan on the same
    stream grows the workspace, the memo is dropped (it would point into the replaced buffer)."""
    from helpers import SKINNY_SIM_CONFIG

    from numba_gemm.launch import workspace
    from numba_gemm.launch.launcher import runner

    monkeypatch.setattr(workspace, "_split", {})
    monkeypatch.setattr(workspace, "generation", workspace.generation + 1)
    st = numba_gemm.get_stage("skinny").with_config(dict(SKINNY_SIM_CONFIG, SPLITK=2))
    small, big = (runner(plan_for(9, 40, 64, stage=st)), runner(plan_for(9, 40_000, 64, stage=st)))
    W0, L0 = small._buffers(0)
    assert small._buffers(0)[0] is W0  # memoized
    big._buffers(0)  # grows this stream's workspace
    W1, L1 = small._buffers(0)
    wbuf, lbuf = workspace._split[(0, *workspace.stream_key(0))][:2]
    assert W1.ptr == operand(wbuf).ptr != W0.ptr
    assert L1.ptr == operand(lbuf).ptr
    assert W1.shape == W0.shape  # the small plan's own view of the larger buffer
