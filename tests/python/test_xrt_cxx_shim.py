"""triton-npu's own XRT shim (crates/xrt-sys/shim/triton_npu_xrt.cpp) runs kernels.

The shim is built against Debian's XRT headers and selected the way a user selects an
installed XRT: `AMD_TRITON_NPU_XRT_SHIM` names it and `XILINX_XRT` is the root whose
`lib/libxrt_coreutil.so.2` the loader puts beneath it (the harness's default XRT, so every XRT
test runs through it; these tests pin it and check it). That coreutil is the harness's C++ XRT
stand-in (tests/harness/xrt-coreutil), which drives the software device, so a launch goes
Rust runtime → our C++ shim → XRT's C++ API → device. Each test checks the coreutil served the
launch; run with the old path (the Rust stand-in as the shim), the coreutil is never loaded and
the checks fail (`test_the_old_path_does_not_reach_the_cxx_shim` shows it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import harness_env

SCRIPT = """
import ctypes, json, os
import torch
import triton
import triton.language as tl
from triton_npu import NPUDriver

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))

triton.runtime.driver.set_active(NPUDriver("xrt"))

def launch():
    x, y = torch.randn(2048), torch.randn(2048)
    out = torch.zeros(2048)
    try:
        add_kernel[(2,)](x, y, out, N=2048, BLOCK=1024)
    except Exception as e:
        return {"raised": type(e).__name__, "message": str(e)}
    return {"raised": None, "right": bool(torch.equal(out, x + y))}

results = []
for fault in os.environ.get("FAULTS", "").split(","):
    os.environ["NPU_HARNESS_FAULT"] = fault
    results.append(launch())

def loaded(name):
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if line.rstrip().endswith(name)})

calls = 0
coreutil = loaded("libxrt_coreutil.so.2")
if coreutil:
    lib = ctypes.CDLL(coreutil[0])
    lib.npu_harness_coreutil_calls.restype = ctypes.c_ulong
    calls = lib.npu_harness_coreutil_calls()
print(json.dumps({"results": results, "shim": loaded("libtriton_npu_xrt.so"),
                  "coreutil": coreutil, "coreutil_calls": calls}))
"""


def run(
    tmp_path: Path, faults: str, device: str = "NPU Strix", old_path: bool = False, **extra: str
) -> dict:
    env = harness_env(tmp_path, FAULTS=faults, NPU_HARNESS_XRT_DEVICE=device, **extra)
    cxx = Path(env.get("NPU_HARNESS_XRT_CXX", ""))
    assert (cxx / "shim" / "libtriton_npu_xrt.so").is_file(), (
        "the C++ XRT path of the harness is missing: run `make harness`"
    )
    # The harness's default XRT (target/harness/env.sh) is this path; set it here all the same,
    # so the test does not depend on that choice.
    env["AMD_TRITON_NPU_XRT_SHIM"] = str(cxx / "shim" / "libtriton_npu_xrt.so")
    env["XILINX_XRT"] = str(cxx)
    if old_path:
        env["AMD_TRITON_NPU_XRT_SHIM"] = env["NPU_HARNESS_XRT_STANDIN_SHIM"]
        del env["XILINX_XRT"]
    script = tmp_path / "launch.py"  # @triton.jit needs its source in a file
    script.write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def served_by_the_cxx_shim(result: dict, tmp_path: Path) -> None:
    cxx = Path(harness_env(tmp_path)["NPU_HARNESS_XRT_CXX"])
    assert result["shim"] == [str((cxx / "shim" / "libtriton_npu_xrt.so").resolve())], result
    assert result["coreutil"] == [str(cxx / "lib" / "libxrt_coreutil.so.2")], result
    assert result["coreutil_calls"] > 0, result


@pytest.mark.parametrize("device", ["NPU Strix", "NPU Phoenix"])  # full ELF; xclbin + insts
def test_kernels_run_through_the_cxx_shim(tmp_path: Path, device: str):
    result = run(tmp_path, "", device)
    assert result["results"] == [{"raised": None, "right": True}], result
    served_by_the_cxx_shim(result, tmp_path)


def test_a_failed_run_raises_through_xrts_command_error(tmp_path: Path):
    # The device ends the run in ERT_CMD_STATE_ABORT: the coreutil throws
    # xrt::run::command_error from wait2, the shim catches it by type and reports the state.
    result = run(tmp_path, "abort,")
    failed, next_launch = result["results"]
    assert failed["raised"] == "LaunchError", result
    assert "ERT_CMD_STATE_ABORT" in failed["message"], result
    assert next_launch == {"raised": None, "right": True}, result
    served_by_the_cxx_shim(result, tmp_path)


def test_a_hung_run_times_out_and_the_next_launch_works(tmp_path: Path):
    result = run(tmp_path, "hang,", AMD_TRITON_NPU_XRT_TIMEOUT="0.5")
    hung, next_launch = result["results"]
    assert hung["raised"] == "NPUTimeoutError", result
    assert next_launch == {"raised": None, "right": True}, result
    served_by_the_cxx_shim(result, tmp_path)


def test_the_old_path_does_not_reach_the_cxx_shim(tmp_path: Path):
    # The control: the Rust stand-in selected as the shim computes the same result without
    # our C++ — and the checks above see that.
    result = run(tmp_path, "", old_path=True)
    assert result["results"] == [{"raised": None, "right": True}], result
    with pytest.raises(AssertionError):
        served_by_the_cxx_shim(result, tmp_path)
    assert result["coreutil"] == [] and result["coreutil_calls"] == 0, result
