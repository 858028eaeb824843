"""``triton_npu.shared``: buffers for NPU kernels without torch.

Buffer semantics are checked in this process (in compile-only mode, which never opens a
runtime). Everything that touches a runtime runs in its own process on the conformance
harness: the HSA runtime is one per process and is configured from the environment at first
use, as in production.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import numpy as np
import pytest
from conftest import harness_env
from triton_npu import shared

# ---------------------------------------------------------------------------------------------
# In this process: memory sharing, views, dtypes, factories (compile-only: host memory).


@pytest.fixture
def compile_only(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AMD_TRITON_NPU_COMPILE_ONLY", "1")


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(8, dtype=np.float32)
    b = shared.from_numpy(a)
    assert b.data_ptr() == a.ctypes.data
    assert (b.dtype, b.shape, b.nbytes, len(b), b.size) == (np.dtype("float32"), (8,), 32, 8, 8)
    assert b.is_contiguous() and b.device == "cpu" and b.runtime is None
    b.numpy()[0] = 42.0
    assert a[0] == 42.0
    a[1] = 7.0
    assert b.numpy()[1] == 7.0
    assert repr(b) == "SharedBuffer(shape=(8,), dtype=float32, device='cpu')"


def test_from_numpy_keeps_the_array_alive():
    a = np.arange(1000, dtype=np.int32)
    ref = weakref.ref(a)
    b = shared.from_numpy(a)
    del a
    gc.collect()
    assert ref() is not None
    assert b.numpy()[999] == 999
    del b
    gc.collect()
    assert ref() is None


def test_numpy_is_a_view_that_outlives_the_buffer():
    b = shared.from_numpy(np.zeros((4, 3), dtype=np.int16))
    v = b.numpy()
    assert v.shape == (4, 3) and v.dtype == np.int16
    assert np.shares_memory(v, b.numpy()) and v.ctypes.data == b.data_ptr()
    v[2, 1] = 5
    assert b.numpy()[2, 1] == 5
    del b
    gc.collect()
    v[3, 2] = 9  # the view still owns the memory through its base
    assert v.sum() == 14
    assert np.shares_memory(np.asarray(shared.from_numpy(v)), v)


def test_array_protocol_views_or_copies_as_asked():
    a = np.arange(4, dtype=np.float32)
    b = shared.from_numpy(a)
    assert np.shares_memory(np.asarray(b), a)
    doubled = np.asarray(b, dtype=np.float64)
    assert doubled.dtype == np.float64 and not np.shares_memory(doubled, a)
    assert not np.shares_memory(np.array(b), a)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: np.arange(8, dtype=np.float32)[::2], "C-contiguous"),
        (lambda: np.asfortranarray(np.zeros((3, 4), np.float32)), "C-contiguous"),
        (lambda: np.frombuffer(b"\0" * 16, dtype=np.float32), "writable"),
        (lambda: np.zeros(4, dtype=np.complex64), "no Triton element type"),
        (lambda: np.zeros(4, dtype=">f4"), "byte order"),
        (lambda: [1.0, 2.0], "numpy array"),
    ],
)
def test_from_numpy_refuses_what_the_npu_cannot_read(make, message):
    with pytest.raises((TypeError, ValueError), match=message):
        shared.from_numpy(make())


@pytest.mark.parametrize(
    "dtype, triton_type",
    [
        ("float32", "*fp32"),
        (np.float16, "*fp16"),
        (np.dtype("float64"), "*fp64"),
        ("int32", "*i32"),
        ("int8", "*i8"),
        ("uint8", "*u8"),
        ("int64", "*i64"),
        ("bool", "*u1"),
    ],
)
def test_triton_specialises_every_supported_dtype(dtype, triton_type, compile_only):
    # Triton's own argument specialisation (what a launch runs) names the pointer type.
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    buf = shared.empty(16, dtype)
    assert native_specialize_impl(BaseBackend, buf, False, True, True)[0] == triton_type


def test_bfloat16_without_ml_dtypes_says_what_to_install(tmp_path):
    # A fresh interpreter in which ml_dtypes cannot be imported, installed or not.
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['ml_dtypes'] = None\n"
            "from triton_npu import shared\n"
            "for name in ('bfloat16', 'bf16', 'float8_e5m2'):\n"
            "    try:\n"
            "        shared.zeros(4, name)\n"
            "    except TypeError as e:\n"
            "        assert 'ml-dtypes' in str(e), e\n"
            "    else:\n"
            "        raise SystemExit(f'{name} did not raise')\n",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "AMD_TRITON_NPU_COMPILE_ONLY": "1"},
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_bfloat16_with_ml_dtypes(compile_only):
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    buf = shared.ones(4, "bfloat16")
    assert buf.dtype.itemsize == 2 and buf.numpy().astype(np.float32).tolist() == [1.0] * 4
    assert native_specialize_impl(BaseBackend, buf, False, True, True)[0] == "*bf16"


def test_factories_fill_and_shape(compile_only):
    z = shared.zeros((2, 3), "int32")
    assert z.shape == (2, 3) and z.dtype == np.int32 and not z.numpy().any()
    assert z.device == "cpu"  # compile-only: host memory
    assert shared.ones(3).numpy().tolist() == [1.0, 1.0, 1.0]
    assert shared.ones(3).dtype == np.float32
    assert shared.full(4, 7, dtype=np.uint8).numpy().tolist() == [7, 7, 7, 7]
    e = shared.empty(5, "float16")
    assert e.shape == (5,) and e.nbytes == 10
    like = shared.zeros_like(np.ones((3, 2), dtype=np.int64))
    assert like.shape == (3, 2) and like.dtype == np.int64 and not like.numpy().any()
    assert shared.empty_like(z, dtype="float64").dtype == np.float64
    assert len(shared.empty(0)) == 0
    with pytest.raises(TypeError, match="0-d"):
        len(shared.zeros(()))


def test_factories_accept_torch_dtypes_by_name(compile_only):
    torch = pytest.importorskip("torch")
    t = torch.ones(3, dtype=torch.float16)
    assert shared.zeros_like(t).dtype == np.float16
    assert shared.empty(2, torch.int32).dtype == np.int32


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: shared.empty(-1), ValueError, "negative"),
        (lambda: shared.empty("abc"), TypeError, "shape"),
        (lambda: shared.empty((2.5,)), TypeError, "shape"),
        (lambda: shared.empty(4, "complex128"), TypeError, "no Triton element type"),
        (lambda: shared.empty(4, "no-such-type"), TypeError, "no Triton element type"),
        (lambda: shared.empty(4, runtime="cuda"), ValueError, "unknown NPU runtime"),
        (lambda: shared.zeros_like(object()), TypeError, "shape and dtype"),
    ],
)
def test_bad_arguments_are_clear_errors(call, error, message, compile_only):
    with pytest.raises(error, match=message):
        call()


def test_dispatch_counts_start_at_zero_in_a_fresh_process():
    proc = subprocess.run(
        [sys.executable, "-c", "from triton_npu import shared; print(shared.dispatch_counts())"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(0, 0)"


# ---------------------------------------------------------------------------------------------
# On the harness, one process per runtime and device.

PRELUDE = textwrap.dedent(
    """
    import ctypes, gc, json, os, sys
    import numpy as np
    import triton
    import triton.language as tl
    from triton_npu import NPUDriver, shared
    from triton_npu.backend.driver import get_npu_cache_dir

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        y = tl.load(y_ptr + offs, mask=m)
        tl.store(out_ptr + offs, x + y, mask=m)

    RUNTIME = sys.argv[1]
    triton.runtime.driver.set_active(NPUDriver(RUNTIME))
    N, BLOCK = 4096, 1024
    GRID = (N // BLOCK,)

    def delta(before):
        now = shared.dispatch_counts()
        return [now[0] - before[0], now[1] - before[1]]

    def live_device_buffers():
        # The harness devices' own count of live allocations (test-only exports).
        if RUNTIME == "hsa":
            lib = ctypes.CDLL(os.path.join(os.environ["AMD_NPU_ROCR_PATH"], "lib",
                                           "libhsa-runtime64.so"))
            names, fn, field = 11, lib.npu_harness_hsa_stats, 1  # live_allocations
        else:
            lib = ctypes.CDLL(os.environ["NPU_HARNESS_XRT_DEVICE_LIB"])
            names, fn, field = 64, lib.npu_harness_xrt_stats, 6  # bos_alive (room for more)
        stats = (ctypes.c_uint64 * names)()
        assert fn(ctypes.byref(stats)) == 0
        return stats[field]
    """
)


def run_shared(body: str, runtime: str, env: dict, tmp_path: Path) -> tuple[dict, str]:
    # Triton reads a @jit function's source, so the script must be a file.
    script = tmp_path / f"shared_{len(list(tmp_path.glob('shared_*.py')))}.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    proc = subprocess.run(
        [sys.executable, str(script), runtime],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


CASES = {
    "hsa-npu2": ("hsa", {"AMD_TRITON_NPU_TARGET": "npu2"}),
    "hsa-npu1": ("hsa", {"NPU_HARNESS_AGENT": "aie2", "AMD_TRITON_NPU_TARGET": "npu1"}),
    "xrt-npu2": ("xrt", {"AMD_TRITON_NPU_TARGET": "npu2"}),
    "xrt-npu1": (
        "xrt",
        {"NPU_HARNESS_XRT_DEVICE": "NPU Phoenix", "AMD_TRITON_NPU_TARGET": "npu1"},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_vector_add_over_shared_buffers(case: str, tmp_path: Path):
    runtime, extra = CASES[case]
    result, _ = run_shared(
        """
        rng = np.random.default_rng(0)
        xs = rng.standard_normal(N).astype(np.float32)
        ys = rng.standard_normal(N).astype(np.float32)
        out = {}

        # empty/zeros/full: runtime memory, passed in place
        x = shared.empty(N); x.numpy()[:] = xs
        y = shared.zeros(N); y.numpy()[:] = ys
        z = shared.full(N, 123.0)
        out["devices"] = [b.device for b in (x, y, z)]
        before = shared.dispatch_counts()
        k = add_kernel[GRID](x, y, z, N, BLOCK=BLOCK)
        np.testing.assert_allclose(z.numpy(), xs + ys)
        assert np.array_equal(x.numpy(), xs) and np.array_equal(y.numpy(), ys)
        out["device_buffers"] = delta(before)

        # from_numpy: host memory, staged
        a, b, c = xs.copy(), ys.copy(), np.full(N, -1.0, np.float32)
        before = shared.dispatch_counts()
        add_kernel[GRID](shared.from_numpy(a), shared.from_numpy(b), shared.from_numpy(c), N,
                         BLOCK=BLOCK)
        np.testing.assert_allclose(c, xs + ys)
        out["numpy_buffers"] = delta(before)

        # mixed, and integers
        i, j = shared.zeros(N, "int32"), np.arange(N, dtype=np.int32)
        i.numpy()[:] = 7
        r = shared.empty(N, "int32")
        before = shared.dispatch_counts()
        add_kernel[GRID](i, shared.from_numpy(j), r, N, BLOCK=BLOCK)
        assert np.array_equal(r.numpy(), j + 7)
        out["mixed"] = delta(before)

        # the second half of a larger allocation (HSA: inside a region; XRT: not a whole BO)
        big = shared.zeros(2 * N)
        half = shared.from_numpy(big.numpy()[N:])
        out["half_device"] = half.device
        before = shared.dispatch_counts()
        add_kernel[GRID](x, y, half, N, BLOCK=BLOCK)
        np.testing.assert_allclose(big.numpy()[N:], xs + ys)
        assert not big.numpy()[:N].any()
        out["half"] = delta(before)

        out["files"] = sorted(os.listdir(get_npu_cache_dir(k)))
        print(json.dumps(out))
        """,
        runtime,
        harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME=runtime, **extra),
        tmp_path,
    )
    assert result["devices"] == [f"{runtime}:0"] * 3
    assert result["device_buffers"] == [3, 0], "empty/zeros buffers must be passed in place"
    assert result["numpy_buffers"] == [0, 3], "from_numpy buffers must be staged"
    assert result["mixed"] == [2, 1]
    assert result["half_device"] == f"{runtime}:0"
    # HSA passes any range inside a shared region in place; XRT only a whole buffer object.
    assert result["half"] == ([3, 0] if runtime == "hsa" else [2, 1])
    target_files = {"aie.elf"} if case.endswith("npu2") else {"aie.xclbin", "insts.bin"}
    assert target_files <= set(result["files"]), result["files"]


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_device_memory_lives_until_the_last_view_is_gone(runtime: str, tmp_path: Path):
    result, _ = run_shared(
        """
        out = {}
        x, y = shared.ones(N), shared.full(N, 2.0)
        base = live_device_buffers()
        z = shared.zeros(N)
        out["after_alloc"] = live_device_buffers() - base
        view = z.numpy()
        del z; gc.collect()
        out["view_alive"] = live_device_buffers() - base
        # still the runtime's memory: a launch through the view passes it in place
        again = shared.from_numpy(view)
        before = shared.dispatch_counts()
        add_kernel[GRID](x, y, again, N, BLOCK=BLOCK)
        out["through_view"] = delta(before)
        out["values"] = sorted(set(view.tolist()))
        base_after_launch = live_device_buffers()
        del again, view; gc.collect()
        out["after_free"] = live_device_buffers() - base_after_launch
        print(json.dumps(out))
        """,
        runtime,
        harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME=runtime),
        tmp_path,
    )
    assert result["after_alloc"] == 1
    assert result["view_alive"] == 1, "a numpy view must keep the device memory"
    assert result["through_view"] == [3, 0]
    assert result["values"] == [3.0]
    assert result["after_free"] == -1, "the memory must be freed with its last view"


def test_compile_only_without_a_runtime_uses_host_memory(tmp_path: Path):
    empty = tmp_path / "no-rocr"
    empty.mkdir()
    result, _ = run_shared(
        """
        x, y, z = shared.ones(N), shared.ones(N), shared.zeros(N)
        k = add_kernel[GRID](x, y, z, N, BLOCK=BLOCK)
        assert not z.numpy().any(), "compile-only must not dispatch"
        print(json.dumps({
            "devices": [b.device for b in (x, y, z)],
            "counts": list(shared.dispatch_counts()),
            "files": sorted(os.listdir(get_npu_cache_dir(k))),
        }))
        """,
        "hsa",
        harness_env(
            tmp_path,
            AMD_TRITON_NPU_COMPILE_ONLY="1",
            AMD_TRITON_NPU_RUNTIME="hsa",
            AMD_NPU_ROCR_PATH=str(empty),
            AMD_TRITON_NPU_TARGET="npu2",
            AMD_TRITON_NPU_XRT_SHIM=str(empty / "missing.so"),
        ),
        tmp_path,
    )
    assert result["devices"] == ["cpu"] * 3
    assert result["counts"] == [0, 0]
    assert {"aie.elf", "kernel.hsaco"} <= set(result["files"])


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_no_runtime_falls_back_to_host_memory_and_logs_why(runtime: str, tmp_path: Path):
    empty = tmp_path / "no-runtime"
    empty.mkdir()
    result, stderr = run_shared(
        """
        import logging
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
        z = shared.zeros((64, 4), "int32")
        z.numpy()[3, 2] = 5
        again = shared.zeros(8)
        try:
            add_kernel[GRID](again, again, again, 8, BLOCK=BLOCK)
            error = None
        except RuntimeError as e:
            error = str(e)
        print(json.dumps({
            "device": z.device, "again": again.device, "shape": list(z.shape),
            "sum": int(z.numpy().sum()), "error": error,
        }))
        """,
        runtime,
        harness_env(
            tmp_path,
            AMD_TRITON_NPU_RUNTIME=runtime,
            AMD_NPU_ROCR_PATH=str(empty),
            AMD_TRITON_NPU_TARGET="npu2",
            AMD_TRITON_NPU_XRT_SHIM=str(empty / "missing.so"),
        ),
        tmp_path,
    )
    assert result["device"] == "cpu" and result["again"] == "cpu"
    assert result["shape"] == [64, 4] and result["sum"] == 5
    assert f"the {runtime} runtime cannot be opened" in stderr
    assert str(empty) in stderr, "the log must say where the runtime was looked for"
    # asked once per process, not at every allocation
    assert stderr.count("cannot be opened") == 1
    assert result["error"], "a launch without a runtime must fail"


def test_views_at_odd_offsets_into_device_memory_are_staged_and_exact(tmp_path: Path):
    # The NPU's DMAs start on 32-bit words (tests/harness/README.md): a view into device memory
    # that does not is copied through an aligned buffer, by exactly its own bytes.
    result, _ = run_shared(
        """
        out = {}
        # uint8 views starting 1 byte into device buffers
        a = shared.zeros(N + 3, "uint8"); b = shared.zeros(N + 3, "uint8")
        c = shared.full(N + 3, 9, "uint8")
        a.numpy()[1:N + 1] = np.arange(N) % 100
        b.numpy()[1:N + 1] = 5
        views = [shared.from_numpy(t.numpy()[1:N + 1]) for t in (a, b, c)]
        out["devices"] = [v.device for v in views]
        before = shared.dispatch_counts()
        add_kernel[GRID](*views, N, BLOCK=BLOCK)
        out["u8"] = delta(before)
        assert np.array_equal(c.numpy()[1:N + 1], (np.arange(N) % 100 + 5).astype(np.uint8))
        out["u8_outside"] = sorted(set(c.numpy()[[0, N + 1, N + 2]].tolist()))

        # int16 views starting one element (2 bytes) in
        xs = (np.arange(N) - 2000).astype(np.int16)
        x = shared.zeros(N + 2, "int16"); y = shared.zeros(N + 2, "int16")
        z = shared.full(N + 2, -7, "int16")
        x.numpy()[1:N + 1] = xs
        y.numpy()[1:N + 1] = 3
        before = shared.dispatch_counts()
        add_kernel[GRID](*(shared.from_numpy(t.numpy()[1:N + 1]) for t in (x, y, z)), N,
                         BLOCK=BLOCK)
        out["i16"] = delta(before)
        assert np.array_equal(z.numpy()[1:N + 1], xs + 3)
        out["i16_outside"] = sorted(set(z.numpy()[[0, N + 1]].tolist()))

        # the same buffers through aligned views still go in place
        before = shared.dispatch_counts()
        add_kernel[GRID](*(shared.from_numpy(t.numpy()[4:N + 4]) for t in (a, b, c)), N - 1,
                         BLOCK=BLOCK)
        out["aligned"] = delta(before)
        print(json.dumps(out))
        """,
        "hsa",
        harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME="hsa", AMD_TRITON_NPU_TARGET="npu2"),
        tmp_path,
    )
    assert result["devices"] == ["hsa:0"] * 3
    assert result["u8"] == [0, 3], "views the DMAs cannot start at are staged"
    assert result["u8_outside"] == [9], "bytes around the views are untouched"
    assert result["i16"] == [0, 3]
    assert result["i16_outside"] == [-7]
    assert result["aligned"] == [3, 0]
