"""Builds the standalone ``triton-npu`` binary (crate ``npu-cli``) and stages it where the
wheel takes it from: ``target/wheel-data/scripts/`` (``[tool.maturin] data``), whose files pip
installs into the environment's ``bin/``. maturin builds the Python extension only, so every
wheel build runs this first: the PEP 517 backend beside this file for ``pip install .``, and
``make develop`` / ``make wheel`` before ``maturin develop`` / ``maturin build``.

Run as a script: ``python scripts/build_backend/stage_cli.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Must match `[tool.maturin] data` in pyproject.toml.
DATA = ROOT / "target" / "wheel-data"
BINARY = "triton-npu"


def build() -> Path:
    """`cargo build --profile dist` of the binary (release, optimised as one program: see
    Cargo.toml); returns the path cargo reports for it (so `CARGO_TARGET_DIR` and `--target`
    in cargo's configuration are respected)."""
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    if not cargo:
        raise SystemExit(
            "triton-npu: cargo not found; the standalone `triton-npu` binary is built from "
            "source (install Rust, e.g. with rustup)"
        )
    command = [
        cargo,
        "build",
        "--profile",
        "dist",
        "-p",
        "npu-cli",
        "--bin",
        BINARY,
        "--message-format=json-render-diagnostics",
    ]
    print("Running `{}`".format(" ".join(command)), file=sys.stderr, flush=True)
    out = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise SystemExit(f"triton-npu: building the {BINARY} binary failed ({out.returncode})")
    for line in out.stdout.splitlines():
        message = json.loads(line) if line.startswith("{") else {}
        if message.get("reason") == "compiler-artifact" and message["target"]["name"] == BINARY:
            executable = message.get("executable")
            if executable:
                return Path(executable)
    raise SystemExit(f"triton-npu: cargo reported no {BINARY} executable")


def scripts_dir() -> Path:
    """The wheel's scripts folder, created if missing."""
    scripts = DATA / "scripts"
    scripts.mkdir(parents=True, exist_ok=True)
    return scripts


def stage(binary: Path) -> Path:
    """Copies `binary` into the wheel's scripts folder (replacing any older one at once)."""
    scripts = scripts_dir()
    staged = scripts / BINARY
    partial = scripts / f".{BINARY}.partial"
    shutil.copy2(binary, partial)
    os.chmod(partial, 0o755)
    os.replace(partial, staged)
    return staged


def main() -> int:
    print(stage(build()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
