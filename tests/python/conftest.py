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


def run_doctor(env: dict, drop: tuple[str, ...] = ()) -> tuple[int, dict]:
    """`python -m triton_npu doctor --json` with this process's environment minus the
    configuration variables and `drop`, plus `env`: the exit status and the report."""
    import json

    full = {
        k: v for k, v in os.environ.items() if not k.startswith("AMD_TRITON_NPU_") and k not in drop
    }
    full.update(env)
    r = subprocess.run(
        [sys.executable, "-m", "triton_npu", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )
    return r.returncode, json.loads(r.stdout)


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


def harness_env(tmp_path: Path, **extra: str) -> dict:
    """The environment of a process that runs kernels on the conformance harness: the
    exports of target/harness/env.sh, private caches under `tmp_path`, and `extra`."""
    env_sh = HARNESS / "env.sh"
    if not env_sh.is_file():
        raise AssertionError(f"{env_sh} is missing: run `make harness` first")
    env = {k: v for k, v in os.environ.items() if k not in _CONFIG_VARS}
    env = {k: v for k, v in env.items() if not k.startswith("NPU_HARNESS_")}
    for line in env_sh.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            env[key] = value.strip('"')
    env["AMD_TRITON_NPU_CACHE_DIR"] = str(tmp_path / "npu-cache")
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    env.update(extra)
    return env


def run_script(script: str, env: dict, cwd: Path | None = None, timeout: int = 600):
    """Runs a Python script in a fresh interpreter with `env`; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def run_file(tmp_path: Path, name: str, text: str, args: list[str], env: dict) -> str:
    """Runs `text` as the script `tmp_path/name` (Triton reads a @jit function's source from its
    file) with `args` and `env`; asserts it succeeded and returns its last line of output."""
    script = tmp_path / name
    script.write_text(text)
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]
