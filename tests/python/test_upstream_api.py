"""The rest of upstream's public surface (issue 16, items 1, 2 and 6): triton-shared's
``CPUDriver`` through Triton's interpreter, ``driver_scope``, names of upstream's driver
module, ``NPUDriver.do_bench``, ``NPULauncher.output_format``, ``MultiLaunchBuilder.ops`` and
``.cache_key``, the lifted block-size cap, context releasers, and ``triton-npu test-examples``
on a folder of scripts written against upstream's API (tests/upstream-api).

Everything that depends on import order or process-wide state runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, harness_env, run_python
from test_chain import run_chain_script

UPSTREAM_API = REPO / "tests" / "upstream-api"


def _json_run(code: str, env: dict | None = None, cwd: Path | None = None) -> dict:
    r = run_python(textwrap.dedent(code), env=env, cwd=cwd)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _json_script(tmp_path: Path, body: str, env: dict, cwd: Path | None = None) -> dict:
    """Runs `body` as a script file (Triton reads a @jit function's source)."""
    script = tmp_path / f"script_{len(list(tmp_path.glob('script_*.py')))}.py"
    script.write_text(textwrap.dedent(body))
    r = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


KERNELS = """
import json, os, sys
import torch
import triton
import triton.language as tl

@triton.jit
def scale(x):
    return x * 2.0

@triton.jit
def centred_kernel(X, Y, n_elements: tl.constexpr, BLOCK: tl.constexpr):
    # a helper @jit function, a mask and a reduction along the block
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n_elements
    x = tl.load(X + offs, mask=m, other=0.0)
    mean = tl.sum(x, axis=0) / BLOCK
    tl.store(Y + offs, scale(x - mean), mask=m)

def reference(x, block):
    padded = torch.zeros(triton.cdiv(x.numel(), block) * block)
    padded[: x.numel()] = x
    blocks = padded.view(-1, block)
    return ((blocks - blocks.mean(dim=1, keepdim=True)) * 2.0).reshape(-1)[: x.numel()]
"""


# --- item 1: triton-shared's CPUDriver ------------------------------------------------------


def test_benchmark_py_imports_cpu_driver_and_runs_kernels_in_tritons_interpreter(tmp_path: Path):
    # Upstream's benchmark.py unchanged (tests/upstream-api/benchmark.py), no harness at all:
    # the CPU backend compiles nothing.
    work = tmp_path / "examples"
    (work / "centred").mkdir(parents=True)
    shutil.copy(UPSTREAM_API / "benchmark.py", work / "benchmark.py")
    env = {k: v for k, v in harness_env(tmp_path).items() if not k.startswith("MLIR_AIR")}
    env["TRITON_SHARED_OPT_PATH"] = str(tmp_path / "no-triton-shared-opt")
    result = _json_script(
        work / "centred",
        KERNELS
        + """
sys.path.append(os.path.abspath(".."))
import benchmark
import triton_npu.cpu_driver
from triton.backends.triton_shared import driver as shared_driver

benchmark.select_cpu_backend()
x = torch.randn(3000)
y = torch.full_like(x, 99.0)
returned = centred_kernel[(triton.cdiv(3000, 1024),)](x, y, 3000, BLOCK=1024)
torch.testing.assert_close(y, reference(x, 1024), atol=1e-4, rtol=1e-4)
active = triton.runtime.driver.active
print(json.dumps({
    "same_module": shared_driver is triton_npu.cpu_driver,
    "same_class": benchmark.CPUDriver is triton_npu.cpu_driver.CPUDriver,
    "target": active.get_current_target().backend,
    "returned": [type(returned).__name__, returned.name],
}))
""",
        env,
        cwd=work / "centred",
    )
    assert result == {
        "same_module": True,
        "same_class": True,
        "target": "cpu",
        "returned": ["InterpretedKernel", "centred_kernel"],
    }


# centred_kernel reduces along its block: the default elementwise schedule cannot serve it (the
# real mlir-air refuses it, and so does the harness), so it gets a row-wise schedule, as
# upstream's examples bring theirs: the reductions example's, with its tile (two rows per core)
# made the whole block, since centred_kernel's block is one row of 1024 (two elements per core
# would ask for a herd of 512 cores, which aircc cannot place).
def centred_schedule(tmp_path: Path) -> str:
    text = (REPO / "tests" / "examples" / "reductions" / "transform_aie2p.mlir").read_text()
    assert text.count("tile_sizes [2]") == 1
    path = tmp_path / "centred_transform_aie2p.mlir"
    path.write_text(text.replace("tile_sizes [2]", "tile_sizes [1024]"))
    return str(path)


def centred_env(tmp_path: Path, runtime: str) -> dict:
    """The harness environment of a script running the centred kernels under `runtime`."""
    return harness_env(
        tmp_path,
        AMD_TRITON_NPU_RUNTIME=runtime,
        AIR_TRANSFORM_TILING_SCRIPT=centred_schedule(tmp_path),
    )


def test_cpu_and_npu_backends_alternate_in_one_script(tmp_path: Path):
    env = centred_env(tmp_path, "hsa")
    result = _json_script(
        tmp_path,
        KERNELS
        + """
from triton.backends.amd_triton_npu.driver import NPUDriver, get_npu_cache_dir
from triton.backends.triton_shared.driver import CPUDriver

x = torch.randn(2048)
outs = {}
for name in ("cpu", "npu", "cpu-again"):
    triton.runtime.driver.set_active(CPUDriver() if name.startswith("cpu") else NPUDriver())
    y = torch.zeros_like(x)
    k = centred_kernel[(2,)](x, y, 2048, BLOCK=1024)
    outs[name] = (y, k)
torch.testing.assert_close(outs["cpu"][0], reference(x, 1024), atol=1e-4, rtol=1e-4)
torch.testing.assert_close(outs["npu"][0], outs["cpu"][0], atol=1e-3, rtol=1e-3)
torch.testing.assert_close(outs["cpu-again"][0], outs["cpu"][0])
# As upstream's multi_drivers example reads it from a CPU launch:
ttsharedir = outs["cpu"][1].asm["ttsharedir"]
print(json.dumps({
    "npu_compiled": get_npu_cache_dir(outs["npu"][1]) is not None,
    "cpu_returned": [type(outs[n][1]).__name__ for n in ("cpu", "cpu-again")],
    "cpu_asm": b"func.func @centred_kernel" in ttsharedir,
    "still_cpu": type(triton.runtime.driver.active).__name__,
}))
""",
        env,
    )
    assert result == {
        "npu_compiled": True,
        "cpu_returned": ["InterpretedKernel", "InterpretedKernel"],
        "cpu_asm": True,
        "still_cpu": "CPUDriver",
    }


def test_bfloat16_kernels_compute_on_the_cpu_backend(tmp_path: Path):
    # Triton's interpreter computes on bf16 bit patterns; the CPU driver hands it float32
    # mirrors (of whole storages: views, offsets and aliases keep their meaning).
    result = _json_script(
        tmp_path,
        """
import json
import torch
import triton
import triton.language as tl
from triton.backends.triton_shared.driver import CPUDriver

@triton.jit
def add_kernel(X, Y, O, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(O + o, tl.load(X + o) + tl.load(Y + o))

@triton.jit
def dot_kernel(A, B, C, N: tl.constexpr, sam, sak, sbk, sbn):
    r = tl.arange(0, N)
    a = tl.load(A + r[:, None] * sam + r[None, :] * sak)
    b = tl.load(B + r[:, None] * sbk + r[None, :] * sbn)
    tl.store(C + r[:, None] * N + r[None, :], tl.dot(a, b))

triton.runtime.driver.set_active(CPUDriver())
torch.manual_seed(0)
buf = torch.randn(200, dtype=torch.bfloat16)
x, y = buf[3:67], buf[100:164]          # views into one storage, at offsets
expected = (x.float() + y.float()).bfloat16()
add_kernel[(1,)](x, y, buf[130:194], 64)  # the output overlaps y's storage
big = torch.randn(16, 32, dtype=torch.bfloat16)
a = big[:, 8:24]                          # strided view
big_before = big.clone()
b = torch.randn(16, 16, dtype=torch.bfloat16).t()
c = torch.empty(16, 16, dtype=torch.float32)
dot_kernel[(1,)](a, b, c, 16, a.stride(0), a.stride(1), b.stride(0), b.stride(1))
print(json.dumps({
    "add": torch.equal(buf[130:194], expected),
    "dot": float((c - a.float() @ b.float()).abs().max()) < 1e-3,
    "untouched": torch.equal(big, big_before),
}))
""",
        harness_env(tmp_path),
    )
    assert result == {"add": True, "dot": True, "untouched": True}


def test_autotuned_kernels_run_and_benchmark_on_the_cpu_backend(tmp_path: Path):
    result = _json_script(
        tmp_path,
        """
import json
import torch
import triton
import triton.language as tl
from triton.backends.triton_shared.driver import CPUDriver

@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 512})],
                 key=["n"])
@triton.jit
def double_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Y + offs, tl.load(X + offs, mask=m) * 2.0, mask=m)

cpu = CPUDriver()
triton.runtime.driver.set_active(cpu)
x = torch.randn(1000)
y = torch.zeros_like(x)
double_kernel[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, y, 1000)
torch.testing.assert_close(y, x * 2)
ms = cpu.do_bench(lambda: None, warmup=1, rep=1, quantiles=[0.5])
print(json.dumps({"best": double_kernel.best_config.kwargs["BLOCK"] in (256, 512),
                  "ms": ms >= 0}))
""",
        harness_env(tmp_path),
    )
    assert result == {"best": True, "ms": True}


def test_an_installed_triton_shared_is_never_shadowed(tmp_path: Path):
    real = tmp_path / "site" / "triton_shared"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("")
    (real / "driver.py").write_text("class CPUDriver:\n    origin = 'triton-shared'\n")
    result = _json_run(
        f"""
        import json
        import triton, triton.backends
        # As if triton-shared were installed into triton's backends directory.
        triton.backends.__path__.append({str(real.parent)!r})
        from triton.backends.triton_shared.driver import CPUDriver
        print(json.dumps({{"origin": getattr(CPUDriver, "origin", "triton-npu")}}))
        """
    )
    assert result == {"origin": "triton-shared"}


def test_the_stand_in_answers_only_triton_shareds_driver():
    result = _json_run(
        """
        import json
        import triton
        try:
            import triton.backends.triton_shared.compiler
            error = None
        except ModuleNotFoundError as e:
            error = e.name
        print(json.dumps({"error": error}))
        """
    )
    assert result == {"error": "triton.backends.triton_shared.compiler"}


# --- item 2: upstream's names -------------------------------------------------------------


def test_driver_module_exposes_upstreams_names():
    result = _json_run(
        """
        import json
        import triton
        from triton.backends.amd_triton_npu import driver
        from triton.backends.amd_triton_npu.driver import (
            UnsupportedNPUDeviceError, npu_config, context_releasers, release_external_contexts)
        import triton_npu.config, triton_npu.errors
        npu_config.runtime = "xrt"
        print(json.dumps({
            "config": npu_config is triton_npu.config.npu_config,
            "runtime_seen": triton_npu.config.npu_config.runtime,
            "error": UnsupportedNPUDeviceError is triton_npu.errors.UnsupportedNPUDeviceError,
            "runtime_error": issubclass(UnsupportedNPUDeviceError, RuntimeError),
            "releasers": context_releasers == [] and callable(release_external_contexts),
        }))
        """
    )
    assert result == {
        "config": True,
        "runtime_seen": "xrt",
        "error": True,
        "runtime_error": True,
        "releasers": True,
    }


def test_an_unknown_npu_raises_unsupported_npu_device_error_from_the_driver_module(
    tmp_path: Path,
):
    env = harness_env(tmp_path, NPU_HARNESS_XRT_DEVICE="NPU Futurepoint")
    result = _json_run(
        """
        import json
        from triton.backends.amd_triton_npu.driver import (
            UnsupportedNPUDeviceError, detect_npu_version)
        try:
            detect_npu_version("xrt")
            caught = None
        except UnsupportedNPUDeviceError as e:
            caught = str(e)
        print(json.dumps({"caught": caught}))
        """,
        env=env,
    )
    assert result["caught"] and "Futurepoint" in result["caught"]


def test_release_external_contexts_calls_every_releaser_and_survives_failures():
    result = _json_run(
        """
        import json
        from triton.backends.amd_triton_npu import driver
        calls = []
        def broken():
            calls.append("broken")
            raise OSError("already gone")
        driver.context_releasers.extend([lambda: calls.append("a"), broken,
                                         lambda: calls.append("b")])
        released = driver.release_external_contexts()
        print(json.dumps({"released": released, "calls": calls}))
        """
    )
    assert result == {"released": 2, "calls": ["a", "broken", "b"]}


def test_a_chain_short_of_hardware_contexts_calls_the_context_releasers(tmp_path: Path):
    # The XRT stand-in allows no hardware context: the native runtime's own idle sessions
    # cannot help, so the chain asks the application's releasers once, then gives up.
    env = harness_env(tmp_path, NPU_HARNESS_FAULT="hwctx_exhausted", NPU_HARNESS_MAX_HWCTX="0")
    result = run_chain_script(
        """
        from triton_npu.errors import HardwareContextsExhaustedError
        from triton.backends.amd_triton_npu.driver import context_releasers
        x, y = rand(1), rand(2)
        ins = [x, y, np.empty(N, np.float32), np.empty(N, np.float32)]
        released = []
        context_releasers.append(lambda: released.append("external"))
        try:
            add_mul_chain("refused").run(ins, intermediate_indices={2})
            refused = None
        except HardwareContextsExhaustedError as e:
            refused = type(e).__name__
        print(json.dumps({"refused": refused, "released": released}))
        """,
        "xrt",
        env,
    )
    assert result == {"refused": "HardwareContextsExhaustedError", "released": ["external"]}


def _threads_script() -> str:
    return """
        import json, threading
        import triton
        from triton.backends.amd_triton_npu.driver import NPUDriver
        from triton.backends.amd_triton_npu.driver_scope import driver_scope
        from triton.backends.triton_shared.driver import CPUDriver
        config = triton.runtime.driver
        out = {}
        # Nothing selected: the scope selects an NPU driver and restores "nothing".
        with driver_scope("npu") as d:
            out["inside"] = type(config._active).__name__
            out["yielded"] = d is config._active
        out["after_none"] = config._active is None
        # An NPU driver already active: the scope changes nothing.
        npu = NPUDriver()
        config.set_active(npu)
        with driver_scope("npu") as d:
            out["kept"] = d is npu and config._active is npu
        # Another driver active, and the block raises: it is restored all the same.
        cpu = CPUDriver()
        config.set_active(cpu)
        try:
            with driver_scope("npu"):
                raise KeyError("boom")
        except KeyError:
            pass
        out["restored"] = config._active is cpu
        # Another thread's scope leaves this thread's selection alone.
        seen = []
        def other():
            with driver_scope("npu"):
                seen.append(type(config._active).__name__)
        t = threading.Thread(target=other)
        t.start(); t.join()
        out["other_thread"] = seen
        out["main_unchanged"] = config._active is cpu
        try:
            with driver_scope("tpu"):
                pass
        except ValueError as e:
            out["bad_kind"] = str(e)
        print(json.dumps(out))
        """


def test_driver_scope_selects_and_restores_exactly():
    result = _json_run(_threads_script())
    bad_kind = result.pop("bad_kind")
    assert result == {
        "inside": "NPUDriver",
        "yielded": True,
        "after_none": True,
        "kept": True,
        "restored": True,
        "other_thread": ["NPUDriver"],
        "main_unchanged": True,
    }
    assert "'tpu'" in bad_kind and "npu" in bad_kind and "gpu" in bad_kind


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_do_bench_is_a_method_of_the_driver_and_times_device_work(runtime: str, tmp_path: Path):
    env = centred_env(tmp_path, runtime)
    result = _json_script(
        tmp_path,
        KERNELS
        + """
from triton.backends.amd_triton_npu.driver import NPUDriver
npu = NPUDriver()
triton.runtime.driver.set_active(npu)
x = torch.randn(2048)
y = torch.zeros_like(x)
g = torch.zeros(3)
g.grad = torch.ones(3)
launch = lambda: centred_kernel[(2,)](x, y, 2048, BLOCK=1024)
mean = npu.do_bench(launch, warmup=1, rep=1, grad_to_none=[g])
low_high = npu.do_bench(launch, warmup=1, rep=1, quantiles=[0.2, 0.8])
every = npu.get_benchmarker()(launch, warmup=1, rep=1, return_mode="all")
try:
    npu.do_bench(launch, return_mode="sum")
    bad = None
except ValueError as e:
    bad = str(e)
print(json.dumps({
    "mean": mean > 0, "quantiles": len(low_high), "all": len(every) >= 5,
    "grad_cleared": g.grad is None,
    "benchmarker_is_method": npu.get_benchmarker() == npu.do_bench,
    "bad": bad,
}))
""",
        env,
    )
    assert result.pop("bad") and result == {
        "mean": True,
        "quantiles": 2,
        "all": True,
        "grad_cleared": True,
        "benchmarker_is_method": True,
    }


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_last_dispatched_module_relaunches_the_last_kernel_without_the_jit(
    runtime: str, tmp_path: Path
):
    # Upstream's gpt2/qwen2_5 kernels keep `_last_dispatched_module` per shape and call its
    # `launch(gridX, gridY, gridZ, None, None, None, None, *args, *constexprs)` afterwards.
    env = centred_env(tmp_path, runtime)
    result = _json_script(
        tmp_path,
        KERNELS
        + """
from triton.backends.amd_triton_npu import driver
from triton.backends.amd_triton_npu.driver import NPUDriver
triton.runtime.driver.set_active(NPUDriver())
before = driver._last_dispatched_module
x = torch.randn(2048)
y = torch.zeros_like(x)
centred_kernel[(2,)](x, y, 2048, BLOCK=1024)
from triton.backends.amd_triton_npu.driver import _last_dispatched_module as mod
first_ok = torch.allclose(y, reference(x, 1024), atol=1e-5)
x2 = torch.randn(2048) * 3
y2 = torch.zeros_like(x2)
mod.launch(2, 1, 1, None, None, None, None, x2, y2, 2048, 1024)
# The fast path runs the kernel again (another launch of the same grid), not Triton's JIT.
again = driver._last_dispatched_module
try:
    mod.launch(2, 1, 1, None, None, None, None, x2, y2)
    short = None
except TypeError as e:
    short = str(e)
try:
    mod.launch(2, 1)
    no_grid = None
except TypeError as e:
    no_grid = str(e)
print(json.dumps({
    "before": before is None, "first": first_ok,
    "fast": torch.allclose(y2, reference(x2, 1024), atol=1e-5),
    "same_launcher": again.launcher is mod.launcher,
    "short": short, "no_grid": no_grid,
}))
""",
        env,
    )
    assert "centred_kernel takes 4 arguments" in result.pop("short")
    assert "launch expects (gridX, gridY, gridZ" in result.pop("no_grid")
    assert result == {"before": True, "first": True, "fast": True, "same_launcher": True}


@pytest.mark.parametrize(
    ("device", "configured", "expected"),
    [
        ("NPU Strix", None, "elf"),
        ("NPU Phoenix", None, "xclbin"),
        ("NPU Strix", "xclbin", "xclbin"),
        ("NPU Phoenix", "elf", "error"),
    ],
)
def test_launcher_output_format_follows_upstreams_rules(
    device: str, configured: str | None, expected: str, tmp_path: Path
):
    env = harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME="xrt", NPU_HARNESS_XRT_DEVICE=device)
    if configured:
        env["AMD_TRITON_NPU_OUTPUT_FORMAT"] = configured
    result = _json_script(
        tmp_path,
        KERNELS
        + """
from triton.backends.amd_triton_npu.driver import NPUDriver, get_output_format
from triton.backends.amd_triton_npu.config import config_context
triton.runtime.driver.set_active(NPUDriver())
x = torch.randn(2048)
with config_context(compile_only=True):
    k = centred_kernel.warmup(x, x, 2048, BLOCK=1024, grid=(2,))
    k._init_handles()
def read(f):
    try:
        return f()
    except RuntimeError as e:
        return "error: " + str(e)
print(json.dumps({"launcher": read(lambda: k._run.output_format),
                  "function": read(get_output_format)}))
""",
        env,
    )
    if expected == "error":
        assert result["launcher"].startswith("error: ") and "npu1" in result["launcher"]
        assert result["function"] == result["launcher"]
    else:
        assert result == {"launcher": expected, "function": expected}


def test_block_size_cap_is_lifted_to_2_22_as_upstream_does():
    result = _json_run(
        """
        import json
        import triton
        import triton.language as tl
        from triton._utils import validate_block_shape
        import triton._utils as utils
        validate_block_shape([2048, 2048])   # 2**22 elements
        try:
            validate_block_shape([4096, 2048])
            over = None
        except ValueError as e:
            over = str(e)
        print(json.dumps({"utils": utils.TRITON_MAX_TENSOR_NUMEL,
                          "language": tl.TRITON_MAX_TENSOR_NUMEL, "over": over}))
        """
    )
    assert result["utils"] == result["language"] == 1 << 22
    assert "4194304" in result["over"]


# --- MultiLaunchBuilder.ops and .cache_key ------------------------------------------------

OP = """#map = affine_map<(d0) -> (d0)>
module {{
  func.func @{name}(%arg0: memref<*xf32> {{tt.divisibility = 16 : i32}}, %arg1: memref<*xf32>, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32) {{
    return
  }}
}}
"""


def test_builder_ops_list_what_was_added(tmp_path: Path):
    from triton_npu.multilaunch import ChainOp, MultiLaunchBuilder

    script = tmp_path / "t.mlir"
    script.write_text("// schedule\n")
    b = MultiLaunchBuilder("two")
    assert b.ops == []
    b.add_op(OP.format(name="relu"), (4,), {0: 0, 1: 1})
    b.add_op(OP.format(name="neg").encode(), (2, 1, 1), {0: 1, 1: 2}, transform_script=script)
    ops = b.ops
    assert all(isinstance(op, ChainOp) for op in ops)
    assert [(op.prefix, op.kernel, op.grid, op.arg_map) for op in ops] == [
        ("op0", "relu", [4, 1, 1], {0: 0, 1: 1}),
        ("op1", "neg", [2, 1, 1], {0: 1, 1: 2}),
    ]
    assert ops[0].arg_types == ["memref<*xf32>", "memref<*xf32>"]
    assert ops[0].transform_script is None and ops[1].transform_script == str(script)
    assert "func.func @neg" in ops[1].asm_src


def test_builder_cache_key_depends_on_the_ops_format_and_npu():
    from triton_npu.multilaunch import MultiLaunchBuilder

    def builder(grid: int) -> MultiLaunchBuilder:
        b = MultiLaunchBuilder("keyed")
        b.add_op(OP.format(name="relu"), (grid,), {0: 0, 1: 1})
        return b

    key = builder(4).cache_key("elf", "npu2")
    assert len(key) == 64 and int(key, 16) >= 0
    assert builder(4).cache_key("elf", "npu2", text="ignored") == key
    assert builder(8).cache_key("elf", "npu2") != key
    assert builder(4).cache_key("xclbin", "npu2") != key
    assert builder(4).cache_key("elf", "npu1") != key
    with pytest.raises(ValueError, match="output format"):
        builder(4).cache_key("hsaco", "npu2")
    with pytest.raises(ValueError, match="NPU version"):
        builder(4).cache_key("elf", "npu9")


def test_builder_cache_key_names_the_entry_compile_uses(tmp_path: Path):
    result = run_chain_script(
        """
        t = torch.empty(N)
        chain = add_mul_chain("keyed")
        chain._build()
        key = chain._builder.cache_key()
        print(json.dumps({"key": key, "elf": str(chain._compiled.elf_path),
                          "explicit": chain._builder.cache_key("elf", "npu2") == key}))
        """,
        "xrt",
        harness_env(tmp_path),
    )
    assert result["explicit"]
    assert result["key"] in Path(result["elf"]).parts


# --- item 6: test-examples on scripts written against upstream's API ----------------------


def _test_examples(args: list[str], env: dict) -> subprocess.CompletedProcess:
    tmp = Path(env["AMD_TRITON_NPU_CACHE_DIR"]).parent / "tmp"
    tmp.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "triton_npu", "test-examples", *args],
        capture_output=True,
        text=True,
        env={**env, "TMPDIR": str(tmp)},
        timeout=1200,
    )


def _rows(stdout: str) -> dict[str, tuple[str, str]]:
    """`example/script` → (result, reason or first error line) from the summary table."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("EXAMPLE "))
    rows = {}
    for line in lines[start + 1 :]:
        parts = line.split(maxsplit=5)
        if len(parts) < 5 or " script(s): " in line:
            break
        rows[f"{parts[0]}/{parts[1]}"] = (parts[2], parts[5] if len(parts) > 5 else "")
    return rows


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_a_folder_of_upstream_api_scripts_runs_unedited(runtime: str, tmp_path: Path):
    env = harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME=runtime)
    r = _test_examples([str(UPSTREAM_API), "--device", "aie2p"], env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = _rows(r.stdout)
    assert rows == {
        "axpy/axpy.py": ("PASS", ""),
        "gelu/gelu.py": ("PASS", ""),
        "load_2d_block/-": (
            "SKIP",
            "skipped by default, as upstream's runner does; select it with -t load_2d_block",
        ),
        "relu/relu.py": ("PASS", ""),
        "vec-add/vec-add.py": ("PASS", ""),
    }, r.stdout
    assert "5 script(s): 4 passed, 1 skipped, 0 failed, 0 timed out" in r.stdout


def test_selected_default_skipped_examples_run_and_failures_show_their_error(tmp_path: Path):
    env = harness_env(tmp_path)
    r = _test_examples([str(UPSTREAM_API), "-t", "load_2d_block", "--device", "aie2p"], env)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = _rows(r.stdout)
    assert rows == {
        "load_2d_block/test_load_2d_tensor_block.py": (
            "FAIL",
            "load_2d_block ran although upstream's runner skips it by default",
        )
    }
    assert "FAIL: exit status 1" in r.stdout


def test_an_assertion_failure_reports_its_exception_line(tmp_path: Path):
    examples = tmp_path / "examples"
    shutil.copytree(UPSTREAM_API, examples)
    script = examples / "axpy" / "axpy.py"
    script.write_text(script.read_text().replace("2.0 * x + y, atol", "3.0 * x + y, atol"))
    r = _test_examples([str(examples), "-t", "axpy", "--device", "aie2p"], harness_env(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    result, error = _rows(r.stdout)["axpy/axpy.py"]
    assert (result, error) == ("FAIL", "AssertionError: Tensor-likes are not close!")


def test_npu1_skips_what_upstream_cannot_run_scriptless(tmp_path: Path):
    env = harness_env(tmp_path, NPU_HARNESS_AGENT="aie2", NPU_HARNESS_XRT_DEVICE="NPU Phoenix")
    r = _test_examples([str(UPSTREAM_API), "-t", "gelu", "--device", "aie2"], env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _rows(r.stdout) == {
        "gelu/-": (
            "SKIP",
            "no transform_aie2.mlir and non-matmul; built-in default transform fails to "
            "legalize on npu1",
        )
    }


MODEL_SCRIPT = """
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.append(os.path.abspath(".."))
import benchmark


@triton.jit
def add_kernel(A, B, C, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(C + offs, tl.load(A + offs) + tl.load(B + offs))


def load_model():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained("tiny")


if __name__ == "__main__":
    print("model:", load_model())
    benchmark.select_npu_backend()
    a, b = torch.randn(1024), torch.randn(1024)
    c = torch.empty_like(a)
    add_kernel[(1,)](a, b, c, BLOCK=1024)
    torch.testing.assert_close(c, a + b)
"""


def test_model_scripts_are_skipped_without_transformers_and_run_with_it(tmp_path: Path):
    examples = tmp_path / "examples"
    (examples / "tiny_llm").mkdir(parents=True)
    shutil.copy(UPSTREAM_API / "benchmark.py", examples / "benchmark.py")
    shutil.copy(UPSTREAM_API / "vec-add" / "transform_aie2p.mlir", examples / "tiny_llm")
    (examples / "tiny_llm" / "tiny_inference.py").write_text(MODEL_SCRIPT)
    env = harness_env(tmp_path)
    probe = subprocess.run([sys.executable, "-c", "import transformers"], env=env)
    if probe.returncode == 0:
        pytest.skip("transformers is installed here: the skip cannot be observed")
    args = [str(examples), "-t", "tiny_llm", "--device", "aie2p"]
    r = _test_examples(args, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _rows(r.stdout) == {
        "tiny_llm/tiny_inference.py": (
            "SKIP",
            "needs transformers and model weights: pip install triton-npu[models] (the "
            "weights download from the Hugging Face Hub at first run)",
        )
    }, r.stdout
    # With a `transformers` importable (a stand-in package: this machine has neither the
    # package nor weights), the same script runs and passes.
    fake = tmp_path / "site" / "transformers"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "class AutoModelForCausalLM:\n"
        "    @staticmethod\n"
        "    def from_pretrained(name):\n"
        "        return name\n"
    )
    r = _test_examples(args, {**env, "PYTHONPATH": str(fake.parent)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert _rows(r.stdout) == {"tiny_llm/tiny_inference.py": ("PASS", "")}, r.stdout


def test_upstream_api_scripts_import_only_upstreams_names():
    for script in UPSTREAM_API.glob("*/*.py"):
        text = script.read_text()
        assert "import triton_npu" not in text and "from triton_npu" not in text, script
    assert (UPSTREAM_API / "benchmark.py").is_file()
    for d in (p for p in UPSTREAM_API.iterdir() if p.is_dir()):
        assert (d / "transform_aie2p.mlir").is_file(), d
