"""The `triton-npu` command starts without importing triton (issue 18 item 2): only `doctor`,
which reports whether triton imports, pays for it. Not timed: the test checks the cause of a
slow start, that `triton` is not in `sys.modules` after the command ran."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_python

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hsaco-vectors"

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


def test_doctor_still_reports_a_triton_that_fails_to_import(tmp_path: Path):
    # A `triton` package that raises on import, first on the path: doctor must import it to
    # say so; locating it would not.
    broken = tmp_path / "triton"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise RuntimeError('this triton is broken')\n")
    r = run_python(
        "import json, sys\nfrom triton_npu.cli import main\nsys.exit(main(['doctor', '--json']))\n",
        env={"PYTHONPATH": str(tmp_path)},
    )
    report = json.loads(r.stdout)
    triton = next(c for c in report["components"] if c["component"] == "triton")
    assert "this triton is broken" in json.dumps(triton), triton
