#!/usr/bin/env bash
# `make trials`: the reliability trials, on the conformance harness, with modest sizes (about
# 25-30 minutes on 2 cores); each prints PASS/FAIL/SKIP with its numbers, and the table of this
# run's verdicts is printed at the end (README.md, "Reliability trials", keeps the last one).
# Sizes: TRIAL_PROCESSES, TRIAL_KERNELS, TRIAL_KILLS, TRIAL_CORRUPTIONS, TRIAL_LAUNCHES,
# TRIAL_MANY_KERNELS, TRIAL_FUZZ_SECONDS.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py="$root/.venv/bin/python"
here="$root/scripts/trials"
rm -f "$root/target/trials/results.jsonl"
status=0
"$py" "$here/concurrency.py" "${TRIAL_PROCESSES:-8}" "${TRIAL_KERNELS:-3}" || status=1
"$py" "$here/sigkill.py" "${TRIAL_KILLS:-6}" || status=1
"$py" "$here/corruption.py" "${TRIAL_CORRUPTIONS:-30}" || status=1
"$py" "$here/bad_inputs.py" || status=1
"$py" "$here/leaks.py" "${TRIAL_LAUNCHES:-50000}" "${TRIAL_LOADED_KERNELS:-40}" || status=1
"$py" "$here/many_kernels.py" "${TRIAL_MANY_KERNELS:-2000}" || status=1
bash "$here/fuzz.sh" || status=1
"$py" - "$root/target/trials/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\n| trial | verdict | numbers | time |\n|---|---|---|---|")
for r in rows:
    print(f"| {r['trial']} | {r['verdict']} | {r['numbers']} | {r['seconds']} s |")
PY
exit $status
