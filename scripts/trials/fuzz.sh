#!/usr/bin/env bash
# Trial: the cargo-fuzz targets of fuzz/ (the hsaco, xclbin, AIE ELF and MLIR readers), each for
# a bounded time (TRIAL_FUZZ_SECONDS, default 60). Needs a nightly toolchain and cargo-fuzz;
# installs cargo-fuzz with `cargo install` when missing, and skips (saying why) when either
# cannot be had. PASS when no target finds a crash.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${TRIAL_FUZZ_SECONDS:-60}
start=$(date +%s)
result() { # verdict numbers
  local took=$(( $(date +%s) - start ))
  "$root/.venv/bin/python" - "$1" "$2" "$took" <<PY
import sys
sys.path.insert(0, "$root/scripts/trials")
from common import report
verdict, numbers, took = sys.argv[1], sys.argv[2], float(sys.argv[3])
report("fuzz", None if verdict == "SKIP" else verdict == "PASS", numbers, took)
PY
}
if ! rustup run nightly cargo --version >/dev/null 2>&1; then
  result SKIP "no nightly Rust toolchain (cargo-fuzz needs one: rustup toolchain install nightly)"
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz (cargo install --locked cargo-fuzz)"
  if ! nice cargo install --locked -q cargo-fuzz >/dev/null 2>&1; then
    result SKIP "cargo-fuzz could not be installed (cargo install --locked cargo-fuzz failed)"
    exit 0
  fi
fi
cd "$root/fuzz" || exit 1
summary=()
crashed=()
for target in $(cargo +nightly fuzz list); do
  log=$(mktemp)
  nice cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 >"$log" 2>&1
  status=$?
  runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -1 | awk '{print $2}')
  summary+=("$target ${runs:-?} runs")
  if [ $status -ne 0 ]; then
    crashed+=("$target (status $status: $(grep -m1 -E 'panicked|ERROR: libFuzzer|deadly signal' "$log"))")
  fi
  rm -f "$log"
done
numbers="${seconds} s per target: $(printf '%s, ' "${summary[@]}" | sed 's/, $//')"
if [ ${#crashed[@]} -eq 0 ]; then
  result PASS "$numbers, no crash"
else
  result FAIL "$numbers; crashes: ${crashed[*]}"
  exit 1
fi
