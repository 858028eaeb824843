"""Trial: P processes build the same K kernels into one cache at once.

PASS when every kernel was built exactly once (aircc ran K times in all) and every process
computed every kernel right. Usage: concurrency.py [processes] [kernels]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from common import harness_env, last_json, python, report, script, tool_runs, work_dir

BLOCKS = [256, 512, 1024, 2048, 4096]


def main() -> bool:
    processes = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    kernels = min(int(sys.argv[2]) if len(sys.argv) > 2 else 3, len(BLOCKS))
    start = time.monotonic()
    with work_dir("concurrency") as w:
        work = Path(w)
        log = work / "tools.jsonl"
        env = harness_env(work, NPU_HARNESS_LOG=str(log))
        body = f"""
            import json
            print(json.dumps({{"right": [add(b) for b in {BLOCKS[:kernels]}]}}))
            """
        path = script(work, body)
        procs = [python(path, env) for _ in range(processes)]
        right = 0
        failures = []
        for p in procs:
            out, err = p.communicate(timeout=900)
            result = last_json(out)
            if p.returncode != 0 or result is None:
                failures.append(err.strip().splitlines()[-1:] or [f"status {p.returncode}"])
                continue
            right += sum(result["right"])
        builds = len(tool_runs(log, "aircc"))
    ok = builds == kernels and right == processes * kernels and not failures
    numbers = (
        f"{processes} processes x {kernels} kernels: {builds} builds (want {kernels}), "
        f"{right}/{processes * kernels} results right"
        + (f", failures: {failures[:2]}" if failures else "")
    )
    return report("concurrency", ok, numbers, time.monotonic() - start)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
