"""@triton.jit kernels through the whole pipeline on the conformance harness.

Each case runs in its own process: the HSA runtime is one per process and is configured from
the environment at first use, as in production.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import harness_env

KERNELS = textwrap.dedent(
    """
    import sys, threading
    import numpy as np
    import torch
    import triton
    import triton.language as tl
    from triton_npu import NPUDriver

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    @triton.jit
    def sub_mul_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        y = tl.load(y_ptr + offs, mask=m)
        tl.store(out_ptr + offs, (x - y) * y, mask=m)

    @triton.jit
    def relu_kernel(x_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)

    @triton.jit
    def axpy_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, ALPHA: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, ALPHA * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    @triton.jit
    def add_unmasked_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        # n is a plain scalar: the launcher parses it (and drops it); no store depends on it.
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))

    @triton.jit
    def rowsum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs), axis=0))

    @triton.jit
    def scale_kernel(x_ptr, out_ptr, alpha, BLOCK: tl.constexpr):
        # alpha is not a constexpr: the launcher drops it, the NPU never receives it.
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * alpha)

    triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
    N = 4096
    """
)


def run_script(text: str, runtime: str, env: dict) -> list[dict]:
    """Runs `text` as a script with the runtime as its argument; the JSON lines it printed."""
    # Triton reads a @jit function's source, so the script must be a file.
    work = Path(env["AMD_TRITON_NPU_CACHE_DIR"]).parent
    work.mkdir(parents=True, exist_ok=True)
    script = work / f"kernels_{len(list(work.glob('kernels_*.py')))}.py"
    script.write_text(text)
    proc = subprocess.run(
        [sys.executable, str(script), runtime],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def run_kernels(body: str, runtime: str, env: dict) -> dict:
    return run_script(KERNELS + textwrap.dedent(body), runtime, env)[-1]


CASES = {
    "hsa-npu2": ("hsa", {}),
    "hsa-npu1": ("hsa", {"NPU_HARNESS_AGENT": "aie2"}),
    "xrt-npu2": ("xrt", {}),
    "xrt-npu1": ("xrt", {"NPU_HARNESS_XRT_DEVICE": "NPU Phoenix"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_elementwise_kernels_compute_real_results(case: str, tmp_path: Path):
    runtime, extra = CASES[case]
    result = run_kernels(
        """
        torch.manual_seed(0)
        x, y = torch.randn(N), torch.randn(N)
        x0, y0 = x.clone(), y.clone()
        out = torch.full((N,), 123.0)
        k = add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        torch.testing.assert_close(out, x + y)
        assert torch.equal(x, x0) and torch.equal(y, y0), "inputs must be untouched"
        out2 = torch.empty(N)
        sub_mul_kernel[(N // 1024,)](x, y, out2, N, BLOCK=1024)
        torch.testing.assert_close(out2, (x - y) * y)
        out3 = torch.empty(N)
        relu_kernel[(N // 1024,)](x, out3, N, BLOCK=1024)
        np.testing.assert_allclose(out3.numpy(), np.maximum(x.numpy(), 0))
        out4 = torch.empty(N)
        axpy_kernel[(N // 1024,)](x, y, out4, N, ALPHA=2.5, BLOCK=1024)
        torch.testing.assert_close(out4, 2.5 * x + y)
        # a second launch with new data reuses the loaded kernel
        x.copy_(torch.randn(N)); add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        torch.testing.assert_close(out, x + y)
        # integer tensors
        a = torch.arange(N, dtype=torch.int32); b = torch.full((N,), 7, dtype=torch.int32)
        c = torch.zeros(N, dtype=torch.int32)
        add_kernel[(N // 1024,)](a, b, c, N, BLOCK=1024)
        assert torch.equal(c, a + b)
        from triton_npu.backend.driver import get_npu_cache_dir
        import json, os
        print(json.dumps({"cache": get_npu_cache_dir(k), "files": sorted(os.listdir(get_npu_cache_dir(k)))}))
        """,
        runtime,
        harness_env(tmp_path, **extra),
    )
    files = set(result["files"])
    if runtime == "hsa":
        assert "kernel.hsaco" in files
    target_files = (
        {"aie.elf", "elf_kernel_name.txt"} if "npu2" in case else {"aie.xclbin", "insts.bin"}
    )
    assert target_files <= files, files


def test_a_dropped_argument_changes_the_result(tmp_path: Path):
    # Swapping two inputs of a non-commutative kernel must change the output: the data path
    # really carries each argument to its own place.
    result = run_kernels(
        """
        x, y = torch.randn(N), torch.randn(N)
        a, b = torch.empty(N), torch.empty(N)
        sub_mul_kernel[(N // 1024,)](x, y, a, N, BLOCK=1024)
        sub_mul_kernel[(N // 1024,)](y, x, b, N, BLOCK=1024)
        import json; print(json.dumps({"same": bool(torch.allclose(a, b))}))
        """,
        "hsa",
        harness_env(tmp_path),
    )
    assert result["same"] is False


def test_warm_cache_in_a_new_process_runs_no_tool(tmp_path: Path):
    log = tmp_path / "tools.jsonl"
    env = harness_env(tmp_path, NPU_HARNESS_LOG=str(log))
    body = """
        x, y = torch.randn(N), torch.randn(N); out = torch.empty(N)
        add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        torch.testing.assert_close(out, x + y)
        import json; print(json.dumps({}))
        """
    run_kernels(body, "hsa", env)
    tools = [json.loads(line)["tool"] for line in log.read_text().splitlines()]
    assert {"triton-shared-opt", "air-opt", "aircc"} <= set(tools), tools
    cold = len(tools)
    run_kernels(body, "hsa", env)
    warm = log.read_text().splitlines()[cold:]
    assert warm == [], f"a warm cache ran tools: {warm}"


def test_a_new_grid_is_a_new_build(tmp_path: Path):
    log = tmp_path / "tools.jsonl"
    run_kernels(
        """
        x, y = torch.randn(N), torch.randn(N); out = torch.empty(N)
        add_kernel[(4,)](x, y, out, N, BLOCK=1024)
        add_kernel[(2,)](x, y, out, N, BLOCK=2048)
        torch.testing.assert_close(out, x + y)
        import json; print(json.dumps({}))
        """,
        "xrt",
        harness_env(tmp_path, NPU_HARNESS_LOG=str(log)),
    )
    airccs = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(1 for t in airccs if t["tool"] == "aircc" and "--version" not in t["argv"]) == 2


def test_compile_only_needs_no_runtime(tmp_path: Path):
    empty = tmp_path / "no-rocr"
    empty.mkdir()
    result = run_kernels(
        """
        import os
        x, y = torch.ones(N), torch.ones(N); out = torch.zeros(N)
        k = add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        assert torch.count_nonzero(out) == 0, "compile-only must not dispatch"
        from triton_npu.backend.driver import get_npu_cache_dir
        import json; print(json.dumps({"files": sorted(os.listdir(get_npu_cache_dir(k)))}))
        """,
        "hsa",
        harness_env(
            tmp_path,
            AMD_TRITON_NPU_COMPILE_ONLY="1",
            AMD_NPU_ROCR_PATH=str(empty),
            AMD_TRITON_NPU_TARGET="npu2",
            AMD_TRITON_NPU_XRT_SHIM=str(empty / "missing.so"),
        ),
    )
    assert {"aie.elf", "kernel.hsaco"} <= set(result["files"])


def test_launcher_argument_errors_and_hooks(tmp_path: Path):
    result = run_kernels(
        """
        import json
        x, y = torch.randn(N), torch.randn(N); out = torch.empty(N)
        k = add_unmasked_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        launcher = k._run
        calls = []
        enter = lambda md: calls.append(("enter", md))
        leave = lambda md: calls.append(("exit", md))
        def launch(*args, grid=(4, 1, 1)):
            launcher(*grid, None, k.function, k.packed_metadata, "md", enter, leave, *args)
        out.zero_()
        launch(x, y, out, N, 1024)
        assert calls == [("enter", "md"), ("exit", "md")], calls
        torch.testing.assert_close(out, x + y)
        class Duck:  # only data_ptr(), dtype and shape: the size comes from shape × itemsize
            def __init__(self, t):
                self.t, self.dtype, self.shape = t, t.dtype, tuple(t.shape)
            def data_ptr(self):
                return self.t.data_ptr()
        out.zero_()
        launch(Duck(x), Duck(y), Duck(out), N, 1024)
        torch.testing.assert_close(out, x + y)
        errors = {}
        for label, args in {
            "none": (x, None, out, N, 1024),
            "count": (x, y, out, N),
            "scalar": (x, y, out, "many", 1024),
            "noncontig": (torch.randn(2 * N)[::2], y, out, N, 1024),
            "object": (x, object(), out, N, 1024),
            "empty": (torch.empty(0), y, out, N, 1024),
        }.items():
            try:
                launch(*args)
                errors[label] = None
            except Exception as e:
                errors[label] = [type(e).__name__, str(e)]
        launch(x, y, out, N, 1024, grid=(0, 1, 1))  # an empty grid dispatches nothing
        print(json.dumps(errors))
        """,
        "hsa",
        harness_env(tmp_path),
    )
    assert result["none"][0] == "TypeError" and "y_ptr" in result["none"][1]
    assert result["count"][0] == "TypeError" and "takes 5 arguments" in result["count"][1]
    assert result["scalar"][0] == "TypeError" and "argument 3 (n)" in result["scalar"][1]
    assert "integer" in result["scalar"][1]
    assert result["noncontig"][0] == "ValueError" and "contiguous" in result["noncontig"][1]
    assert result["object"][0] == "TypeError" and "y_ptr" in result["object"][1]
    assert result["empty"][0] == "ValueError" and "x_ptr" in result["empty"][1]


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_a_tensor_changed_in_place_after_a_launch_is_read_again(runtime: str, tmp_path: Path):
    """A launch remembers a torch tensor's length and contiguity and re-reads only its address
    and version: an in-place change of its shape or strides must still be seen."""
    result = run_kernels(
        """
        import json
        x, y = torch.randn(64, 64), torch.randn(64, 64); out = torch.empty(64, 64)
        k = add_unmasked_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        def launch(*args):
            k._run(N // 1024, 1, 1, None, k.function, k.packed_metadata, None, None, None, *args)
        def outcome(*args):
            try:
                launch(*args, N, 1024)
                return None
            except Exception as e:
                return [type(e).__name__, str(e)]
        seen = {}
        launch(x, y, out, N, 1024)  # remembered
        x.t_()  # the same memory, transposed in place: no longer contiguous
        seen["transposed"] = outcome(x, y, out)
        x.t_()
        out.zero_()
        seen["back"] = outcome(x, y, out)
        seen["back_right"] = bool(torch.equal(out, x + y))
        out.zero_()
        out.resize_(32, 64)  # the same address, half the length: half the results come back
        seen["shrunk"] = outcome(x, y, out)
        out.resize_(64, 64)  # the same storage again, whose second half was not handed over
        seen["first_half_right"] = bool(torch.equal(out[:32], (x + y)[:32]))
        seen["second_half_untouched"] = bool(torch.count_nonzero(out[32:]) == 0)
        y.copy_(x)
        seen["regrown"] = outcome(x, y, out)
        seen["regrown_right"] = bool(torch.equal(out, x + x))
        print(json.dumps(seen))
        """,
        runtime,
        harness_env(tmp_path),
    )
    assert result["transposed"][0] == "ValueError", result
    assert "argument 0 (x_ptr)" in result["transposed"][1]
    assert "contiguous" in result["transposed"][1]
    assert result["back"] is None and result["back_right"], result
    # Half an output for a kernel that writes all of it: the harness's HSA agent refuses the
    # dispatch, its XRT device writes the half it was given; read at its old length, the
    # whole storage would have been handed over and written.
    if runtime == "hsa":
        assert result["shrunk"][0] == "LaunchError", result
    else:
        assert result["shrunk"] is None and result["first_half_right"], result
    assert result["second_half_untouched"], result
    assert result["regrown"] is None and result["regrown_right"], result


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_tensor_subclasses_are_read_by_name_and_reassigned_data_is_seen(
    runtime: str, tmp_path: Path
):
    """An exact torch.Tensor's data_ptr() and _version are read through torch's own
    descriptors, found once; a subclass may override either, so it is read by name, and its
    override decides where the kernel writes. A tensor whose `.data` is reassigned keeps its
    version but shows a new address, and the launch follows it."""
    result = run_kernels(
        """
        import json
        elsewhere = torch.zeros(N)

        class Redirected(torch.Tensor):
            # Points the launch at another tensor's memory (same length and dtype).
            def data_ptr(self):
                return elsewhere.data_ptr()

        x, y = torch.randn(N), torch.randn(N)
        out = torch.zeros(N).as_subclass(Redirected)
        k = add_unmasked_kernel[(N // 1024,)](x, y, torch.empty(N), N, BLOCK=1024)
        def launch(*args):
            k._run(N // 1024, 1, 1, None, k.function, k.packed_metadata, None, None, None,
                   *args, N, 1024)
        seen = {}
        launch(x, y, out)
        launch(x, y, out)  # again, now that the launcher knows the object
        plain = out.as_subclass(torch.Tensor)
        seen["override_followed"] = bool(torch.equal(elsewhere, x + y))
        seen["subclass_untouched"] = bool(torch.count_nonzero(plain) == 0)

        target = torch.zeros(N)
        launch(x, y, target)  # remembered at its address and version
        version = target._version
        old = target.data
        target.data = torch.zeros(N)  # new memory, the same version
        seen["same_version"] = target._version == version
        old.zero_()
        launch(x, y, target)
        seen["new_memory_written"] = bool(torch.equal(target, x + y))
        seen["old_memory_left"] = bool(torch.count_nonzero(old) == 0)
        print(json.dumps(seen))
        """,
        runtime,
        harness_env(tmp_path),
    )
    assert result == {
        "override_followed": True,
        "subclass_untouched": True,
        "same_version": True,
        "new_memory_written": True,
        "old_memory_left": True,
    }, result


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_tensor_reads_answer_as_torch_does_under_modes_and_without_storage(
    runtime: str, tmp_path: Path
):
    """An exact tensor's data_ptr() and _version are read by calling torch's own C functions
    behind its descriptors, so what torch does inside them still happens: an active
    TorchFunctionMode that answers the output's data_ptr() decides where the kernel writes, as
    `tensor.data_ptr()` would; a tensor without storage (sparse) is refused with torch's own
    reason, naming the argument; a KeyboardInterrupt raised by a data_ptr() is raised as is."""
    result = run_kernels(
        """
        import json
        from torch.overrides import TorchFunctionMode
        elsewhere = torch.zeros(N)

        class Redirect(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if func is torch.Tensor.data_ptr and args[0] is out:
                    return elsewhere.data_ptr()
                return func(*args, **(kwargs or {}))

        x, y, out = torch.randn(N), torch.randn(N), torch.zeros(N)
        k = add_unmasked_kernel[(N // 1024,)](x, y, torch.empty(N), N, BLOCK=1024)
        def launch(*args):
            k._run(N // 1024, 1, 1, None, k.function, k.packed_metadata, None, None, None,
                   *args, N, 1024)
        seen = {}
        with Redirect():
            launch(x, y, out)
        seen["mode_followed"] = bool(torch.equal(elsewhere, x + y))
        seen["out_untouched"] = bool(torch.count_nonzero(out) == 0)
        launch(x, y, out)  # the mode is gone: out itself again
        seen["out_written"] = bool(torch.equal(out, x + y))
        sparse = torch.sparse_coo_tensor([[0]], [1.0], (N,))
        try:
            launch(x, sparse, out)
            seen["sparse"] = None
        except Exception as e:
            seen["sparse"] = [type(e).__name__, str(e)]

        class Interrupted(torch.Tensor):
            def data_ptr(self):
                raise KeyboardInterrupt

        try:
            launch(x, torch.randn(N).as_subclass(Interrupted), out)
            seen["interrupt"] = None
        except BaseException as e:
            seen["interrupt"] = type(e).__name__
        print(json.dumps(seen))
        """,
        runtime,
        harness_env(tmp_path),
    )
    assert result["mode_followed"] and result["out_untouched"], result
    assert result["out_written"], result
    kind, message = result["sparse"]
    assert kind == "TypeError", result
    assert "argument 1 (y_ptr)" in message and "doesn't have storage" in message, result
    # Ctrl-C inside a data_ptr() written in Python is raised as it was, not as a bad argument.
    assert result["interrupt"] == "KeyboardInterrupt", result


def test_a_warm_hsa_launch_of_sixteen_same_sized_tensors_allocates_nothing(tmp_path: Path):
    """Each pool allocation is an ioctl in ROCr: once a kernel has run, launching it again must
    reuse its staging buffers, however many of its arguments share a size (the staging pool
    kept eight per size, so the other eight were allocated and freed at every launch)."""
    params = ", ".join(f"p{i}" for i in range(16))
    loads = " + ".join(f"tl.load(p{i} + offs)" for i in range(1, 16))
    result = run_kernels(
        f"""
        import ctypes, json, os

        @triton.jit
        def sum16({params}, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(p0 + offs, {loads})

        lib = ctypes.CDLL(os.path.join(os.environ["AMD_NPU_ROCR_PATH"], "lib",
                                       "libhsa-runtime64.so"))
        def allocations_made():
            stats = (ctypes.c_uint64 * 64)()  # room for later fields
            assert lib.npu_harness_hsa_stats(ctypes.byref(stats)) == 0
            return stats[12]
        tensors = [torch.full((64,), float(i)) for i in range(16)]
        sum16[(1,)](*tensors, BLOCK=64)  # compiles, loads and stages
        first = allocations_made()
        for _ in range(3):
            sum16[(1,)](*tensors, BLOCK=64)
        print(json.dumps({{"first": first, "after": allocations_made(),
                          "out": tensors[0][0].item()}}))
        """,
        "hsa",
        harness_env(tmp_path),
    )
    assert result["first"] > 16, result  # the count is live: the first launch allocated
    assert result["after"] == result["first"], result
    assert result["out"] == sum(range(1, 16)), result


def test_one_launcher_per_kernel_and_compile_only_is_not_remembered(tmp_path: Path):
    result = run_kernels(
        """
        import json
        from triton_npu.config import config_context
        from triton_npu.shared import dispatch_counts
        built = []
        real = triton.runtime.driver.active.launcher_cls
        def counting(src, md):
            built.append(md.name)
            return real(src, md)
        triton.runtime.driver.active.launcher_cls = counting
        x, y, out = torch.randn(N), torch.randn(N), torch.zeros(N)
        with config_context(compile_only=True):
            add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        assert torch.count_nonzero(out) == 0
        for _ in range(5):
            add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        torch.testing.assert_close(out, x + y)
        print(json.dumps({"built": built, "counts": dispatch_counts()}))
        """,
        "xrt",
        harness_env(tmp_path),
    )
    assert result["built"] == ["add_kernel"], "Triton must keep the first launcher"
    assert sum(result["counts"]) == 5 * 3, "five real dispatches of three buffers"


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_two_threads_launch_different_kernels(runtime: str, tmp_path: Path):
    run_kernels(
        """
        import json
        failures = []
        def work(kernel, ref):
            try:
                for _ in range(20):
                    x, y = torch.randn(N), torch.randn(N); out = torch.empty(N)
                    kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
                    torch.testing.assert_close(out, ref(x, y))
            except Exception as e:
                failures.append(repr(e))
        ts = [threading.Thread(target=work, args=(add_kernel, lambda x, y: x + y)),
              threading.Thread(target=work, args=(sub_mul_kernel, lambda x, y: (x - y) * y))]
        [t.start() for t in ts]; [t.join() for t in ts]
        assert not failures, failures
        print(json.dumps({}))
        """,
        runtime,
        harness_env(tmp_path),
    )


def test_a_kernel_the_harness_cannot_compute_fails_loudly(tmp_path: Path):
    result = run_kernels(
        """
        import json
        x = torch.randn(1024); out = torch.zeros(1024)
        try:
            scale_kernel[(1,)](x, out, 2.0, BLOCK=1024)
            print(json.dumps({"error": None}))
        except RuntimeError as e:
            print(json.dumps({"error": str(e), "untouched": bool((out == 0.0).all())}))
        """,
        "hsa",
        harness_env(tmp_path),
    )
    assert result["error"] and result["untouched"]


def test_reductions_compute(tmp_path: Path):
    # A reduction needs a schedule of its own: the elementwise default makes no loop to map
    # to a herd, and the stand-in air-opt refuses that as mlir-air does.
    schedule = Path(__file__).resolve().parents[1] / "examples/reductions/transform_aie2p.mlir"
    result = run_kernels(
        """
        import json
        x = torch.randn(1024); out = torch.zeros(1)
        rowsum_kernel[(1,)](x, out, BLOCK=1024)
        print(json.dumps({"got": float(out[0]), "want": float(x.sum())}))
        """,
        "hsa",
        harness_env(tmp_path, AIR_TRANSFORM_TILING_SCRIPT=str(schedule)),
    )
    assert abs(result["got"] - result["want"]) < 1e-3, result


def test_benchmarker_reports_device_time(tmp_path: Path):
    result = run_kernels(
        """
        import json
        x, y = torch.randn(N), torch.randn(N); out = torch.empty(N)
        bench = triton.runtime.driver.active.get_benchmarker()
        fn = lambda: add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        mean = bench(fn, warmup=1, rep=2)
        q = bench(fn, warmup=1, rep=2, quantiles=[0.5, 0.2, 0.8])
        from triton_npu.config import config_context
        try:
            with config_context(compile_only=True):
                bench(fn, warmup=1, rep=2)
            nothing = None
        except RuntimeError as e:
            nothing = str(e)
        print(json.dumps({"mean": mean, "q": q, "nothing": nothing}))
        """,
        "xrt",
        harness_env(tmp_path),
    )
    assert result["mean"] > 0
    assert len(result["q"]) == 3 and result["q"][1] <= result["q"][0] <= result["q"][2]
    assert result["nothing"] and "dispatched no NPU kernel" in result["nothing"]


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_loaded_kernels_hold_no_file_each_and_survive_eviction(runtime: str, tmp_path: Path):
    # Each loaded kernel used to keep its cache entry's manifest open (one descriptor per
    # kernel: a process ran out of them after ~1,000 kernels). Once loaded, a kernel needs
    # nothing on disk, so clearing the cache under it must not stop it either.
    result = run_kernels(
        """
        import os, subprocess
        def fds(): return len(os.listdir("/proc/self/fd"))
        x, y = torch.randn(N), torch.randn(N)
        out = torch.zeros(N)
        add_kernel[(1,)](x, y, out, 1, BLOCK=4096)
        before = fds()
        for n in range(2, 14):
            o = torch.zeros(N)
            add_kernel[(1,)](x, y, o, n, BLOCK=4096)
            assert torch.equal(o[:n], (x + y)[:n]) and not o[n:].any(), n
        grown = fds() - before
        cleared = subprocess.run([sys.executable, "-m", "triton_npu", "cache", "clear", "--yes"],
                                 capture_output=True, text=True)
        o = torch.zeros(N)
        add_kernel[(1,)](x, y, o, 7, BLOCK=4096)
        print(json.dumps({"grown": grown, "clear_rc": cleared.returncode,
                          "clear": cleared.stdout + cleared.stderr,
                          "right": bool(torch.equal(o[:7], (x + y)[:7]))}))
        """.replace("import os, subprocess", "import json, os, subprocess"),
        runtime,
        harness_env(tmp_path),
    )
    assert result["grown"] < 6, f"12 more loaded kernels hold {result['grown']} more descriptors"
    assert result["clear_rc"] == 0, result["clear"]
    assert result["right"], "a loaded kernel stopped working when its entry was evicted"


# Registered before anything imports the backend's native module, so that it runs after the
# backend's own exit handler (atexit runs handlers last-registered first).
EXIT_PROBE = textwrap.dedent(
    """
    import atexit, ctypes, json, os, sys

    def device_state():
        # The harness devices' own counts (test-only exports).
        if sys.argv[1] == "hsa":
            lib = ctypes.CDLL(os.path.join(os.environ["AMD_NPU_ROCR_PATH"], "lib",
                                           "libhsa-runtime64.so"))
            stats = (ctypes.c_uint64 * 64)()  # room for later fields
            assert lib.npu_harness_hsa_stats(ctypes.byref(stats)) == 0
            return {"queues": stats[5], "executables": stats[6], "heap": stats[3],
                    "initialisations": stats[11]}
        lib = ctypes.CDLL(os.environ["NPU_HARNESS_XRT_DEVICE_LIB"])
        stats = (ctypes.c_uint64 * 64)()
        assert lib.npu_harness_xrt_stats(ctypes.byref(stats)) == 0
        return {"contexts": stats[3], "bos": stats[6], "devices_opened": stats[0]}

    atexit.register(lambda: print(json.dumps({"at_exit": device_state()}), flush=True))
    """
)


def device_state_around(body: str, runtime: str, tmp_path: Path) -> tuple[dict, dict]:
    """The harness device's counts after `body` (which prints them as "running") and at exit."""
    lines = run_script(EXIT_PROBE + KERNELS + textwrap.dedent(body), runtime, harness_env(tmp_path))
    running = next(r["running"] for r in lines if "running" in r)
    at_exit = next(r["at_exit"] for r in lines if "at_exit" in r)
    return running, at_exit


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_device_state_is_released_at_exit(runtime: str, tmp_path: Path):
    # The runtimes live for the whole process; without an exit handler the HSA queue (and its
    # hardware context), the loaded executables and XRT's hardware contexts stayed until the
    # driver noticed the process was gone.
    running, at_exit = device_state_around(
        """
        x, y = torch.randn(N), torch.randn(N)
        for n in (1, 2, 3):
            out = torch.zeros(N)
            add_kernel[(1,)](x, y, out, n, BLOCK=4096)
            assert torch.equal(out[:n], (x + y)[:n])
        print(json.dumps({"running": device_state()}), flush=True)
        """,
        runtime,
        tmp_path,
    )
    if runtime == "hsa":
        assert running["queues"] == 1 and running["executables"] >= 3, running
        assert at_exit["queues"] == 0 and at_exit["executables"] == 0, at_exit
    else:
        assert running["contexts"] >= 1, running
        assert at_exit["contexts"] == 0, at_exit


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_a_launching_process_opens_its_runtime_once(runtime: str, tmp_path: Path):
    # Target detection asked ROCr for the agent name (hsa_init, then hsa_shut_down) and then
    # the launch initialised it again; under XRT device 0 was opened for its name and again for
    # the launch. A real hsa_init walks the kernel driver's topology and a real device open
    # reads sysfs: the first launch of every process paid both twice.
    running, _ = device_state_around(
        """
        x, y, out = torch.randn(N), torch.randn(N), torch.zeros(N)
        add_kernel[(1,)](x, y, out, 8, BLOCK=4096)
        assert torch.equal(out[:8], (x + y)[:8])
        print(json.dumps({"running": device_state()}), flush=True)
        """,
        runtime,
        tmp_path,
    )
    if runtime == "hsa":
        assert running["initialisations"] == 1, running
    else:
        assert running["devices_opened"] == 1, running


OPENED_BY = {"hsa": "initialisations", "xrt": "devices_opened"}


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_compiling_opens_the_runtime_before_the_first_launch(runtime: str, tmp_path: Path):
    # Opening the runtime (loading ROCr or XRT, initialising it, the queue) used to start at
    # the first launch and add to it; it now starts on a helper thread when a kernel compiles,
    # and the launch uses that same runtime. Creating the driver alone opens nothing.
    running, _ = device_state_around(
        """
        import time
        key = {"hsa": "initialisations", "xrt": "devices_opened"}[sys.argv[1]]
        time.sleep(0.3)
        after_driver = device_state()[key]
        x, y, out = torch.randn(N), torch.randn(N), torch.zeros(N)
        add_kernel.warmup(x, y, out, 8, BLOCK=4096, grid=(1,))
        deadline = time.monotonic() + 20
        while device_state()[key] == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        before = device_state()[key]
        add_kernel[(1,)](x, y, out, 8, BLOCK=4096)
        assert torch.equal(out[:8], (x + y)[:8])
        print(json.dumps({"running": {"after_driver": after_driver, "before": before,
                                      "after": device_state()[key]}}), flush=True)
        """,
        runtime,
        tmp_path,
    )
    assert running == {"after_driver": 0, "before": 1, "after": 1}, running


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_a_child_forked_after_the_runtime_opened_is_refused_and_the_parent_goes_on(
    runtime: str, tmp_path: Path
):
    # ROCr and XRT cannot be shared across fork: the child would use its parent's queue and
    # device (or wait forever for the lock of an open in progress). It gets an error that says
    # so; a driver created before the fork and never used opens the runtime in the child.
    lines = run_script(
        KERNELS
        + textwrap.dedent(
            """
            import json, os
            x, y = torch.randn(N), torch.randn(N)
            out = torch.zeros(N)
            add_kernel[(1,)](x, y, out, 8, BLOCK=4096)
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                try:
                    add_kernel[(1,)](x, y, torch.zeros(N), 8, BLOCK=4096)
                    message = "launched"
                except Exception as e:
                    message = f"{type(e).__name__}: {e}"
                os.write(write, message.encode())
                os._exit(0)
            os.close(write)
            child = b""
            while chunk := os.read(read, 65536):
                child += chunk
            os.waitpid(pid, 0)
            out2 = torch.zeros(N)
            add_kernel[(1,)](x, y, out2, 8, BLOCK=4096)
            print(json.dumps({"child": child.decode(),
                              "parent": bool(torch.equal(out2[:8], (x + y)[:8]))}))
            """
        ),
        runtime,
        harness_env(tmp_path),
    )
    result = lines[-1]
    assert result["parent"], result
    assert "forked from process" in result["child"], result
    assert "cannot be shared across fork" in result["child"], result


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_a_compile_only_driver_never_opens_its_runtime(runtime: str, tmp_path: Path):
    # The target is given: without it, detecting it would ask the device (hsa_init and
    # hsa_shut_down; a device open under XRT), as upstream does.
    env = harness_env(tmp_path, AMD_TRITON_NPU_COMPILE_ONLY="1", AMD_TRITON_NPU_TARGET="npu2")
    lines = run_script(
        EXIT_PROBE
        + KERNELS
        + textwrap.dedent(
            """
            import time
            x, y, out = torch.randn(N), torch.randn(N), torch.zeros(N)
            add_kernel[(1,)](x, y, out, 8, BLOCK=4096)
            time.sleep(0.5)  # a helper thread, had one started, would have opened it by now
            print(json.dumps({"running": device_state()}), flush=True)
            """
        ),
        runtime,
        env,
    )
    running = next(r["running"] for r in lines if "running" in r)
    assert running[OPENED_BY[runtime]] == 0, running
