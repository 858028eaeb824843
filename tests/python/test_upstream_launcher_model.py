"""The benchmark's model of upstream's generated C++ launcher (benches/upstream_launcher/, built
by benches/upstream_model.py) compiles and launches on the harness: `make bench` times it
against no-op device libraries (test_noop_libs.py), where a launcher that dispatched nothing
would look fast, so this checks that its launches reach the device (computed without NPU_HARNESS_NOOP_DEVICE, completed
without computing with it), under both runtimes. Not timed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import REPO, harness_env, run_file

_spec = importlib.util.spec_from_file_location(
    "upstream_model", REPO / "benches" / "upstream_model.py"
)
upstream_model = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(upstream_model)

COMPILE = """
import sys
import torch, triton, triton.language as tl
from triton_npu import NPUDriver

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))

triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
x, y, out = torch.ones(16), torch.ones(16), torch.empty(16)
print(add_kernel[(1,)](x, y, out, 16, BLOCK=16)._run.npu_cache_dir)
"""

LAUNCH = """
import importlib.util, json, sys
import torch

spec = importlib.util.spec_from_file_location("__npu_dispatch", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.set_paths(sys.argv[2], sys.argv[3])
x, y, out = torch.ones(16), torch.ones(16), torch.full((16,), 7.0)
module.launch(1, 1, 1, None, None, None, None, x, y, out, 16, 16)
print(json.dumps(out.tolist()))
"""


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_the_upstream_launcher_model_builds_and_reaches_the_device(runtime: str, tmp_path: Path):
    reason = upstream_model.missing(runtime)
    if reason is not None:
        pytest.skip(reason)
    env = harness_env(tmp_path, NPU_HARNESS_DOORBELL="sync")
    entry = run_file(tmp_path, "compile.py", COMPILE, [runtime], env)
    device = Path(env["AMD_NPU_ROCR_PATH"] if runtime == "hsa" else env["XILINX_XRT"])
    module = upstream_model.build(runtime, 3, 2, device, tmp_path / "model")
    artifact, kernel = upstream_model.artifacts(runtime, entry)
    outputs = {}
    for noop in ("1", "0"):
        launched = run_file(
            tmp_path,
            "launch.py",
            LAUNCH,
            [str(module), artifact, kernel],
            # The model, like upstream, waits forever for a packet the device refused unless
            # its watchdog is on.
            {**env, "NPU_HARNESS_NOOP_DEVICE": noop, "AMD_TRITON_NPU_HSA_TIMEOUT": "10"},
        )
        outputs[noop] = json.loads(launched)
    assert outputs["1"] == [7.0] * 16, "the no-op device ran the program"
    assert outputs["0"] == [2.0] * 16, "the model's launch did not reach the harness device"
