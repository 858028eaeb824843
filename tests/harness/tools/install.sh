#!/usr/bin/env bash
# Installs the stand-in toolchain (tests only) into PREFIX, laid out like a real installation:
#   PREFIX/mlir-air/bin/{air-opt,aircc}   found through MLIR_AIR_INSTALL_DIR
#   PREFIX/peano/bin/llc                  found through PEANO_INSTALL_DIR (--version lists aie2)
#   PREFIX/bin/triton-shared-opt          found through TRITON_SHARED_OPT_PATH
# Usage: install.sh PREFIX RELEASE_BIN_DIR. Prints the export lines for target/harness/env.sh.
set -euo pipefail
prefix=$1
bindir=$2
install_tool() {
  local from="$bindir/$1" to="$prefix/$2"
  if [ ! -x "$from" ]; then
    echo "tests/harness/tools/install.sh: $from is missing; build it first:" \
      "cargo build --release -p npu-harness-tools" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$to")"
  cp -f "$from" "$to"
}
install_tool npu-harness-air-opt mlir-air/bin/air-opt
install_tool npu-harness-aircc mlir-air/bin/aircc
install_tool npu-harness-llc peano/bin/llc
install_tool npu-harness-triton-shared-opt bin/triton-shared-opt
echo "export MLIR_AIR_INSTALL_DIR=\"$prefix/mlir-air\""
echo "export PEANO_INSTALL_DIR=\"$prefix/peano\""
echo "export TRITON_SHARED_OPT_PATH=\"$prefix/bin/triton-shared-opt\""
