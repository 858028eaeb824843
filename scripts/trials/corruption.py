"""Trial: damaged cache entries.

Builds a kernel once, then, each round, damages one file of its cache entry (truncates it,
flips one byte, empties it, deletes it, or replaces it with a directory, in turn over the
entry's files) and runs the kernel in a fresh process. PASS when every damage is detected:
the process rebuilds the entry (aircc runs again) or refuses it, never computes a wrong
result, and never dies. Usage: corruption.py [rounds]
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
from pathlib import Path

from common import harness_env, last_json, python, report, script, tool_runs, work_dir

DAMAGES = ("truncate", "flip", "empty", "delete", "directory")


def entry_files(cache: Path) -> list[Path]:
    """The files of published entries (`entries/<shard>/<key>/`: manifest.json, data/...)."""
    return sorted(p for p in (cache / "entries").rglob("*") if p.is_file())


def damage(path: Path, how: str, rng: random.Random) -> None:
    size = path.stat().st_size
    if how == "truncate":
        with path.open("r+b") as f:
            f.truncate(max(size // 2, 0))
    elif how == "flip":
        if size == 0:
            path.write_bytes(b"x")
            return
        with path.open("r+b") as f:
            at = rng.randrange(size)
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ 0x5A]))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "delete":
        path.unlink()
    elif how == "directory":
        path.unlink()
        path.mkdir()


def main() -> bool:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    rng = random.Random(17)
    start = time.monotonic()
    rebuilt = refused = wrong = died = 0
    problems = []
    with work_dir("corruption") as w:
        work = Path(w)
        path = script(work, 'import json\nprint(json.dumps({"right": add(1024)}))\n')
        first = python(path, harness_env(work))
        out, err = first.communicate(timeout=600)
        if first.returncode != 0:
            return report("corruption", False, f"first build failed: {err[-300:]}", 0)
        cache = work / "npu-cache"
        pristine = work / "pristine"
        shutil.copytree(cache, pristine, symlinks=True)
        files = entry_files(cache)
        for r in range(rounds):
            shutil.rmtree(cache)
            shutil.copytree(pristine, cache, symlinks=True)
            os.chmod(cache, 0o700)
            target = files[r % len(files)]
            how = DAMAGES[r % len(DAMAGES)]
            damage(target, how, rng)
            log = work / f"round-{r}.jsonl"
            p = python(path, harness_env(work, NPU_HARNESS_LOG=str(log)))
            out, err = p.communicate(timeout=600)
            result = last_json(out)
            name = f"{how} {target.relative_to(cache)}"
            if p.returncode < 0:
                died += 1
                problems.append(f"{name}: killed by signal {-p.returncode}")
            elif p.returncode != 0 or result is None:
                refused += 1  # an error, not a wrong answer: acceptable, but noted
                problems.append(f"{name}: refused: {err.strip().splitlines()[-1:]}")
            elif not result["right"]:
                wrong += 1
                problems.append(f"{name}: WRONG RESULT")
            elif tool_runs(log, "aircc"):
                rebuilt += 1
            else:
                # Served without a rebuild: only right if the damaged file is not part of
                # what the entry's manifest protects (then it was not an entry file).
                problems.append(f"{name}: served without a rebuild")
    ok = wrong == 0 and died == 0 and rebuilt + refused == rounds and refused == 0
    numbers = (
        f"{rounds} damaged entries over {len(files)} files x {len(DAMAGES)} kinds: "
        f"{rebuilt} rebuilt, {refused} refused, {wrong} wrong results, {died} crashes"
        + (f"; {problems[:3]}" if problems else "")
    )
    return report("corruption", ok, numbers, time.monotonic() - start)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
