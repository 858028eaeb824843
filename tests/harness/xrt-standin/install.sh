#!/usr/bin/env bash
# Installs the XRT stand-in into the harness prefix as PREFIX/xrt/lib/libtriton_npu_xrt.so and
# prints the line that names it (NPU_HARNESS_XRT_STANDIN_SHIM). The harness's default XRT is
# the real shim over ../xrt-coreutil (which exports AMD_TRITON_NPU_XRT_SHIM); a test that wants
# this Rust implementation of the shim's ABI selects it as a custom shim is selected:
# AMD_TRITON_NPU_XRT_SHIM=$NPU_HARNESS_XRT_STANDIN_SHIM.
#   install.sh PREFIX RELEASE_BIN_DIR
set -euo pipefail
prefix=${1:?usage: install.sh PREFIX RELEASE_BIN_DIR}
bindir=${2:?usage: install.sh PREFIX RELEASE_BIN_DIR}
lib="$bindir/libnpu_harness_xrt.so"
if [ ! -f "$lib" ]; then
  echo "xrt-standin/install.sh: $lib is missing; build it with cargo build --release -p npu-harness-xrt" >&2
  exit 1
fi
mkdir -p "$prefix/xrt/lib"
cp "$lib" "$prefix/xrt/lib/libtriton_npu_xrt.so.tmp"
mv "$prefix/xrt/lib/libtriton_npu_xrt.so.tmp" "$prefix/xrt/lib/libtriton_npu_xrt.so"
echo "export NPU_HARNESS_XRT_STANDIN_SHIM=\"$prefix/xrt/lib/libtriton_npu_xrt.so\""
