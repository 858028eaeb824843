"""The no-op device libraries `make bench` times host overhead against (benches/noop/, built by
benches/noop_libs.py): found through the ordinary discovery of an installed runtime
(AMD_NPU_ROCR_PATH for ROCr, XILINX_XRT for XRT's coreutil under our shim), they let a kernel
be compiled, loaded and launched with no NPU_HARNESS_* variable and nothing computed (the
output keeps what it held; the harness device would compute it), and the benchmark's model of
upstream's launcher launches against them too. Not timed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import REPO, harness_env, run_doctor, run_file
from test_upstream_launcher_model import LAUNCH as MODEL_LAUNCH

sys.path.insert(0, str(REPO / "benches"))
import noop_libs  # noqa: E402
import upstream_model  # noqa: E402
from launch_bench import noop_environment  # noqa: E402

# Compiles and launches (first launch: compile, load, dispatch; then a warm one), and says
# which of the process's mapped files is the runtime library in use.
LAUNCH = """
import json, sys
import torch, triton, triton.language as tl
from triton_npu import NPUDriver

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))

triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
x, y, out = torch.ones(16), torch.ones(16), torch.full((16,), 7.0)
k = add_kernel[(1,)](x, y, out, 16, BLOCK=16)
add_kernel[(1,)](x, y, out, 16, BLOCK=16)
with open("/proc/self/maps") as f:
    mapped = sorted({line.split()[-1] for line in f if sys.argv[2] in line})
print(json.dumps({"out": out.tolist(), "entry": k._run.npu_cache_dir, "mapped": mapped}))
"""


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    reason = noop_libs.missing()
    if reason is not None:
        pytest.skip(reason)
    return noop_libs.build(tmp_path_factory.mktemp("noop"))


def noop_env(tmp_path: Path, runtime: str, libs: dict) -> dict:
    """The benchmark's environment for its host-overhead runs: the harness's tools, the no-op
    runtime selected as an installed one is, and no NPU_HARNESS_* variable at all."""
    env = harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME=runtime)
    env = noop_environment(libs, runtime, env)
    assert not [k for k in env if k.startswith("NPU_HARNESS_")]
    return env


def test_the_libraries_are_laid_out_as_installed_runtimes_and_rebuilt_only_on_change(
    libs: dict, tmp_path: Path
):
    assert (libs["rocr"] / "lib" / "libhsa-runtime64.so").resolve() == libs["hsa_library"]
    assert (libs["rocr"] / "include" / "hsa" / "hsa_ext_amd_aie.h").is_file()
    assert libs["xrt_library"] == libs["xrt"] / "lib" / "libxrt_coreutil.so.2"
    stamps = {k: libs[k].stat().st_mtime_ns for k in ("hsa_library", "xrt_library")}
    again = noop_libs.build(libs["rocr"].parent)
    assert {k: again[k].stat().st_mtime_ns for k in stamps} == stamps, "rebuilt unchanged"


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_a_launch_completes_on_the_noop_libraries_without_computing(
    runtime: str, libs: dict, tmp_path: Path
):
    env = noop_env(tmp_path, runtime, libs)
    library = libs["hsa_library"] if runtime == "hsa" else libs["xrt_library"]
    got = json.loads(run_file(tmp_path, "launch.py", LAUNCH, [runtime, str(library.parent)], env))
    assert got["out"] == [7.0] * 16, "something computed the kernel: not the no-op library"
    assert str(library) in got["mapped"], got["mapped"]

    # The driver's runtime report names the library discovery found.
    unset = tuple(k for k in os.environ if k not in env)
    _, report = run_doctor(env, drop=unset)
    name = "HSA (hsa)" if runtime == "hsa" else "XRT (xrt)"
    (component,) = [c for c in report["components"] if c["component"] == name]
    assert component["status"] == "ok", component
    named = f"ROCr: {libs['rocr']}/lib/" if runtime == "hsa" else f"XRT coreutil: {library};"
    assert named in component["detail"], component
    assert report["target"] == "npu2", report["target"]

    # The model of upstream's launcher, linked to the same library, launches on it too.
    reason = upstream_model.missing(runtime)
    if reason is not None:
        pytest.skip(f"the model of upstream's launcher: {reason}")
    prefix = libs["rocr"] if runtime == "hsa" else libs["xrt"]
    module = upstream_model.build(runtime, 3, 2, prefix, tmp_path / "model")
    artifact, kernel = upstream_model.artifacts(runtime, got["entry"])
    launched = run_file(tmp_path, "model.py", MODEL_LAUNCH, [str(module), artifact, kernel], env)
    assert json.loads(launched) == [7.0] * 16
