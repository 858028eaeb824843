"""How long the installed ``triton-npu`` command takes for commands that neither compile nor
launch (issue 18, item 2: ≤ 20 ms): ``--version``, ``hsaco --help``, ``hsaco dump`` of a test
vector, ``cache stats`` of an empty cache and ``transform list``. ``triton-npu`` is the native
binary (crate npu-cli) pip installs into the environment's ``bin/``; for comparison, the same
through the Python entry point, ``triton-npu-python`` (the console script the binary hands
doctor, compile, run and test-examples to, and what ``triton-npu`` was before).

Each command runs ``RUNS`` times in a row (after one untimed run), each a new process waited
for to its end; prints ``BENCH cli_start_<entry>_<command> <median> ms (min …, max …)``.
Run by ``make bench``; ``--runs N`` changes the count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 20


def an_hsaco() -> Path:
    found = sorted((ROOT / "tests/fixtures/hsaco-vectors").glob("*/*.hsaco"))
    if not found:
        raise SystemExit("no hsaco test vector under tests/fixtures/hsaco-vectors")
    return found[0]


def commands() -> dict[str, list[str]]:
    return {
        "version": ["--version"],
        "hsaco_help": ["hsaco", "--help"],
        "hsaco_dump": ["hsaco", "dump", "--hsaco", str(an_hsaco())],
        "cache_stats": ["cache", "stats"],
        "transform_list": ["transform", "list"],
    }


def timed(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    entries = {"binary": bin_dir / "triton-npu", "python": bin_dir / "triton-npu-python"}
    for path in entries.values():
        if not path.is_file():
            raise SystemExit(f"{path} is missing: run `make develop` first")
    with open(entries["binary"], "rb") as f:
        if f.read(4) != b"\x7fELF":
            raise SystemExit(f"{entries['binary']} is not the native binary: run `make develop`")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TRITON_CACHE_DIR": tmp}
        for entry, path in entries.items():
            for name, command in commands().items():
                t = timed([str(path), *command], env, args.runs)
                print(
                    f"BENCH cli_start_{entry}_{name} {statistics.median(t):.1f} ms "
                    f"(min {min(t):.1f}, max {max(t):.1f}, {args.runs} runs)",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
