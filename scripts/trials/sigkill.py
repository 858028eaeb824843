"""Trial: builders killed with SIGKILL in the middle of a build.

Each round starts a builder whose tool (air-opt or aircc, in turn) hangs (NPU_HARNESS_HANG),
waits until the tool and its helper run, and kills the builder with SIGKILL. PASS when, every
round, the tool and its helper are gone within a few seconds (the builder's watchdog kills
the process group), the next builder builds afresh (nothing partial is served) and computes
right, and no work folder (`triton-npu-work-*`) survives that next build.
Usage: sigkill.py [rounds]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from common import harness_env, last_json, python, report, script, tool_runs, work_dir


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def hanging_pids(log: Path, tool: str) -> list[int]:
    pids = []
    if log.exists():
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("tool") == tool:
                pids += [entry[k] for k in ("pid", "helper_pid") if k in entry]
    return pids


def main() -> bool:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    start = time.monotonic()
    problems = []
    kills = survivors = rebuilt = leftovers = 0
    with work_dir("sigkill") as w:
        work = Path(w)
        path = script(work, 'import json\nprint(json.dumps({"right": add(1024)}))\n')
        for r in range(rounds):
            tool = ("air-opt", "aircc")[r % 2]
            log = work / f"hang-{r}.jsonl"
            env = harness_env(work, NPU_HARNESS_LOG=str(log), NPU_HARNESS_HANG=tool)
            builder = python(path, env)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and len(hanging_pids(log, tool)) < 2:
                time.sleep(0.1)
            pids = hanging_pids(log, tool)
            if len(pids) < 2:
                builder.kill()
                problems.append(f"round {r}: {tool} never started")
                continue
            builder.send_signal(signal.SIGKILL)
            builder.communicate()
            kills += 1
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(alive(p) for p in pids):
                time.sleep(0.1)
            left = [p for p in pids if alive(p)]
            if left:
                survivors += len(left)
                problems.append(f"round {r}: {tool} processes {left} survived the builder")
                for p in left:
                    os.kill(p, signal.SIGKILL)
            # The next builder: a fresh build, a right result, no stale work folder after.
            log2 = work / f"after-{r}.jsonl"
            after = python(path, harness_env(work, NPU_HARNESS_LOG=str(log2)))
            out, err = after.communicate(timeout=600)
            result = last_json(out)
            if after.returncode != 0 or not result or not result["right"]:
                problems.append(f"round {r}: next build failed: {err.strip()[-300:]}")
            elif not tool_runs(log2, "aircc"):
                problems.append(f"round {r}: the next builder was served an entry")
            else:
                rebuilt += 1
            stale = list((work / "tmp").glob("triton-npu-work-*"))
            leftovers += len(stale)
            if stale:
                problems.append(f"round {r}: work folders left: {[s.name for s in stale]}")
            # Start the next round from an empty cache, so that it builds again.
            shutil.rmtree(work / "npu-cache", ignore_errors=True)
    ok = not problems
    numbers = (
        f"{kills} SIGKILLs mid-build (air-opt/aircc): {survivors} tool processes survived, "
        f"{rebuilt}/{kills} next builds fresh and right, {leftovers} work folders left"
        + (f"; {problems[:2]}" if problems else "")
    )
    return report("sigkill", ok, numbers, time.monotonic() - start)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
