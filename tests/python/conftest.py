"""Shared fixtures: every test starts from a clean configuration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "target" / "harness"

_CONFIG_VARS = [v for v in os.environ if v.startswith("AMD_TRITON_NPU_")] + [
    "AIR_TRANSFORM_TILING_SCRIPT",
    "TRITON_DEFAULT_BACKEND",
]


@pytest.fixture(autouse=True)
def clean_config(monkeypatch: pytest.MonkeyPatch):
    for var in _CONFIG_VARS:
        monkeypatch.delenv(var, raising=False)
    from triton_npu.config import npu_config

    npu_config.reset()
    yield
    npu_config.reset()


def run_python(code: str, env: dict | None = None, cwd: Path | None = None):
    """Runs `code` in a fresh interpreter (for import-time and process-wide behaviour)."""
    full_env = {k: v for k, v in os.environ.items() if k not in _CONFIG_VARS}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=300,
    )
