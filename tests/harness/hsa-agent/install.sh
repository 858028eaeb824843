#!/usr/bin/env bash
# Installs the software HSA agent (tests only) into PREFIX as a ROCr-shaped prefix:
#   PREFIX/rocr/lib/libhsa-runtime64.so   found through AMD_NPU_ROCR_PATH
#   PREFIX/rocr/include/hsa/hsa_ext_amd_aie.h   the AIE extension discovery requires
# Usage: install.sh PREFIX RELEASE_BIN_DIR. Prints the export line for target/harness/env.sh.
# The agent reads, at hsa_init: NPU_HARNESS_AGENT (aie2 | aie2p | none), NPU_HARNESS_COLUMNS,
# NPU_HARNESS_FAULT (queue_error | hang | signal_negative, optionally :N), NPU_HARNESS_DOORBELL
# (async | sync) and NPU_HARNESS_HANG_MS; see tests/harness/hsa-agent/README.md.
set -euo pipefail
prefix=$1
bindir=$2
from="$bindir/libnpu_harness_hsa_agent.so"
if [ ! -f "$from" ]; then
  echo "tests/harness/hsa-agent/install.sh: $from is missing; build it first:" \
    "cargo build --release -p npu-harness-hsa-agent" >&2
  exit 1
fi
mkdir -p "$prefix/rocr/lib" "$prefix/rocr/include/hsa"
cp -f "$(dirname "$0")/include/hsa/hsa_ext_amd_aie.h" "$prefix/rocr/include/hsa/"
# Copy to a temporary name and rename, so a process that has the old library loaded keeps it.
cp -f "$from" "$prefix/rocr/lib/.libhsa-runtime64.so.tmp"
mv -f "$prefix/rocr/lib/.libhsa-runtime64.so.tmp" "$prefix/rocr/lib/libhsa-runtime64.so"
echo "export AMD_NPU_ROCR_PATH=\"$prefix/rocr\""
