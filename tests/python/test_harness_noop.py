"""`NPU_HARNESS_NOOP_DEVICE=1` (the harness's no-op mode; `make bench` times launches on its own
no-op libraries instead, tests/python/test_noop_libs.py): a launch passes every check of the
runtime and the stand-in, and completes without the program running (the output keeps what it
held), under both runtimes; without it the same launch computes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import harness_env

SCRIPT = """
import json, sys
import torch, triton, triton.language as tl
from triton_npu import NPUDriver

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))

triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
x, y, out = torch.ones(16), torch.ones(16), torch.full((16,), 7.0)
add_kernel[(1,)](x, y, out, BLOCK=16)
print(json.dumps(out.tolist()))
"""


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_the_noop_device_completes_launches_without_computing(runtime: str, tmp_path: Path):
    script = tmp_path / "noop.py"  # Triton reads a @jit function's source: a file
    script.write_text(SCRIPT)
    outputs = {}
    for noop in ("1", "0"):
        proc = subprocess.run(
            [sys.executable, str(script), runtime],
            capture_output=True,
            text=True,
            env=harness_env(tmp_path, NPU_HARNESS_NOOP_DEVICE=noop, NPU_HARNESS_DOORBELL="sync"),
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outputs[noop] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outputs["1"] == [7.0] * 16, "the no-op device ran the program"
    assert outputs["0"] == [2.0] * 16
