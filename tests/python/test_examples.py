"""The examples run unchanged on the harness under both runtimes: the scripts in examples/
(`make demo` runs one) and our suite of upstream-style examples in tests/examples/, which
`triton-npu test-examples` runs the way upstream's run_tests.py runs theirs, on npu1 and npu2.
Each example compares its results with torch on the CPU at upstream's tolerances, so a pass
means the harness device computed what the kernel computes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, harness_env

EXAMPLES = REPO / "examples"
SUITE = REPO / "tests" / "examples"

# Every kind of kernel upstream's examples use has an example of its own here.
SUITE_EXAMPLES = sorted(p.name for p in SUITE.iterdir() if p.is_dir())

# (runtime, test-examples --device, variables that make the harness device that target)
TARGETS = {
    "hsa-npu2": ("hsa", "aie2p", {}),
    "hsa-npu1": ("hsa", "aie2", {"NPU_HARNESS_AGENT": "aie2"}),
    "xrt-npu2": ("xrt", "aie2p", {}),
    "xrt-npu1": ("xrt", "aie2", {"NPU_HARNESS_XRT_DEVICE": "NPU Phoenix"}),
}


@pytest.mark.parametrize("runtime", ["xrt", "hsa"])
@pytest.mark.parametrize("name", ["vector_add", "relu", "axpy"])
def test_example_matches_numpy(name: str, runtime: str, tmp_path: Path):
    env = harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME=runtime)
    r = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches numpy" in r.stdout


def test_softmax_computes_on_the_harness(tmp_path: Path):
    r = subprocess.run(
        [sys.executable, str(EXAMPLES / "softmax.py")],
        capture_output=True,
        text=True,
        env=harness_env(tmp_path),
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches numpy" in r.stdout


def _summary(stdout: str) -> dict[str, str]:
    """`example/script` → PASS/FAIL/SKIP/TIMEOUT from test-examples' summary table."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("EXAMPLE "))
    rows = {}
    for line in lines[start + 1 :]:
        parts = line.split()
        if len(parts) < 3 or " script(s): " in line or line.startswith("logs:"):
            break
        rows[parts[0]] = parts[2]
    return rows


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_upstream_style_suite_passes_on_every_runtime_and_target(target: str, tmp_path: Path):
    runtime, device, extra = TARGETS[target]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME=runtime, TMPDIR=str(tmp), **extra)
    # Every example selected: `layernorm` is on upstream's default skip list.
    selected = [arg for name in SUITE_EXAMPLES for arg in ("-t", name)]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "triton_npu",
            "test-examples",
            str(SUITE),
            "--device",
            device,
            *selected,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert _summary(r.stdout) == dict.fromkeys(SUITE_EXAMPLES, "PASS"), r.stdout
    assert "not computable" not in r.stdout + r.stderr


def test_the_suite_covers_every_kind_of_kernel():
    # matmul bf16/i8/f32, reductions, softmax, layernorm, rmsnorm, rope, attention, every
    # math op, casts, masks and strides — and the four examples there were before.
    assert set(SUITE_EXAMPLES) >= {
        "matmul-bf16",
        "matmul-i8",
        "matmul-f32",
        "reductions",
        "softmax",
        "layernorm",
        "rmsnorm",
        "rope",
        "attention",
        "math-ops",
        "casts",
        "masked-2d",
        "vec-add",
        "relu",
        "axpy",
        "llm-blocks",
    }
    for name in SUITE_EXAMPLES:
        scripts = list((SUITE / name).glob("*.py"))
        assert len(scripts) == 1, name
        text = scripts[0].read_text()
        assert "torch.testing.assert_close" in text, name
        assert "triton.backends.amd_triton_npu" in text, name
        schedule = (SUITE / name / "transform_aie2p.mlir").read_text()
        assert "transform.include @" in schedule, name
        assert "@__transform_main" in schedule, name
