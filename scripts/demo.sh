#!/usr/bin/env bash
# `make demo`: run the vector-add example on the NPU when this machine can, else on the
# conformance harness (software stand-ins for the toolchain and the device), saying so first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
doctor_json=$("$venv/bin/triton-npu" doctor --json 2>/dev/null || true)
device_ok=$("$venv/bin/python" - "$doctor_json" <<'PY'
import json, sys
try:
    report = json.loads(sys.argv[1])
except ValueError:
    print("no"); raise SystemExit
runtime = report.get("runtime")
line = {"hsa": "ROCr (hsa)", "xrt": "XRT (xrt)"}.get(runtime)
ok = report.get("usable") and any(
    c["component"] == line and c["status"] == "ok" for c in report.get("components", []))
print("yes" if ok else "no")
PY
)
if [ "$device_ok" = yes ]; then
  echo "== NPU, toolchain and runtime found: running examples/vector_add.py for real"
  exec "$venv/bin/python" "$root/examples/vector_add.py"
fi
echo "== No usable NPU/toolchain here (see 'triton-npu doctor'): running on the conformance"
echo "== harness. The toolchain and the device are software stand-ins: NO NPU CODE RUNS."
make -C "$root" -s harness >/dev/null
set -a
# shellcheck disable=SC1091
source "$root/target/harness/env.sh"
set +a
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
for runtime in xrt hsa; do
  echo
  echo "-- AMD_TRITON_NPU_RUNTIME=$runtime"
  AMD_TRITON_NPU_RUNTIME=$runtime AMD_TRITON_NPU_CACHE_DIR="$cache/npu" TRITON_CACHE_DIR="$cache/triton" \
    "$venv/bin/python" "$root/examples/vector_add.py"
done
