"""Shared pieces of the reliability trials (scripts/trials/*.py, run by `make trials`).

Each trial runs @triton.jit kernels in fresh processes on the conformance harness (software
stand-ins for the toolchain and the device: no NPU code runs), prints one
``PASS|FAIL|SKIP <trial>: <numbers>`` line and appends it to target/trials/results.jsonl, from
which `run.sh` prints the table kept in README.md ("Reliability trials").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "target" / "harness"
RESULTS = REPO / "target" / "trials" / "results.jsonl"

KERNELS = textwrap.dedent(
    """
    import json, os, sys
    import torch
    import triton
    import triton.language as tl
    from triton_npu import NPUDriver

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=m), mask=m)

    triton.runtime.driver.set_active(NPUDriver(os.environ.get("TRIAL_RUNTIME", "hsa")))
    N = 4096

    def add(block, x=None, y=None):
        x = torch.randn(N) if x is None else x
        y = torch.randn(N) if y is None else y
        out = torch.zeros(N)
        add_kernel[(N // block,)](x, y, out, N, BLOCK=block)
        return bool(torch.equal(out, x + y))
    """
)


def harness_env(work: Path, **extra: str) -> dict:
    """This process's environment plus the harness exports, with private caches and temporary
    folder under `work`."""
    env_sh = HARNESS / "env.sh"
    if not env_sh.is_file():
        sys.exit(f"{env_sh} is missing: run `make harness` first")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AMD_TRITON_NPU_", "NPU_HARNESS_", "TRITON_"))
    }
    for line in env_sh.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            env[key] = value.strip('"')
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    env["AMD_TRITON_NPU_CACHE_DIR"] = str(work / "npu-cache")
    env["TRITON_CACHE_DIR"] = str(work / "triton-cache")
    env["TMPDIR"] = str(work / "tmp")
    env.update(extra)
    return env


def script(work: Path, body: str) -> Path:
    """A kernel script (Triton reads a @jit function's source, so it must be a file)."""
    path = work / f"trial_{time.monotonic_ns()}.py"
    path.write_text(KERNELS + textwrap.dedent(body))
    return path


def python(path: Path, env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def last_json(out: str) -> dict | None:
    for line in reversed(out.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def tool_runs(log: Path, tool: str) -> list[dict]:
    """The runs of `tool` (not its --version probes) in a NPU_HARNESS_LOG file."""
    if not log.exists():
        return []
    runs = []
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("tool") == tool and "--version" not in entry.get("argv", []):
            runs.append(entry)
    return runs


def work_dir(name: str) -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix=f"triton-npu-trial-{name}-")


def report(trial: str, ok: bool | None, numbers: str, seconds: float) -> bool:
    """Prints and records the verdict; `ok=None` is a skip."""
    verdict = "SKIP" if ok is None else "PASS" if ok else "FAIL"
    print(f"{verdict} {trial}: {numbers} ({seconds:.0f} s)", flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(
            json.dumps(
                {
                    "trial": trial,
                    "verdict": verdict,
                    "numbers": numbers,
                    "seconds": round(seconds),
                    "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                }
            )
            + "\n"
        )
    return ok is not False
