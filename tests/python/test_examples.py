"""The examples in examples/ run unchanged on the harness under both runtimes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, harness_env

EXAMPLES = REPO / "examples"


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


def test_softmax_says_it_is_skipped_on_the_harness(tmp_path: Path):
    r = subprocess.run(
        [sys.executable, str(EXAMPLES / "softmax.py")],
        capture_output=True,
        text=True,
        env=harness_env(tmp_path),
        timeout=600,
    )
    assert r.returncode == 77, r.stdout + r.stderr
    assert "skipped on the conformance harness" in r.stdout
