"""The `triton-npu` command starts fast (issue 18 item 2). The installed command is the native
binary (crate npu-cli): the commands that neither compile nor launch start no Python
interpreter at all; doctor, compile, run and test-examples are handed to the Python entry
point (`triton-npu-python`). Inside Python (`python -m triton_npu`, that console script) the
commands do not import triton: only `doctor`, which reports whether triton imports, pays for
it. Not timed (`benches/cli_start_bench.py` is): the tests check the causes of a slow start,
an interpreter started, `triton` in `sys.modules` after the command ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_python

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hsaco-vectors"
BIN = Path(sys.executable).parent
INSTALLED = BIN / "triton-npu"

_RUN = """
import json, sys
from triton_npu.cli import main
rc = main({args!r})
print(json.dumps({{"rc": rc, "triton": "triton" in sys.modules}}), file=sys.stderr)
"""


def _run(args: list[str], env: dict | None = None) -> tuple[dict, str]:
    r = run_python(_RUN.format(args=args), env=env)
    last = r.stderr.strip().splitlines()[-1]
    return json.loads(last), r.stdout


def _an_hsaco() -> Path:
    found = sorted(FIXTURES.glob("*/*.hsaco"))
    assert found, f"no hsaco under {FIXTURES}"
    return found[0]


def test_hsaco_dump_does_not_import_triton():
    out, stdout = _run(["hsaco", "dump", "--hsaco", str(_an_hsaco())])
    assert out == {"rc": 0, "triton": False}
    assert "kernel" in stdout.lower()


def test_help_and_cache_commands_do_not_import_triton(tmp_path: Path):
    env = {"TRITON_CACHE_DIR": str(tmp_path / "cache")}
    for args in (["--help"], ["cache", "stats"], ["transform", "list"]):
        out, _ = _run(args, env)
        assert out == {"rc": 0, "triton": False}, args


def _installed(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(INSTALLED), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def test_the_installed_command_is_the_native_binary():
    assert INSTALLED.read_bytes()[:4] == b"\x7fELF", f"{INSTALLED} is not the native binary"
    # The Python entry point it hands doctor, compile, run and test-examples to, beside it.
    script = BIN / "triton-npu-python"
    assert script.read_text().startswith("#!"), script


def test_commands_that_neither_compile_nor_launch_start_no_python(tmp_path: Path):
    # Any Python interpreter started under this environment dies at once: its standard
    # library is not under PYTHONHOME. The native commands do not care; doctor, which is
    # handed to Python, shows that the poison works.
    poison = {"PYTHONHOME": str(tmp_path / "no-python"), "TRITON_CACHE_DIR": str(tmp_path)}
    dump = _installed(["hsaco", "dump", "--hsaco", str(_an_hsaco())], poison)
    assert dump.returncode == 0, dump.stderr
    assert "kernel" in dump.stdout.lower()
    for args in (["--help"], ["--version"], ["cache", "stats"], ["transform", "list"]):
        r = _installed(args, poison)
        assert r.returncode == 0, (args, r.stderr)
    doctor = _installed(["doctor", "--json"], poison)
    assert doctor.returncode != 0
    assert "No module named 'encodings'" in doctor.stderr, doctor.stderr


@pytest.mark.parametrize("entry", ["module", "installed"])
def test_doctor_still_reports_a_triton_that_fails_to_import(tmp_path: Path, entry: str):
    # A `triton` package that raises on import, first on the path: doctor must import it to
    # say so; locating it would not. The installed command hands doctor to Python, whose
    # environment it keeps.
    broken = tmp_path / "triton"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise RuntimeError('this triton is broken')\n")
    env = {"PYTHONPATH": str(tmp_path)}
    if entry == "installed":
        r = _installed(["doctor", "--json"], env)
    else:
        r = run_python(
            "import json, sys\nfrom triton_npu.cli import main\n"
            "sys.exit(main(['doctor', '--json']))\n",
            env=env,
        )
    report = json.loads(r.stdout)
    triton = next(c for c in report["components"] if c["component"] == "triton")
    assert "this triton is broken" in json.dumps(triton), triton
