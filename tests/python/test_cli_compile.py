"""`triton-npu compile` runs a launch's build pipeline: the same target detection (the
runtimes' probes), format rules and runtime preparation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, harness_env

FIXTURE = REPO / "tests" / "harness" / "tools" / "tests" / "fixtures" / "add_n.ttir"


def linalg_of(env: dict, out: Path) -> Path:
    """The Linalg the (stand-in) triton-shared-opt makes of the add fixture."""
    tool = env["TRITON_SHARED_OPT_PATH"]
    if os.path.isdir(tool):
        tool = os.path.join(tool, "triton-shared-opt")
    dst = out / "add.mlir"
    subprocess.run(
        [tool, str(FIXTURE), "--triton-to-linalg-experimental", "-o", str(dst)],
        check=True,
        env=env,
    )
    return dst


@pytest.mark.parametrize(
    ("runtime", "device", "target", "files"),
    [
        ("hsa", {"NPU_HARNESS_AGENT": "aie2"}, "npu1", {"xclbin", "insts", "hsaco"}),
        ("hsa", {"NPU_HARNESS_AGENT": "aie2p"}, "npu2", {"elf", "hsaco"}),
        ("xrt", {"NPU_HARNESS_XRT_DEVICE": "NPU Phoenix"}, "npu1", {"xclbin", "insts"}),
        ("xrt", {"NPU_HARNESS_XRT_DEVICE": "NPU Strix"}, "npu2", {"elf"}),
        # amdxdna's name for the newest npu4-family revisions (upstream's table lacks it).
        ("xrt", {"NPU_HARNESS_XRT_DEVICE": "NPU Gorgon Point 1"}, "npu2", {"elf"}),
    ],
)
def test_compile_detects_the_target_as_a_launch_does(
    runtime: str, device: dict, target: str, files: set, tmp_path: Path
):
    env = harness_env(tmp_path, **device)
    env.pop("AMD_TRITON_NPU_TARGET", None)
    src = linalg_of(env, tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "triton_npu", "compile", str(src), "--kernel", "add_kernel"]
        + ["--grid", "3", "--runtime", runtime, "-o", str(out), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["target"] == target
    assert files <= set(summary["files"])
    for path in summary["files"].values():
        assert Path(path).is_file(), path
