"""`triton_npu.errors`: each exception class raised from its real cause.

Every case runs an upstream-style kernel in a fresh process on the conformance harness with
one thing broken, and checks the class of what the launch raised (and that it is still the
standard class scripts written for upstream catch).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import harness_env
from triton_npu import errors

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    import triton
    import triton.language as tl
    from triton_npu import NPUDriver

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))

    triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
    x, y = torch.randn(1024), torch.randn(1024)
    out = torch.zeros(1024)
    try:
        add_kernel[(1,)](x, y, out, N=1024, BLOCK=1024)
        print(json.dumps({"raised": None}))
    except Exception as e:
        print(json.dumps({"raised": type(e).__name__,
                          "mro": [c.__name__ for c in type(e).__mro__],
                          "message": str(e)}))
    """
)


def launch(tmp_path: Path, runtime: str, **env: str) -> dict:
    script = tmp_path / "launch.py"
    script.write_text(SCRIPT)
    full_env = harness_env(tmp_path, **env)
    proc = subprocess.run(
        [sys.executable, str(script), runtime],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_classes_cover_every_kind_the_native_core_raises():
    from triton_npu._loader import native

    assert set(native().error_kinds()) == set(errors.KIND_CLASSES)
    for cls in errors.KIND_CLASSES.values():
        assert issubclass(cls, errors.NPUError)
        assert issubclass(cls, RuntimeError)  # upstream's scripts catch RuntimeError


def test_the_harness_kernel_runs_when_nothing_is_broken(tmp_path: Path):
    assert launch(tmp_path, "hsa")["raised"] is None


def test_an_invalid_setting_is_a_config_error(tmp_path: Path):
    r = launch(tmp_path, "xrt", AMD_TRITON_NPU_OUTPUT_FORMAT="tarball")
    assert r["raised"] == "NPUConfigError", r
    assert "ValueError" in r["mro"]
    assert "AMD_TRITON_NPU_OUTPUT_FORMAT" in r["message"]


def test_a_missing_toolchain(tmp_path: Path):
    empty = tmp_path / "no-mlir-air"
    empty.mkdir()
    r = launch(tmp_path, "xrt", MLIR_AIR_INSTALL_DIR=str(empty), PATH=os.defpath)
    assert r["raised"] == "ToolchainNotFoundError", r
    assert "air-opt" in r["message"] and str(empty) in r["message"]


def test_a_failing_tool_is_a_compile_error(tmp_path: Path):
    r = launch(tmp_path, "xrt", NPU_HARNESS_FAIL="aircc")
    assert r["raised"] == "CompileError", r
    assert "aircc" in r["message"]


def test_a_missing_rocr(tmp_path: Path):
    empty = tmp_path / "no-rocr"
    empty.mkdir()
    r = launch(
        tmp_path,
        "hsa",
        AMD_NPU_ROCR_PATH=str(empty),
        ROCM_PATH=str(empty),
        AMD_TRITON_NPU_TARGET="npu2",
    )
    assert r["raised"] == "RuntimeNotFoundError", r
    assert str(empty) in r["message"]


def test_no_device(tmp_path: Path):
    r = launch(
        tmp_path,
        "xrt",
        AMD_TRITON_NPU_XRT_SHIM=str(tmp_path / "no-shim.so"),
        PATH=os.defpath,
    )
    assert r["raised"] == "DeviceNotFoundError", r
    assert "DeviceError" in r["mro"]
    assert "AMD_TRITON_NPU_TARGET" in r["message"]


def test_an_unknown_device_is_upstreams_unsupported_error(tmp_path: Path):
    r = launch(tmp_path, "xrt", NPU_HARNESS_XRT_DEVICE="NPU Futurepoint")
    assert r["raised"] == "UnsupportedNPUDeviceError", r
    assert "Futurepoint" in r["message"]


def test_no_hardware_context_left(tmp_path: Path):
    # The device allows no hardware context at all, so releasing idle ones cannot help.
    r = launch(tmp_path, "xrt", NPU_HARNESS_MAX_HWCTX="0")
    assert r["raised"] == "HardwareContextsExhaustedError", r


def test_a_queue_error_is_a_launch_error(tmp_path: Path):
    r = launch(tmp_path, "hsa", NPU_HARNESS_FAULT="queue_error")
    assert r["raised"] == "LaunchError", r


def test_a_hung_device_is_a_timeout(tmp_path: Path):
    r = launch(tmp_path, "hsa", NPU_HARNESS_FAULT="hang", AMD_TRITON_NPU_HSA_TIMEOUT="0.5")
    assert r["raised"] == "NPUTimeoutError", r
    assert "TimeoutError" in r["mro"]


def test_an_unusable_cache(tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    r = launch(tmp_path, "xrt", AMD_TRITON_NPU_CACHE_DIR=str(blocker / "cache"))
    assert r["raised"] == "NPUCacheError", r
    assert "OSError" in r["mro"]


def test_a_shared_cache_directory_is_refused(tmp_path: Path):
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    shared.chmod(0o777)
    r = launch(tmp_path, "xrt", AMD_TRITON_NPU_CACHE_DIR=str(shared))
    assert r["raised"] == "CachePermissionError", r
    assert "PermissionError" in r["mro"] and "NPUCacheError" in r["mro"]


def test_bad_chain_input_is_an_input_error():
    from triton.backends.amd_triton_npu.multilaunch import MultiLaunchBuilder

    with pytest.raises(errors.NPUInputError, match="MLIR identifier") as info:
        MultiLaunchBuilder("2 bad names")
    assert isinstance(info.value, ValueError)


def test_running_out_of_file_descriptors_is_a_resource_error_not_a_missing_tool(
    tmp_path: Path,
):
    # A warm process lowers its file limit to what it has open, then compiles a new kernel:
    # every tool probe and spawn fails with EMFILE. That is reported as what it is.
    script = tmp_path / "emfile.py"
    warm, limited = (
        "add_kernel[(1,)](x, y, out, N=1024, BLOCK=1024)",
        (
            "import os, resource\n"
            "add_kernel[(1,)](x, y, out, N=1024, BLOCK=1024)\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir('/proc/self/fd')), 4096))\n"
            "try:\n"
            "    add_kernel[(2,)](x, y, out, N=1024, BLOCK=512)"
        ),
    )
    assert SCRIPT.count("try:\n    " + warm) == 1
    script.write_text(SCRIPT.replace("try:\n    " + warm, limited))
    proc = subprocess.run(
        [sys.executable, str(script), "hsa"],
        capture_output=True,
        text=True,
        env=harness_env(tmp_path),
        timeout=300,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["raised"] == "NPUResourceError", r
    assert "OSError" in r["mro"], r
    for want in ("EMFILE", "RLIMIT_NOFILE", "ulimit -n 4096"):
        assert want in r["message"], (want, r["message"])
    assert "not found" not in r["message"], r["message"]
