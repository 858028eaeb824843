"""``triton_npu.shared``: upstream's shared-buffer API over the NPU runtimes.

Host buffers and the refusals that precede any allocation are checked in this process. Everything that touches a runtime runs in its own process on the conformance
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
# In this process: host buffers (from_numpy), and every refusal that comes before a runtime
# is opened.


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(8, dtype=np.float32)
    b = shared.from_numpy(a)
    assert b.data_ptr() == a.ctypes.data
    assert (b.dtype, b.shape, b.nbytes, len(b), b.numel()) == (np.dtype("float32"), (8,), 32, 8, 8)
    assert b.is_contiguous() and b.device == "cpu" and b.runtime is None
    b.numpy()[0] = 42.0
    assert a[0] == 42.0
    a[1] = 7.0
    assert b.numpy()[1] == 7.0
    assert repr(b) == "SharedBuffer(shape=(8,), dtype=float32, devices=[cpu])"


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
def test_triton_specialises_every_supported_dtype(dtype, triton_type):
    # Triton's own argument specialisation (what a launch runs) names the pointer type.
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    buf = shared.from_numpy(np.zeros(16, dtype))
    assert native_specialize_impl(BaseBackend, buf, False, True, True)[0] == triton_type


def test_bfloat16_without_ml_dtypes_says_what_to_install(tmp_path):
    # A fresh interpreter in which ml_dtypes cannot be imported, installed or not; the element
    # type is checked before any device is opened.
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['ml_dtypes'] = None\n"
            "from triton_npu import shared\n"
            "for name in ('bfloat16', 'bf16', 'float8_e5m2'):\n"
            "    try:\n"
            "        shared.zeros(4, dtype=name, device='xrt:0')\n"
            "    except shared.SharedBufferError as e:\n"
            "        assert 'ml-dtypes' in str(e), e\n"
            "    else:\n"
            "        raise SystemExit(f'{name} did not raise')\n",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_bfloat16_with_ml_dtypes():
    import ml_dtypes
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    buf = shared.from_numpy(np.ones(4, ml_dtypes.bfloat16))
    assert buf.dtype.itemsize == 2 and buf.numpy().astype(np.float32).tolist() == [1.0] * 4
    assert native_specialize_impl(BaseBackend, buf, False, True, True)[0] == "*bf16"


def test_a_host_buffer_behaves_as_its_array_and_tensor():
    torch = pytest.importorskip("torch")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = shared.from_numpy(a)
    assert (b.numel(), b.element_size(), b.size(), b.size(1), b.ndim) == (6, 4, (2, 3), 3, 2)
    assert b.devices == ("cpu",) and not b.is_shared_with("xrt:0")
    assert shared.dlpack_device(b) == (shared.kDLCPU, 0)
    t = torch.from_dlpack(b)
    t[0, 0] = 40.0
    assert a[0, 0] == 40.0, "torch.from_dlpack must share the memory"
    assert np.from_dlpack(b).ctypes.data == a.ctypes.data
    assert float(b.sum()) == 55.0 and tuple(b.T.shape) == (3, 2)  # tensor methods
    assert bool(((b + 1) == torch.from_numpy(a) + 1).all())
    assert b.fill_(2.0) is b and (a == 2.0).all(), "in-place methods return the buffer"
    b += 1
    assert isinstance(b, shared.SharedBuffer) and (a == 3.0).all()
    torch.add(torch.ones(2, 3), torch.ones(2, 3), out=b)
    assert (a == 2.0).all(), "out= writes the buffer's memory"
    assert tuple(torch.cat([b, b]).shape) == (4, 3)
    b[1, 2] = 9.0
    assert a[1, 2] == 9.0 and float(b[1, 2]) == 9.0
    assert [tuple(row.shape) for row in b] == [(3,), (3,)] and len(b) == 2
    assert not hasattr(b, "no_such_thing")
    with pytest.raises(BufferError, match="without copying"):
        b.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="host memory"):
        b.__dlpack__(dl_device=(shared.kDLROCM, 0))
    assert len({b, b}) == 1, "hashable by identity"
    assert bool((b != 0).all()), "comparisons are elementwise"


def test_without_torch_the_numpy_array_stands_in(tmp_path: Path):
    # A fresh interpreter in which torch cannot be imported, installed or not, on the harness.
    script = textwrap.dedent(
        """
        import sys; sys.modules["torch"] = None
        import numpy as np
        from triton_npu import shared
        a = np.arange(4, dtype=np.float32)
        b = shared.from_numpy(a)
        assert isinstance(b + 1, np.ndarray) and (b + 1).tolist() == [1, 2, 3, 4]
        b += 1
        assert isinstance(b, shared.SharedBuffer) and a.tolist() == [1, 2, 3, 4]
        assert np.from_dlpack(b).ctypes.data == a.ctypes.data
        assert float(b[3]) == 4.0 and not hasattr(b, "sum")
        try:
            b.torch()
        except shared.SharedBufferError as e:
            assert "needs torch" in str(e), e
        else:
            raise SystemExit("torch() without torch did not raise")
        z = shared.zeros(3, device="hsa:0")
        assert z.dtype == np.float32 and z.numpy().tolist() == [0.0] * 3
        assert shared.arange(3, device="hsa:0").dtype == np.int64
        assert shared.arange(1.5, device="hsa:0").numpy().tolist() == [0.0, 1.0]
        assert shared.full((2,), 7, device="hsa:0").dtype == np.int64
        u = shared.rand(1000, device="hsa:0").numpy()
        assert ((u >= 0) & (u < 1)).all() and u.std() > 0.2
        assert 0.8 < shared.randn(1000, device="hsa:0").numpy().std() < 1.2
        print("ok")
        """
    )
    env = harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME="hsa")
    r = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_closing_a_host_buffer_leaves_the_array_alone():
    a = np.ones(4, np.float32)
    with shared.from_numpy(a) as b:
        assert b.host_ptr == a.ctypes.data
    assert (b.host_ptr, b.devices, repr(b)) == (None, (), "SharedBuffer(closed)")
    b.close()  # idempotent
    with pytest.raises(shared.SharedBufferError, match="closed"):
        _ = b.device
    with pytest.raises(shared.SharedBufferError, match="closed"):
        b.share_with("xrt:0")
    with pytest.raises(shared.SharedBufferError, match="closed"):
        b.data_ptr()
    assert a.tolist() == [1.0] * 4


def _torch_device(name: str):
    return pytest.importorskip("torch").device(name)


@pytest.mark.parametrize(
    "device, message",
    [
        (("VULKAN", 0), "unknown device kind"),
        ("vulkan:0", "unknown device kind"),
        ("hip:zero", "non-numeric index"),
        (17, "device must be"),
        (("XRT", object()), "device index"),
        ("xrt:-1", "negative"),
        ("hip:0", "no GPU runtime"),
        ("hip", "no GPU runtime"),
        ("cuda:0", "no GPU runtime"),
        ("rocm:1", "no GPU runtime"),
        (("HIP", 0), "no GPU runtime"),
        (lambda: _torch_device("cuda"), "no GPU runtime"),
        ("hsa:1", "hsa:1 does not exist"),
        (("XRT", 2), "xrt:2 does not exist"),
    ],
)
def test_devices_that_cannot_be_reached_are_refused_before_allocating(device, message):
    device = device() if callable(device) else device
    for call in (
        lambda: shared.empty(4, device=device),
        lambda: shared.SharedBuffer((4,), "float32", device),
    ):
        with pytest.raises(shared.SharedBufferError, match=message):
            call()


@pytest.mark.parametrize(
    "device, share",
    [
        ("xrt:0", "hsa:0"),
        ("hsa", ["XRT"]),
        ("hip:0", ["xrt:0", "hsa:0"]),  # refused for the mix, before the GPU
        ("xrt:0", [("HSA", 0)]),
    ],
)
def test_xrt_and_hsa_are_never_combined(device, share):
    with pytest.raises(shared.SharedBufferError, match="both XRT and HSA"):
        shared.zeros(4, device=device, share=share)


@pytest.mark.parametrize(
    "share, message",
    [
        ("hip:0", "no GPU runtime"),
        (("HIP", 0), "no GPU runtime"),  # one device, not the two specs "HIP" and 0
        (["xrt:0", "cuda:0"], "no GPU runtime"),
        (5, "iterable"),
    ],
)
def test_secondary_devices_that_do_not_exist_here_are_refused(share, message):
    with pytest.raises(shared.SharedBufferError, match=message):
        shared.empty(4, device="xrt:0", share=share)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: shared.empty(0, device="xrt:0"), "holds no elements"),
        (lambda: shared.empty(4, 0, 8, device="xrt:0"), "holds no elements"),
        (lambda: shared.empty(-4, device="xrt:0"), "negative dimension"),
        (lambda: shared.empty((4.5,), device="xrt:0"), "non-integer"),
        (lambda: shared.empty((1 << 62) + 1024, device="hsa:0"), "more than a device"),
        (lambda: shared.empty(4, "float32", device="xrt:0"), "dtype='float32'"),
        (lambda: shared.empty(4, dtype="complex128", device="xrt:0"), "no Triton element"),
        (lambda: shared.empty(4, dtype="no-such-type", device="xrt:0"), "no Triton element"),
        (lambda: shared.full(2, 3, device="xrt:0"), "needs a fill value"),
        (lambda: shared.arange(0, 10, 0, device="xrt:0"), "step must not be zero"),
        (lambda: shared.arange(0, device="xrt:0"), "is empty"),
        (lambda: shared.empty_like(np.zeros(4)), "pass device="),
        (lambda: shared.zeros_like(object(), device="xrt:0"), "expected a SharedBuffer"),
        (lambda: shared.SharedBuffer(np.zeros(4), None, "xrt:0"), "from_numpy"),
        (lambda: shared.is_on_device(np.zeros(2), "xrt:0"), "cannot hold a framework"),
        (lambda: shared.from_numpy(np.zeros(2)).bo, "not shared with any XRT"),
        (lambda: shared.from_numpy(np.zeros(2)).aie_ptr(), "not shared with any HSA"),
        (lambda: shared.from_numpy(np.zeros(2)).device_ptr(), "not shared with any HIP"),
        (lambda: shared.from_numpy(np.zeros(2)).share_with("hip:0"), "no GPU runtime"),
        (lambda: shared.from_numpy(np.zeros(2)).is_shared_with("gpu:0"), "unknown device"),
    ],
)
def test_bad_arguments_are_clear_errors(call, message):
    with pytest.raises(shared.SharedBufferError, match=message):
        call()


# upstream's shared.py __all__ (amd/Triton-XDNA amd_triton_npu/backend/shared.py @0605483a),
# and the DLPack device codes its tests import
UPSTREAM_NAMES = (
    "SharedBuffer SharedBufferError arange as_torch cache_stats dlpack_device empty empty_cache "
    "empty_like from_tensor full full_like hsa_dispatch_counts is_on_device ones ones_like rand "
    "randn set_cache_enabled zeros zeros_like kDLCPU kDLCUDA kDLROCM"
).split()


def test_every_upstream_name_is_importable_from_upstreams_path():
    import importlib

    upstream = importlib.import_module("triton.backends.amd_triton_npu.shared")
    assert upstream is shared
    missing = [name for name in UPSTREAM_NAMES if not hasattr(upstream, name)]
    assert missing == []
    assert set(UPSTREAM_NAMES) - {"kDLCPU", "kDLCUDA", "kDLROCM"} <= set(shared.__all__)
    assert issubclass(shared.SharedBufferError, RuntimeError)
    assert (shared.kDLCPU, shared.kDLCUDA, shared.kDLROCM) == (1, 2, 10)


def test_device_is_required_as_upstream_has_it():
    for factory in (shared.empty, shared.zeros, shared.ones, shared.rand, shared.randn):
        with pytest.raises(TypeError, match="device"):
            factory(4)
    with pytest.raises(TypeError, match="device"):
        shared.arange(4)
    with pytest.raises(TypeError, match="device"):
        shared.from_tensor(np.zeros(4))


def test_interop_helpers_read_any_producer():
    torch = pytest.importorskip("torch")
    assert shared.dlpack_device(torch.zeros(2)) == (shared.kDLCPU, 0)
    assert shared.dlpack_device(np.zeros(2)) == (shared.kDLCPU, 0)
    assert not shared.is_on_device(torch.zeros(2), "hip:0")
    assert not shared.is_on_device(torch.zeros(2), _torch_device("cuda:0"))
    assert shared.as_torch(np.ones(4, np.float32)).sum().item() == 4.0
    t = torch.ones(2)
    assert shared.as_torch(t) is t
    with pytest.raises(shared.SharedBufferError, match="DLPack producer"):
        shared.as_torch([1, 2])


def test_dispatch_counts_start_at_zero_in_a_fresh_process(tmp_path: Path):
    # Reading the counts opens no runtime: here there is none to open.
    script = "from triton_npu import shared; print(shared.dispatch_counts(), shared.hsa_dispatch_counts())"
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AMD_NPU_ROCR_PATH": str(tmp_path / "none")},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(0, 0) (0, 0)"


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
    DEV = f"{RUNTIME}:0"
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
            # Room for more than the agent's fields (13 now: a smaller buffer is overrun).
            names, fn, field = 64, lib.npu_harness_hsa_stats, 1  # live_allocations
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
        x = shared.empty(N, device=DEV); x.numpy()[:] = xs
        y = shared.zeros(N, device=DEV); y.numpy()[:] = ys
        z = shared.full((N,), 123.0, device=DEV)
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
        i, j = shared.zeros(N, dtype="int32", device=DEV), np.arange(N, dtype=np.int32)
        i.numpy()[:] = 7
        r = shared.empty(N, dtype=np.int32, device=DEV)
        before = shared.dispatch_counts()
        add_kernel[GRID](i, shared.from_numpy(j), r, N, BLOCK=BLOCK)
        assert np.array_equal(r.numpy(), j + 7)
        out["mixed"] = delta(before)

        # the second half of a larger allocation (HSA: inside a region; XRT: not a whole BO)
        big = shared.zeros(2 * N, device=DEV)
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
        shared.set_cache_enabled(False)  # closed buffers' memory is freed, not pooled
        x, y = shared.ones(N, device=DEV), shared.full(N, fill_value=2.0, device=DEV)
        base = live_device_buffers()
        z = shared.zeros(N, device=DEV)
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


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_no_runtime_is_a_shared_buffer_error_naming_the_cause(runtime: str, tmp_path: Path):
    # No host-memory stand-in: a buffer on a device the runtime cannot open is refused (as
    # upstream's), in compile-only mode too, with the runtime's own reason.
    empty = tmp_path / "no-runtime"
    empty.mkdir()
    result, _ = run_shared(
        """
        from triton_npu.config import npu_config
        errors = []
        for compile_only in (False, True):
            npu_config.compile_only = compile_only
            try:
                shared.zeros((64, 4), dtype="int32", device=DEV)
            except shared.SharedBufferError as e:
                errors.append(str(e))
        print(json.dumps({"errors": errors, "pool": shared.cache_stats()}))
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
    assert len(result["errors"]) == 2, result
    for error in result["errors"]:
        assert error.startswith(f"cannot allocate 1024 bytes on {runtime}:0: "), error
        assert str(empty) in error, "the error must say where the runtime was looked for"
    assert result["pool"]["buffers"] == 0


def test_views_at_odd_offsets_into_device_memory_are_staged_and_exact(tmp_path: Path):
    # The NPU's DMAs start on 32-bit words (tests/harness/README.md): a view into device memory
    # that does not is copied through an aligned buffer, by exactly its own bytes.
    result, _ = run_shared(
        """
        out = {}
        # uint8 views starting 1 byte into device buffers
        a = shared.zeros(N + 3, dtype="uint8", device=DEV)
        b = shared.zeros(N + 3, dtype="uint8", device=DEV)
        c = shared.full(N + 3, fill_value=9, dtype="uint8", device=DEV)
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
        x = shared.zeros(N + 2, dtype="int16", device=DEV)
        y = shared.zeros(N + 2, dtype="int16", device=DEV)
        z = shared.full(N + 2, fill_value=-7, dtype="int16", device=DEV)
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


# ---------------------------------------------------------------------------------------------
# Upstream's API on the harness: factories, devices, the tensor surface, DLPack, lifetime, the
# pool, and launches over the buffers (examples/zero_copy/shared_buffer_test.py's calls).


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_upstream_factories_devices_and_views(runtime: str, tmp_path: Path):
    result, _ = run_shared(
        """
        import torch
        from triton.backends.amd_triton_npu import shared as upstream_shared
        assert upstream_shared is shared
        OTHER = "xrt:0" if RUNTIME == "hsa" else "hsa:0"
        out = {}

        # every spelling of the device names the same one
        for spec in (DEV, RUNTIME, RUNTIME.upper(), (RUNTIME.upper(), 0), [DEV, DEV]):
            b = shared.SharedBuffer((4,), torch.float32, spec if not isinstance(spec, list)
                                    else DEV, spec if isinstance(spec, list) else ())
            assert b.device == DEV and b.devices == (DEV,) and b.is_shared_with(spec if not
                isinstance(spec, list) else DEV), spec
            assert not b.is_shared_with(OTHER) and not b.is_shared_with("hip:0")
        out["repr"] = repr(shared.zeros(2, 3, device=DEV))

        # factories, as torch spells them
        a = shared.empty(128, 768, dtype=torch.float32, device=DEV)
        b = shared.empty((128, 768), dtype=torch.float32, device=DEV)
        assert a.shape == b.shape == (128, 768) and a.host_ptr != b.host_ptr
        assert shared.empty(4, device=DEV).dtype == torch.get_default_dtype()
        assert shared.empty(4, dtype=np.int16, device=DEV).dtype == np.int16
        z, o = shared.zeros(64, device=DEV), shared.ones(64, device=DEV)
        assert float(z.abs().max()) == 0.0 and float(o.min()) == 1.0
        p = shared.full((2, 3), 7.0, device=DEV)
        k = shared.full(2, 3, fill_value=7.0, device=DEV)
        assert float(p.sum()) == float(k.sum()) == 42.0 and p.dtype == torch.float32
        assert shared.full((2,), 7, device=DEV).dtype == torch.int64
        assert shared.full((2,), True, device=DEV).dtype == torch.bool
        torch.manual_seed(0)
        u = shared.rand(4096, device=DEV)
        n = shared.randn(4096, dtype=torch.bfloat16, device=DEV)
        assert bool((u >= 0).all() and (u < 1).all()) and float(u.std()) > 0.2
        assert n.dtype == torch.bfloat16 and 0.85 < float(n.float().std()) < 1.15
        torch.manual_seed(0)
        assert torch.equal(shared.rand(4096, device=DEV).torch(), u.torch()), "torch's seed"
        assert shared.arange(5, device=DEV).tolist() == [0, 1, 2, 3, 4]
        assert shared.arange(5, device=DEV).dtype == torch.int64
        assert shared.arange(2, 10, 3, device=DEV).tolist() == [2, 5, 8]
        assert shared.arange(5.0, device=DEV).dtype == torch.get_default_dtype()
        assert shared.arange(4, dtype=torch.int32, device=DEV).dtype == torch.int32
        like = shared.empty_like(z)
        assert (like.shape, like.dtype, like.devices) == (z.shape, z.dtype, z.devices)
        assert shared.empty_like(z, dtype=torch.float16).dtype == torch.float16
        t = torch.zeros(4, 5, dtype=torch.float16)
        assert (shared.empty_like(t, device=DEV).shape, shared.empty_like(t, device=DEV).dtype) \\
            == ((4, 5), torch.float16)
        assert float(shared.ones_like(z).min()) == 1.0 and shared.ones_like(z).devices == (DEV,)
        assert float(shared.full_like(z, 2.0).max()) == 2.0
        assert float(shared.zeros_like(o).abs().max()) == 0.0
        src = torch.arange(32, dtype=torch.float32) * 3.0
        copied = shared.from_tensor(src, device=DEV)
        assert torch.equal(copied.torch(), src) and copied.data_ptr() != src.data_ptr()
        src[0] = -1.0
        assert float(copied[0]) == 0.0, "from_tensor copies"
        halved = shared.from_tensor(src, dtype=torch.bfloat16, device=DEV)
        assert halved.dtype == torch.bfloat16 and float(halved[1]) == 3.0
        npy = shared.from_tensor(np.arange(6, dtype=np.int32).reshape(2, 3), device=DEV)
        assert npy.dtype == np.int32 and npy.numpy().tolist() == [[0, 1, 2], [3, 4, 5]]

        # the tensor surface reaches the buffer's own memory
        buf = shared.zeros(8, 4, device=DEV)
        assert (buf.ndim, buf.numel(), buf.nbytes, buf.element_size()) == (2, 32, 128, 4)
        assert len(buf) == 8 and tuple(next(iter(buf)).shape) == (4,)
        assert tuple(buf.T.shape) == (4, 8) and not hasattr(buf, "no_such_thing")
        assert bool(((buf + 1) == 1).all()) and bool(((2 * buf) == 0).all())
        assert (buf.fill_(1), buf.__iadd__(1))[1] is buf and float(buf.torch().min()) == 2.0
        torch.add(torch.full((8, 4), 2.0), torch.full((8, 4), 2.0), out=buf)
        assert float(buf.numpy().min()) == 4.0
        array = np.asarray(buf)
        buf[0, 0] = 99.0
        assert float(array[0, 0]) == 99.0 and array.ctypes.data == buf.data_ptr()

        # DLPack: capsules over the same memory, never a copy
        import ctypes
        name = ctypes.pythonapi.PyCapsule_GetName
        name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        assert name(buf.__dlpack__(max_version=None)) == b"dltensor"
        assert name(buf.__dlpack__(max_version=(1, 0))) == b"dltensor_versioned"
        assert buf.__dlpack_device__() == (shared.kDLCPU, 0)
        shared_t = torch.from_dlpack(buf)
        assert shared_t.data_ptr() == buf.data_ptr()
        assert np.from_dlpack(buf).ctypes.data == buf.data_ptr()
        assert torch.from_dlpack(n).dtype == torch.bfloat16
        for kwargs in ({"copy": True}, {"dl_device": (shared.kDLROCM, 0)}):
            try:
                buf.__dlpack__(**kwargs)
            except BufferError:
                pass
            else:
                raise AssertionError(kwargs)

        # per-runtime handles
        if RUNTIME == "xrt":
            bo = buf.bo
            address = ctypes.addressof(ctypes.c_char.from_buffer(bo.map()))
            out["bo"] = [address == buf.host_ptr, bo.size()]
        else:
            out["aie_ptr"] = buf.aie_ptr() == buf.host_ptr
        for handle in ("bo", "aie_ptr", "device_ptr"):
            try:
                value = getattr(buf, handle)
                value() if callable(value) else value
            except shared.SharedBufferError as e:
                out.setdefault("refused", []).append(handle)
        for spec in ("hip:0", OTHER):
            try:
                buf.share_with(spec)
            except shared.SharedBufferError as e:
                out.setdefault("share_refused", []).append(spec)
        assert buf.share_with(DEV) is buf

        # lifetime
        with shared.zeros(4, device=DEV) as scoped:
            scoped.fill_(1)
            inside = float(scoped.sum())
        assert inside == 4.0 and scoped.host_ptr is None and scoped.devices == ()
        assert repr(scoped) == "SharedBuffer(closed)"
        scoped.close()
        for call in (lambda: scoped.device, lambda: scoped.share_with(DEV), scoped.numpy):
            try:
                call()
            except shared.SharedBufferError:
                pass
            else:
                raise AssertionError("a closed buffer answered")
        print(json.dumps(out))
        """,
        runtime,
        harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME=runtime, AMD_TRITON_NPU_TARGET="npu2"),
        tmp_path,
    )
    dev = f"{runtime}:0"
    assert result["repr"] == f"SharedBuffer(shape=(2, 3), dtype=torch.float32, devices=[{dev}])"
    if runtime == "xrt":
        assert result["bo"] == [True, 128], "the buffer object maps the buffer's own memory"
        assert result["refused"] == ["aie_ptr", "device_ptr"]
    else:
        assert result["aie_ptr"] is True
        assert result["refused"] == ["bo", "device_ptr"]
    assert result["share_refused"] == ["hip:0", "hsa:0" if runtime == "xrt" else "xrt:0"]


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_closed_buffers_memory_is_reused_only_when_nothing_views_it(runtime: str, tmp_path: Path):
    result, _ = run_shared(
        """
        import torch
        out = {}
        shared.zeros(1, device=DEV).close()  # opens the runtime (which allocates its own)
        shared.empty_cache()
        before = shared.cache_stats()
        alive = live_device_buffers()
        first = shared.empty(256, 256, dtype=torch.float32, device=DEV)
        pages = first.host_ptr
        first.close()
        out["pooled"] = shared.cache_stats()["buffers"]
        out["runtime_kept_it"] = live_device_buffers() - alive
        second = shared.empty(256, 256, dtype=torch.float32, device=DEV)
        out["same_pages"] = second.host_ptr == pages
        out["hits"] = shared.cache_stats()["hits"] - before["hits"]
        second.close()
        # the same bytes serve another shape, described by the request and zeroed by zeros()
        reshaped = shared.zeros(1024, 64, dtype=torch.float32, device=DEV)
        out["reshaped"] = [reshaped.host_ptr == pages, list(reshaped.shape),
                           float(reshaped.abs().max())]
        reshaped.fill_(5.0)
        reshaped.close()
        # another size or another device never reuses them
        hits = shared.cache_stats()["hits"]
        shared.empty(128, 256, dtype=torch.float32, device=DEV).close()
        out["other_size_hit"] = shared.cache_stats()["hits"] - hits
        # live buffers never share memory
        a = shared.zeros(32, 32, device=DEV); b = shared.zeros(32, 32, device=DEV)
        a.fill_(1)
        out["live_distinct"] = [a.host_ptr != b.host_ptr, float(b.abs().max())]
        a.close(); b.close()
        # memory something still views is not pooled: a numpy view, a tensor, a capsule, a bo
        views = []
        for take in (lambda x: x.numpy(), lambda x: x.torch(), lambda x: torch.from_dlpack(x),
                     lambda x: x[1:]):
            x = shared.zeros(1000, device=DEV)
            views.append(take(x))
            held = shared.cache_stats()["buffers"]
            x.close()
            assert shared.cache_stats()["buffers"] == held, "viewed memory was pooled"
            views[-1] += 1  # still the buffer's memory, still usable
        out["views_sum"] = [float(np.asarray(v).sum()) for v in views]
        # closing through the garbage collector pools too
        for _ in range(3):
            shared.zeros(777, device=DEV)
        out["gc_hits"] = shared.cache_stats()["hits"]
        # empty_cache gives the memory back to the runtime
        held = live_device_buffers()
        out["held"] = shared.cache_stats()["buffers"]
        shared.empty_cache()
        out["freed"] = held - live_device_buffers()
        out["after_empty"] = shared.cache_stats()["buffers"]
        shared.set_cache_enabled(False)
        hits = shared.cache_stats()["hits"]
        shared.empty(64, 64, device=DEV).close()
        shared.empty(64, 64, device=DEV).close()
        out["disabled"] = [shared.cache_stats()["buffers"], shared.cache_stats()["hits"] - hits]
        print(json.dumps(out))
        """,
        runtime,
        harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME=runtime, AMD_TRITON_NPU_TARGET="npu2"),
        tmp_path,
    )
    assert result["pooled"] == 1 and result["runtime_kept_it"] == 1
    assert result["same_pages"] and result["hits"] == 1
    assert result["reshaped"] == [True, [1024, 64], 0.0]
    assert result["other_size_hit"] == 0
    assert result["live_distinct"] == [True, 0.0]
    assert result["views_sum"] == [1000.0, 1000.0, 1000.0, 999.0]
    assert result["gc_hits"] >= 2, "a collected buffer's memory must serve the next request"
    assert result["held"] >= 1 and result["freed"] == result["held"]
    assert result["after_empty"] == 0
    assert result["disabled"] == [0, 0]


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_launches_over_factory_buffers_compute_in_place(runtime: str, tmp_path: Path):
    result, _ = run_shared(
        """
        import torch
        out = {}
        torch.manual_seed(1)
        x = shared.randn(N, device=DEV)
        y = shared.from_tensor(torch.linspace(-1, 1, N), device=DEV)
        z = shared.empty_like(x)
        hsa0, all0 = shared.hsa_dispatch_counts(), shared.dispatch_counts()
        add_kernel[GRID](x, y, z, N, BLOCK=BLOCK)
        assert torch.equal(z.torch(), x.torch() + y.torch())
        hsa1, all1 = shared.hsa_dispatch_counts(), shared.dispatch_counts()
        out["hsa"] = [hsa1[0] - hsa0[0], hsa1[1] - hsa0[1]]
        out["all"] = [all1[0] - all0[0], all1[1] - all0[1]]
        # the buffers' torch views are the same memory (upstream's HSA benchmark passes them)
        z.zero_()
        before = shared.dispatch_counts()
        add_kernel[GRID](x.torch(), y.torch(), z.torch(), N, BLOCK=BLOCK)
        assert torch.equal(z.torch(), x.torch() + y.torch())
        out["torch_views"] = delta(before)
        # int32 and a torch tensor mixed in: the tensor is staged
        i = shared.arange(N, dtype=torch.int32, device=DEV)
        j = torch.full((N,), 5, dtype=torch.int32)
        r = shared.zeros_like(i)
        before = shared.dispatch_counts()
        add_kernel[GRID](i, j, r, N, BLOCK=BLOCK)
        assert r.tolist() == list(range(5, N + 5))
        out["mixed"] = delta(before)
        # the result lands in pooled memory as well
        z.close()
        again = shared.empty(N, device=DEV)
        out["reused"] = shared.cache_stats()["hits"] >= 1
        add_kernel[GRID](x, y, again, N, BLOCK=BLOCK)
        assert torch.equal(again.torch(), x.torch() + y.torch())
        print(json.dumps(out))
        """,
        runtime,
        harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME=runtime, AMD_TRITON_NPU_TARGET="npu2"),
        tmp_path,
    )
    # upstream's hsa_dispatch_counts counts HSA launches only; dispatch_counts both runtimes
    assert result["all"] == [3, 0]
    assert result["hsa"] == ([3, 0] if runtime == "hsa" else [0, 0])
    assert result["torch_views"] == [3, 0]
    assert result["mixed"] == [2, 1]
    assert result["reused"]
