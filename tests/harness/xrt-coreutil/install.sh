#!/usr/bin/env bash
# Installs the C++ XRT path of the harness into PREFIX/xrt-cxx (tests only):
#   lib/libxrt_coreutil.so.2   the XRT stand-in (coreutil.cpp), built against Debian's
#                              libxrt-dev headers (third_party/fetch-debian-headers.sh)
#   lib/libnpu_harness_xrt.so  the harness device it drives (the xrt-standin cdylib)
#   shim/libtriton_npu_xrt.so  triton-npu's real XRT shim (crates/xrt-sys/shim), built by
#                              build-shim.sh against the same headers
# and prints the lines that select it, as a user selects an installed XRT:
# AMD_TRITON_NPU_XRT_SHIM=$NPU_HARNESS_XRT_CXX/shim/libtriton_npu_xrt.so and
# XILINX_XRT=$NPU_HARNESS_XRT_CXX, where the XRT loader finds lib/libxrt_coreutil.so.2. This is
# the harness's default XRT, so every XRT test runs our C++ shim.
#   install.sh PREFIX RELEASE_BIN_DIR
set -euo pipefail
prefix=${1:?usage: install.sh PREFIX RELEASE_BIN_DIR}
bindir=${2:?usage: install.sh PREFIX RELEASE_BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cxx=${CXX:-g++}
device="$bindir/libnpu_harness_xrt.so"
if [ ! -f "$device" ]; then
  echo "xrt-coreutil/install.sh: $device is missing; build it with cargo build --release -p npu-harness-xrt" >&2
  exit 1
fi
if [ ! -f /usr/include/uuid/uuid.h ]; then
  echo "xrt-coreutil/install.sh: XRT's headers need <uuid/uuid.h>: apt-get install uuid-dev (make harness does)" >&2
  exit 1
fi
# Everything but the export line goes to stderr: stdout becomes env.sh.
"$root/third_party/fetch-debian-headers.sh" libxrt-dev >&2
xrt="$root/third_party/debian/libxrt-dev/usr"
out="$prefix/xrt-cxx"
mkdir -p "$out/lib" "$out/shim"
"$cxx" -std=c++17 -O2 -fPIC -Wall -Wextra -Werror -isystem "$xrt/include" -shared \
  -Wl,-soname,libxrt_coreutil.so.2 -o "$out/lib/libxrt_coreutil.so.2.tmp" \
  "$here/coreutil.cpp" -luuid -ldl
mv "$out/lib/libxrt_coreutil.so.2.tmp" "$out/lib/libxrt_coreutil.so.2"
cp "$device" "$out/lib/libnpu_harness_xrt.so.tmp"
mv "$out/lib/libnpu_harness_xrt.so.tmp" "$out/lib/libnpu_harness_xrt.so"
AMD_TRITON_NPU_XRT_DIR="$xrt" XRT_DEV_DIR="" XILINX_XRT="" \
  bash "$root/crates/xrt-sys/shim/build-shim.sh" build "$out/shim" >&2
if [ ! -f "$out/shim/libtriton_npu_xrt.so" ]; then
  echo "xrt-coreutil/install.sh: the shim was not built (see above)" >&2
  exit 1
fi
echo "export NPU_HARNESS_XRT_CXX=\"$out\""
# The harness's XRT: our shim over this coreutil, found as an installed XRT's is.
echo "export AMD_TRITON_NPU_XRT_SHIM=\"$out/shim/libtriton_npu_xrt.so\""
echo "export XILINX_XRT=\"$out\""
# The software device in use (its test-only counters: npu_harness_xrt_stats).
echo "export NPU_HARNESS_XRT_DEVICE_LIB=\"$out/lib/libnpu_harness_xrt.so\""
