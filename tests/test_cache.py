"""The on-disk kernel cache (``numba_gemm.launch.cache``) and
``python -m numba_gemm.tools.precompile``.

The store (entry format, atomic writes, corrupt/stale entries, concurrent writers, the key) is
tested with made-up cubins, so it runs on the simulator. The real compile path (Numba -> NVVM ->
nvJitLink, no GPU needed) runs with the simulator off, where NVVM and nvJitLink are installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from numba_gemm import get_stage
from numba_gemm.device import SIMULATOR, DeviceInfo
from numba_gemm.kernels.stage import variant_key
from numba_gemm.launch import cache
from numba_gemm.launch.cache import CompiledKernel, NumbaGemmCacheWarning
from numba_gemm.plan.choose import plan_for
from numba_gemm.plan.geometry import Geometry
from numba_gemm.tools import precompile
from numba_gemm.tools.bench.sizes import read_sizes

REPO = Path(__file__).resolve().parents[1]
STAGE_SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32, float32)"
PARAMS = (8,) * 27 + (4, 4)


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    """A private cache directory and no state from other tests (memo, warned directories)."""
    d = tmp_path / "kernels"
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(d))
    cache._memo.clear()
    cache._unwritable_warned.clear()
    yield d
    cache._memo.clear()
    cache._unwritable_warned.clear()


def _kernel(A, B, C, alpha, beta):  # stands in for a kernel's py_func
    pass


def _make_kernel(bm):
    def kernel(A, B, C, alpha, beta):
        return bm

    return kernel


class FakeDispatcher:
    """What the key reads of a ``cuda.jit`` dispatcher: ``py_func`` and ``targetoptions``."""

    def __init__(self, py_func=_kernel, **opts):
        self.py_func = py_func
        self.targetoptions = {"launch_bounds": None, "lto": True, **opts}


def key_of(disp=None, **kw):
    args = dict(
        name="warptiling",
        config={"BM": 128, "BN": 64},
        variant="vector",
        signature=STAGE_SIG,
        cc=(9, 0),
    )
    args.update(kw)
    return cache.kernel_key(disp or FakeDispatcher(), **args)


def fake_cubin(tag: bytes = b"") -> bytes:
    return b"\x7fELF" + bytes(range(256)) * 8 + tag


def write(directory: Path, key: str = "k" * 64, material=None, cubin=None) -> Path:
    material = {"m": 1} if material is None else material
    path = cache._write_entry(directory, key, material, "entry_fn", PARAMS, cubin or fake_cubin())
    assert path == cache.entry_path(key, directory)
    return path


# --- where ---------------------------------------------------------------------------------------


def test_cache_dir_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path / "x"))
    assert cache.cache_dir() == tmp_path / "x"
    monkeypatch.delenv("NUMBA_GEMM_CACHE_DIR")
    default = cache.cache_dir()
    assert default.name == "kernels" and "numba_gemm" in default.parts


# --- the store -----------------------------------------------------------------------------------


def test_round_trip_leaves_one_file(cache_env):
    path = write(cache_env)
    assert [p.name for p in cache_env.iterdir()] == [path.name]  # no temporary file left
    got = cache._read_entry(path, "k" * 64, {"m": 1})
    assert got == CompiledKernel(fake_cubin(), "entry_fn", PARAMS, "k" * 64, True)
    header, cubin = cache._decode(path.read_bytes())
    assert header["material"] == {"m": 1} and header["cubin_size"] == len(cubin)


def test_missing_entry_is_a_silent_miss(cache_env):
    assert cache._read_entry(cache.entry_path("a" * 64, cache_env), "a" * 64, {}) is None


def test_crashed_writer_temp_file_is_ignored_and_cleared(cache_env):
    key = "c" * 64
    cache_env.mkdir()
    tmp = cache_env / f".{key}.123.456.deadbeef.tmp"  # what a writer killed mid-write leaves
    tmp.write_bytes(cache.MAGIC + b"\x10\x00")
    assert cache._read_entry(cache.entry_path(key, cache_env), key, {"m": 1}) is None
    write(cache_env, key)
    assert cache._read_entry(cache.entry_path(key, cache_env), key, {"m": 1}) is not None
    os.utime(tmp, (time.time() - 3600,) * 2)
    assert cache.clear() == 1  # counts entries, sweeps the old temporary file too
    assert list(cache_env.iterdir()) == []


@pytest.mark.parametrize("where", ["magic", "length", "digest", "header", "cubin"])
def test_flipped_byte_is_rejected(cache_env, where):
    path = write(cache_env)
    data = bytearray(path.read_bytes())
    head = 8 + 4 + 32 + int.from_bytes(data[8:12], "little")
    pos = {"magic": 0, "length": 8, "digest": 20, "header": 60, "cubin": head + 100}[where]
    data[pos] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.warns(NumbaGemmCacheWarning, match=f"corrupt .*{path.name}"):
        assert cache._read_entry(path, "k" * 64, {"m": 1}) is None


@pytest.mark.parametrize("keep", [0, 5, 30, 100, -1])
def test_truncated_entry_is_rejected(cache_env, keep):
    path = write(cache_env)
    data = path.read_bytes()
    path.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    with pytest.warns(NumbaGemmCacheWarning, match="corrupt"):
        assert cache._read_entry(path, "k" * 64, {"m": 1}) is None


def test_stale_entry_is_rejected(cache_env):
    path = write(cache_env, material={"format": 0, "m": 1})
    with pytest.warns(NumbaGemmCacheWarning, match=r"stale .*\(format\)"):
        assert cache._read_entry(path, "k" * 64, {"format": 1, "m": 1}) is None
    with pytest.warns(NumbaGemmCacheWarning, match="stale"):  # renamed under another key
        assert cache._read_entry(path, "z" * 64, {"format": 0, "m": 1}) is None


_WRITER = """
import sys, time
from pathlib import Path
from numba_gemm.launch import cache
d, key, tag, start = Path(sys.argv[1]), sys.argv[2], sys.argv[3].encode(), float(sys.argv[4])
while time.time() < start:
    time.sleep(0.001)
cubin = b"\\x7fELF" + tag * 50000
for _ in range(40):
    assert cache._write_entry(d, key, {"m": 1}, "entry_fn", (8, 4), cubin) is not None
"""


def test_concurrent_writers_and_a_reader(cache_env):
    """Processes rewriting one key while this one reads it: every read is a miss or a whole
    entry; one valid entry and no temporary file remain."""
    key = "d" * 64
    start = time.time() + 2.0
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(cache_env), key, tag, str(start)])
        for tag in ("A", "B", "C", "D")
    ]
    seen, errors = set(), []
    path = cache.entry_path(key, cache_env)
    while any(p.poll() is None for p in procs):
        try:
            got = cache._read_entry(path, key, {"m": 1})
        except Exception as e:  # a warning is an error in this suite: a torn read
            errors.append(e)
            break
        if got is not None:
            seen.add(got.cubin[4:5])
    assert [p.wait() for p in procs] == [0] * 4
    assert not errors
    assert [p.name for p in cache_env.iterdir()] == [path.name]
    final = cache._read_entry(path, key, {"m": 1})
    assert final is not None and final.cubin[4:5] in b"ABCD"
    assert seen <= {b"A", b"B", b"C", b"D"}


def test_concurrent_threads_write_one_key(cache_env):
    key = "e" * 64

    def work(tag):
        for _ in range(20):
            write(cache_env, key, cubin=fake_cubin(tag))

    threads = [threading.Thread(target=work, args=(bytes([65 + i]),)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(cache_env.iterdir())) == 1
    assert cache._read_entry(cache.entry_path(key, cache_env), key, {"m": 1}) is not None


# --- the key -------------------------------------------------------------------------------------


def test_key_is_stable():
    assert key_of() == key_of()
    assert key_of(FakeDispatcher(_make_kernel(64))) == key_of(FakeDispatcher(_make_kernel(64)))
    assert key_of(config={"BN": 64, "BM": 128})[0] == key_of()[0]  # order does not matter
    assert key_of(config=None)[0] == key_of(config={})[0]
    key, material = key_of()
    assert len(key) == 64 and json.loads(json.dumps(material)) == material


@pytest.mark.parametrize(
    "change",
    [
        dict(config={"BM": 128, "BN": 128}),
        dict(config={"BM": 128, "BN": 64, "MINB": 1}),
        dict(variant="scalar"),
        dict(cc=(8, 0)),
        dict(cc=(9, 1)),
        dict(name="double_buffering"),
        dict(signature="void(float32[:, ::1], float32)"),
        dict(disp=FakeDispatcher(launch_bounds=(256, 1))),
        dict(disp=FakeDispatcher(max_registers=128)),
        dict(disp=FakeDispatcher(_make_kernel(128))),
    ],
    ids=lambda c: next(iter(c)),
)
def test_key_changes_with(change):
    base = key_of(FakeDispatcher(_make_kernel(64)) if "disp" in change else None)[0]
    assert key_of(**change)[0] != base


def test_key_changes_with_sources(monkeypatch):
    base = key_of()[0]
    monkeypatch.setattr(cache, "_source_digest", lambda: "edited")
    assert key_of()[0] != base


def test_key_is_the_same_in_a_new_process():
    """Real stage kernels (closures over device functions): the key must not depend on object
    addresses or other per-process state."""
    code = textwrap.dedent(f"""
        import numba_gemm
        from numba_gemm.launch import cache
        st = numba_gemm.get_stage("multistage")
        print(cache.kernel_key(st.scalar_kernel, name=st.name, config=st.config,
                               variant="scalar", signature={STAGE_SIG!r}, cc=(9, 0))[0])
    """)
    keys = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(keys) == 1 and len(keys.pop()) == 64


# --- load_or_compile with a stand-in compiler ----------------------------------------------------


@pytest.fixture
def fake_compile(monkeypatch):
    calls = []

    def compile_(dispatcher, signature, cc, what):
        calls.append(what)
        return fake_cubin(str(len(calls)).encode()), "entry_fn", PARAMS

    monkeypatch.setattr(cache, "_compile", compile_)
    return calls


def load(disp):
    return cache.load_or_compile(
        disp,
        name="warptiling",
        config={"BM": 128},
        variant="vector",
        signature=STAGE_SIG,
        cc=(9, 0),
    )


def test_load_or_compile_compiles_once_then_reads(cache_env, fake_compile):
    disp = FakeDispatcher()
    first = load(disp)
    assert not first.from_cache and first.params == PARAMS and len(fake_compile) == 1
    assert load(disp) is first  # memo: the disk is not touched
    cache.entry_path(first.key).unlink()
    assert load(disp) is first
    cache._memo.clear()
    again = load(disp)  # no entry on disk any more: compiled and written again
    assert not again.from_cache and len(fake_compile) == 2
    cache._memo.clear()
    hit = load(disp)
    assert hit.from_cache and hit.cubin == again.cubin and len(fake_compile) == 2


def test_corrupt_entry_is_recompiled_and_overwritten(cache_env, fake_compile):
    first = load(FakeDispatcher())
    path = cache.entry_path(first.key)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    cache._memo.clear()
    with pytest.warns(NumbaGemmCacheWarning, match=path.name):
        again = load(FakeDispatcher())
    assert not again.from_cache and len(fake_compile) == 2
    assert (
        cache._read_entry(
            path,
            first.key,
            cache.kernel_key(
                FakeDispatcher(),
                name="warptiling",
                config={"BM": 128},
                variant="vector",
                signature=STAGE_SIG,
                cc=(9, 0),
            )[1],
        )
        is not None
    )


def test_unwritable_cache_dir_warns_once(tmp_path, monkeypatch, fake_compile):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(blocker / "kernels"))
    with pytest.warns(NumbaGemmCacheWarning, match="not writable"):
        got = load(FakeDispatcher())
    assert got.cubin.startswith(b"\x7fELF") and not got.from_cache
    other = cache.load_or_compile(
        FakeDispatcher(), name="other", config=None, variant="", signature=STAGE_SIG, cc=(9, 0)
    )  # no second warning
    assert other.entry == "entry_fn"


# --- compile-path pieces that need no compiler ---------------------------------------------------


def test_entry_params_from_ptx():
    ptx = """
    .visible .entry _Z1kPfS_(
        .param .u64 _Z1kPfS__param_0,
        .param .u64 .ptr .global .align 16 _Z1kPfS__param_1,
        .param .f32 _Z1kPfS__param_2,
        .param .align 8 .b8 _Z1kPfS__param_3[24],
        .param .u16 _Z1kPfS__param_4
    )
    .visible .entry other(.param .u32 x)
    """
    assert cache.entry_params(ptx, "_Z1kPfS_") == (8, 8, 4, 24, 2)
    assert cache.entry_params(ptx, "other") == (4,)
    with pytest.raises(RuntimeError, match="no .entry"):
        cache.entry_params(ptx, "missing")


class _Lib:
    def __init__(self, **kw):
        self._setup_functions, self._teardown_functions = [], []
        self.use_cooperative, self.referenced_objects, self._linking_files = False, {}, set()
        self.__dict__.update(kw)


class _Overload:
    def __init__(self, lib=None, **kw):
        self._codelibrary = lib or _Lib()
        self.cooperative, self.debug = False, False
        self.__dict__.update(kw)


@pytest.mark.parametrize(
    "overload, reason",
    [
        (_Overload(_Lib(_setup_functions=[print])), "setup"),
        (_Overload(_Lib(_teardown_functions=[print])), "setup/teardown"),
        (_Overload(cooperative=True), "cooperative"),
        (_Overload(debug=True), "debug"),
        (_Overload(_Lib(referenced_objects={1: object()})), "referenced"),
    ],
)
def test_kernels_a_bare_cubin_cannot_run_are_refused(overload, reason):
    cache._check_bare(_Overload(), "ok")  # nothing needed: no error
    with pytest.raises(RuntimeError, match=reason):
        cache._check_bare(overload, "k")


def test_simulator_compiles_nothing(monkeypatch):
    monkeypatch.setattr(cache, "SIMULATOR", True)  # the flag as the cache module reads it
    with pytest.raises(RuntimeError, match="simulator"):
        load(FakeDispatcher())
    assert not cache.can_compile_offline()


# --- precompile ----------------------------------------------------------------------------------


@pytest.fixture
def no_user_tuning(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_GEMM_TUNING", str(tmp_path / "no-tuning.json"))


def test_precompile_plan(no_user_tuning):
    jobs = precompile.plan((9, 0))
    assert len(jobs) == len(set(jobs))
    names = {j.name for j in jobs}
    assert {"naive", "multistage", "scale_c", "copy_padded"} <= names
    # the staging copy for every element type a staged plan moves (hgemm's: 16-bit), under the
    # name and variant the launch layer loads it with (launcher.StagedRunner._copy)
    copies = {j.variant: j for j in jobs if j.name == "copy_padded"}
    assert set(copies) == {"", "Q", "R"}
    assert "float16[:, :, :], float16" in str(precompile.kernel_for(copies["Q"])[1])
    assert "uint16[:, :, :], uint16" in str(precompile.kernel_for(copies["R"])[1])
    assert ("smem_tiling", "vector") in {(j.name, j.variant) for j in jobs}
    assert not any(j.name == "smem_tiling" and j.variant == "scalar" for j in jobs)
    tuned = [j for j in jobs if j.name == "multistage"]
    assert len(tuned) > 2  # the default and the committed sm_90 winners, both variants
    if any(dict(j.config).get("SPLITK", 1) > 1 for j in jobs):
        assert "splitk_reduce" not in names  # split-K needs no second kernel
    assert "multistage" not in {j.name for j in precompile.plan((7, 5))}  # cp.async: sm_80+
    only = precompile.plan((9, 0), stages=["smem_tiling"])
    assert [(j.name, j.variant) for j in only] == [("smem_tiling", "vector")]
    # an FP16 stage's kernels with float32 and with float16 C (the signature hgemm's out picks);
    # float16 C for no other stage
    f16 = precompile.plan((9, 0), stages=["hgemm_tma"])
    assert {j.c16 for j in f16} == {False, True} and not any(j.c16 for j in tuned)
    c16 = next(j for j in f16 if j.c16)
    assert str(precompile.kernel_for(c16)[1]).startswith(
        "void(float16[:, ::1], float16[:, ::1], float16"
    )
    with pytest.raises(ValueError, match="float32 C only"):
        precompile.kernel_for(precompile.Job("multistage", (), "vector", (9, 0), True))


def test_precompile_list_without_gpu(no_user_tuning, capsys):
    assert precompile.main(["--list", "--cc", "9.0", "--stages", "naive", "vectorize"]) == 0
    out = capsys.readouterr().out
    assert "naive/vector" in out and "vectorize/scalar" in out and "3 kernels" in out


def test_precompile_shapes_adds_the_kernels_their_plans_run(no_user_tuning, capsys):
    """``--shapes``: the kernel each product's automatic plan launches, at the K split it picks
    (``plan`` holds tuned configurations at their tuned splits only, so these would compile on
    the first call), in each layout; a staged plan's inner kernel too. Offline it needs the SM
    count the plan's wave model prices with."""
    dev = DeviceInfo(0, "", (9, 0), 132, 227 * 1024)
    shapes = [(128, 9216, 3072), (320, 4096, 4096), (4095, 4095, 4095)]
    jobs = precompile.shape_jobs(shapes, ["NN", "NT"], dev)
    assert len(jobs) == len(set(jobs))
    want = set()
    for M, N, K in shapes:
        for layout in ("NN", "NT"):
            top = plan_for(M, N, K, device=dev, geometry=Geometry.dense(M, N, K, layout))
            for p in filter(None, (top, top.inner)):
                cfg = tuple(sorted(dict(p.stage.config).items()))
                want.add((p.stage.name, cfg, variant_key(p.variant, layout)))
    assert {(j.name, j.config, j.variant) for j in jobs} == want
    assert any(dict(j.config).get("SPLITK", 1) > 1 for j in jobs)
    tuned = set(precompile.plan((9, 0), "", None, ["NN", "NT"]))
    assert not set(jobs) <= tuned  # the point: splits the tuned list does not hold

    args = ["--list", "--cc", "9.0", "--stages", "naive", "--layouts", "NN", "NT"]
    assert precompile.main([*args, "--shapes", "320x4096x4096", "--sms", "132"]) == 0
    out = capsys.readouterr().out
    assert "double_buffering/vector-NT" in out and "double_buffering/vector " in out
    with pytest.raises(SystemExit):  # offline without the SM count
        precompile.main([*args, "--shapes", "320x4096x4096"])
    assert "--sms N" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        precompile.main([*args, "--shapes", "320x4096", "--sms", "132"])
    assert "MxNxK needs exactly 3 dimensions" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        precompile.main([*args, "--sms", "132"])
    assert "--sms is for --shapes" in capsys.readouterr().err


def test_read_sizes_from_a_file(tmp_path):
    f = tmp_path / "model.txt"
    f.write_text("# a model's projections\n16x4096x4096, 16x1024x4096\n\n1000  # a square\n")
    assert read_sizes(str(f)) == [(16, 4096, 4096), (16, 1024, 4096), (1000, 1000, 1000)]
    assert read_sizes("8x8x8") == [(8, 8, 8)]
    f.write_text("# nothing\n")
    with pytest.raises(ValueError, match="no size in"):
        read_sizes(str(f))


def test_precompile_needs_a_gpu_or_cc(no_user_tuning, monkeypatch, capsys):
    from numba_gemm.plan import tuning

    monkeypatch.setattr(tuning, "current_device", lambda: None)
    assert precompile.main([]) == 2
    assert "--cc" in capsys.readouterr().err


def test_precompile_clear(cache_env, capsys):
    write(cache_env, "f" * 64)
    assert precompile.main(["--clear"]) == 0
    assert "deleted 1" in capsys.readouterr().out and not list(cache_env.glob("*.kernel"))


# --- the real compile path (NVVM + nvJitLink, no GPU needed) -------------------------------------

needs_compiler = pytest.mark.skipif(
    SIMULATOR or not cache.can_compile_offline(),
    reason="compiles real kernels: needs the simulator off, NVVM and nvJitLink "
    "(numba-cuda[cu13] and nvidia-nvjitlink; see numba_gemm.launch.cache.can_compile_offline)",
)

_FRESH = """
import json, sys, time
import numba_gemm
from numba_gemm.launch import cache
st = numba_gemm.get_stage("smem_tiling")
t = time.perf_counter()
ck = cache.load_or_compile(st.kernel, name=st.name, config=st.config, variant="vector",
                           signature=sys.argv[1], cc=(9, 0))
dt = time.perf_counter() - t
print(json.dumps(dict(from_cache=ck.from_cache, seconds=dt, entry=ck.entry, key=ck.key,
                      params=ck.params, size=len(ck.cubin))))
"""


@needs_compiler
def test_real_compile_then_a_new_process_reads_it(cache_env):
    from numba_gemm import get_stage

    st = get_stage("smem_tiling")
    ck = cache.load_or_compile(
        st.kernel, name=st.name, config=st.config, variant="vector", signature=STAGE_SIG, cc=(9, 0)
    )
    assert not ck.from_cache
    assert ck.params == PARAMS
    assert ck.cubin[:4] == b"\x7fELF" and ck.entry.encode() in ck.cubin
    assert cache.entry_path(ck.key).exists()
    res = subprocess.run(
        [sys.executable, "-c", _FRESH, STAGE_SIG],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["from_cache"] is True, res.stderr
    assert got["seconds"] < 0.5, got  # a compile takes about a second or more
    assert (got["key"], got["entry"], tuple(got["params"]), got["size"]) == (
        ck.key,
        ck.entry,
        ck.params,
        len(ck.cubin),
    )


@needs_compiler
def test_real_compile_of_a_split_k_kernel(cache_env):
    """A split-K configuration compiles with the tunable stages' full argument list: three
    strided float32 batches, the workspace (another), the int32 tile counters, two scalars."""
    from numba_gemm.launch.launcher import numba_signature

    st = get_stage("warptiling")
    st = st.with_config({**st.config, "SPLITK": 2})
    ck = cache.load_or_compile(
        st.kernel,
        name=st.name,
        config=dict(st.config),
        variant="vector",
        signature=numba_signature(st.args),
        cc=(9, 0),
    )
    assert ck.params == (8,) * (4 * 11 + 7) + (4, 4) and ck.cubin[:4] == b"\x7fELF"


@needs_compiler
def test_precompile_cli_compiles_then_finds_cached(cache_env, no_user_tuning, capsys):
    args = ["--cc", "9.0", "--stages", "naive", "gmem_coalesce", "--jobs", "2"]  # 2 workers
    assert precompile.main(args) == 0
    assert "2 compiled, 0 already cached, 0 failed" in capsys.readouterr().out
    assert precompile.main(args) == 0
    assert "0 compiled, 2 already cached" in capsys.readouterr().out


def _launch_cubin(ck, grid, block, arrays, scalars):
    """Load ``ck`` with cuModuleLoadData and launch it with cuLaunchKernel (Numba's kernel ABI:
    nine 64-bit fields per 2-D array, then 4-byte float32 scalars), as the launcher does."""
    import ctypes
    import struct

    from cuda.bindings import driver as cu
    from numba import cuda

    cuda.current_context()  # Numba's primary context is current
    err, mod = cu.cuModuleLoadData(ck.cubin)
    assert int(err) == 0, err
    err, fn = cu.cuModuleGetFunction(mod, ck.entry.encode())
    assert int(err) == 0, err
    fields = []
    for a in arrays:
        rows, cols = a.shape
        fields += (0, 0, rows * cols, 4, a.device_ctypes_pointer.value, rows, cols, cols * 4, 4)
    fmt = "<" + "q" * len(fields) + "f" * len(scalars)
    buf = ctypes.create_string_buffer(struct.pack(fmt, *fields, *scalars))
    sizes = [8] * len(fields) + [4] * len(scalars)
    assert tuple(sizes) == ck.params
    base = ctypes.addressof(buf)
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    ptrs = (ctypes.c_void_p * len(sizes))(*(base + o for o in offsets))
    (err,) = cu.cuLaunchKernel(fn, *grid, *block, 0, 0, ctypes.addressof(ptrs), 0)
    assert int(err) == 0, err
    cuda.synchronize()
    cu.cuModuleUnload(mod)


@pytest.mark.skipif(SIMULATOR, reason="launches a cubin on a real GPU")
@pytest.mark.parametrize("offline", [False, True], ids=["numba-path", "offline-path"])
def test_cached_cubin_runs_on_the_gpu(cache_env, monkeypatch, offline):
    """The cubin from the cache, loaded and launched by the driver, computes the product (also
    the one linked by the no-GPU path)."""
    import numpy as np
    from numba import cuda

    from numba_gemm import get_stage
    from numba_gemm.plan import tuning

    device = tuning.current_device()
    if device is None:
        pytest.skip("needs a GPU")
    if offline:
        monkeypatch.setattr(cache, "_gpu_cc", lambda: None)  # link as without a GPU
    st = get_stage("smem_tiling")
    ck = cache.load_or_compile(
        st.kernel,
        name=st.name,
        config=st.config,
        variant="vector",
        signature=STAGE_SIG,
        cc=device[1],
    )
    rng = np.random.default_rng(0)
    M, N, K = 67, 45, 71
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    c = np.full((M, N), np.nan, np.float32)
    d_a, d_b, d_c = cuda.to_device(a), cuda.to_device(b), cuda.to_device(c)
    grid, block = st.launch_config(M, N, K)
    grid, block = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
    _launch_cubin(ck, grid, block, (d_a, d_b, d_c), (1.0, 0.0))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = d_c.copy_to_host()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5


def test_source_digest_covers_the_kernels_intrinsics_and_device_facts():
    """The cache key's source digest reads the stage modules, every PTX wrapper, device.py and
    backend.py (a digest of no files would let an edited kernel load a stale cubin)."""
    names = {p.relative_to(cache._PACKAGE_DIR).as_posix() for p in cache.source_files()}
    assert {
        "kernels/k01_naive.py",
        "kernels/_tunable.py",
        "ptx/mma.py",
        "ptx/wgmma.py",
        "ptx/cpasync.py",
        "ptx/vecmem.py",
        "device.py",
        "backend.py",
    } <= names
    assert all((cache._PACKAGE_DIR / n).is_file() for n in names)


def test_stable_description_of_sets_is_by_content():
    """Target options such as ``fastmath={"contract"}`` go into the key through
    ``cache._stable``: a set by its members in a fixed order, not by its type alone."""
    assert cache._stable({"contract", "arcp"}) == cache._stable(frozenset({"arcp", "contract"}))
    assert cache._stable({"contract"}) != cache._stable({"arcp"})
