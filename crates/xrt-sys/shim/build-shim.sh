#!/usr/bin/env bash
# Builds or checks triton-npu's XRT shim (triton_npu_xrt.cpp). Called by mk/xrt.mk.
#
#   build-shim.sh build OUTDIR   compile OUTDIR/libtriton_npu_xrt.so against the first XRT >= 2.19
#                                headers found; without any, say so and why, and succeed
#   build-shim.sh check OUTDIR   fetch Debian's libxrt-dev headers (third_party/versions.txt) and
#                                compile the shim against them with warnings as errors; fails if
#                                the shim misuses XRT's API
#
# Header search order (an XRT root has include/xrt/xrt_device.h):
#   $AMD_TRITON_NPU_XRT_DIR, $XRT_DEV_DIR, $XILINX_XRT, /opt/xilinx/xrt, the system include dirs
#   (/usr/include, /usr/local/include), third_party/debian/libxrt-dev/usr.
#
# The library is not linked against libxrt_coreutil.so.2 (it cannot be, where only headers
# exist): its XRT symbols stay undefined and resolve at run time against the coreutil that the
# Rust loader (crates/xrt-sys) dlopens with RTLD_GLOBAL before loading the shim.
set -euo pipefail
mode=${1:?usage: build-shim.sh build|check OUTDIR}
out=${2:?usage: build-shim.sh build|check OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cxx=${CXX:-g++}
src="$here/triton_npu_xrt.cpp"
hdr="$here/triton_npu_xrt.h"
cxxflags=(-std=c++17 -O2 -fPIC -fvisibility=hidden -Wall -Wextra -Werror -pedantic)

# Succeeds when $1 holds XRT headers of version 2.19 or newer; prints why not otherwise.
probe_headers() {
  local inc=$1
  if [ ! -f "$inc/xrt/xrt_device.h" ]; then
    echo "no xrt/xrt_device.h"
    return 1
  fi
  local log
  if ! log=$("$cxx" -std=c++17 -fsyntax-only -x c++ -isystem "$inc" - 2>&1 <<'PROBE'
#if __has_include(<xrt/detail/version-slim.h>)
#include <xrt/detail/version-slim.h>
#elif __has_include(<xrt/detail/version.h>)
#include <xrt/detail/version.h>
#elif __has_include(<xrt/version.h>)
#include <xrt/version.h>
#endif
#if !defined(XRT_VERSION_CODE) || XRT_VERSION_CODE < XRT_VERSION(2, 19)
#error XRT headers older than 2.19 (no hw_context from an ELF)
#endif
PROBE
  ); then
    echo "headers present but rejected: $(echo "$log" | grep -m1 -o 'error:.*' || echo "$log" | head -n1)"
    return 1
  fi
}

# The XRT version the headers in $1 declare, as major.minor (for messages only).
header_version() {
  sed -n 's/.*define XRT_VERSION_CODE XRT_VERSION(\([0-9]*\), *\([0-9]*\)).*/\1.\2/p' \
    "$1/xrt/detail/version-slim.h" 2>/dev/null | head -n1
}

compile_object() {
  local inc=$1 object=$2
  mkdir -p "$(dirname "$object")"
  "$cxx" "${cxxflags[@]}" -isystem "$inc" -c "$src" -o "$object"
}

case "$mode" in
build)
  candidates=()
  labels=()
  add() { candidates+=("$2"); labels+=("$1"); }
  [ -n "${AMD_TRITON_NPU_XRT_DIR:-}" ] && add AMD_TRITON_NPU_XRT_DIR "$AMD_TRITON_NPU_XRT_DIR/include"
  [ -n "${XRT_DEV_DIR:-}" ] && add XRT_DEV_DIR "$XRT_DEV_DIR/include"
  [ -n "${XILINX_XRT:-}" ] && add XILINX_XRT "$XILINX_XRT/include"
  add /opt/xilinx/xrt /opt/xilinx/xrt/include
  add "system include dir" /usr/include
  add "system include dir" /usr/local/include
  add "third_party (Debian libxrt-dev)" "$root/third_party/debian/libxrt-dev/usr/include"
  found=""
  tried=()
  for i in "${!candidates[@]}"; do
    inc=${candidates[$i]}
    if why=$(probe_headers "$inc"); then
      found=$inc
      echo "xrt-shim: XRT $(header_version "$inc") headers from ${labels[$i]}: $inc"
      break
    fi
    tried+=("  ${labels[$i]}: $inc: $why")
  done
  if [ -z "$found" ]; then
    echo "xrt-shim: skipped, no XRT >= 2.19 headers found. Looked in:"
    printf '%s\n' "${tried[@]}"
    echo "  Install XRT (with its development headers), point AMD_TRITON_NPU_XRT_DIR at an XRT"
    echo "  root, or run third_party/fetch-debian-headers.sh libxrt-dev, then re-run make xrt-shim."
    exit 0
  fi
  mkdir -p "$out"
  compile_object "$found" "$out/triton_npu_xrt.o"
  "$cxx" -shared -o "$out/libtriton_npu_xrt.so.tmp" -Wl,-soname,libtriton_npu_xrt.so \
    "$out/triton_npu_xrt.o"
  mv "$out/libtriton_npu_xrt.so.tmp" "$out/libtriton_npu_xrt.so"
  echo "xrt-shim: built $out/libtriton_npu_xrt.so (select it with AMD_TRITON_NPU_XRT_SHIM, or ship it"
  echo "  next to the triton_npu extension module; it needs libxrt_coreutil.so.2 at run time)"
  ;;
check)
  "$root/third_party/fetch-debian-headers.sh" libxrt-dev
  deb="$root/third_party/debian/libxrt-dev/usr"
  inc="$deb/include"
  why=$(probe_headers "$inc") || { echo "xrt-shim-check: $inc: $why" >&2; exit 1; }
  object="$out/triton_npu_xrt.o"
  compile_object "$inc" "$object"
  # The header must stay plain C: the Rust bindings and the stand-in are generated from it.
  "${CC:-cc}" -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c "$hdr"
  # Every function the header declares is defined and exported by the object.
  declared=$(grep -oE '\btriton_npu_xrt_[a-z_0-9]+\(' "$hdr" | tr -d '(' | sort -u)
  defined=$(nm --defined-only -g "$object" | awk '$2 == "T" { print $3 }' | sort -u)
  missing=$(comm -23 <(echo "$declared") <(echo "$defined"))
  if [ -n "$missing" ]; then
    echo "xrt-shim-check: declared in triton_npu_xrt.h but not defined by the shim:" >&2
    echo "$missing" >&2
    exit 1
  fi
  extra=$(comm -13 <(echo "$declared") <(echo "$defined"))
  if [ -n "$extra" ]; then
    echo "xrt-shim-check: exported by the shim but not declared in triton_npu_xrt.h:" >&2
    echo "$extra" >&2
    exit 1
  fi
  # Every XRT symbol the shim needs exists in XRT's coreutil (the static archive of the same
  # build carries the same symbols as libxrt_coreutil.so.2): a header-only inline that is not
  # exported, or an API from a newer XRT, fails here rather than at dlopen on a user's machine.
  archive=$(ls "$deb"/lib/*/libxrt_coreutil.a 2>/dev/null | head -n1 || true)
  if [ -z "$archive" ]; then
    echo "xrt-shim-check: no libxrt_coreutil.a in $deb/lib to check symbols against" >&2
    exit 1
  fi
  needed=$(nm -u "$object" | awk '{ print $2 }' | grep -E '^_Z(TI|TV|TS)?NK?3xrt' | sort -u)
  provided=$(nm --defined-only "$archive" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u)
  unresolved=$(comm -23 <(echo "$needed") <(echo "$provided"))
  if [ -n "$unresolved" ]; then
    echo "xrt-shim-check: XRT symbols the shim uses that libxrt_coreutil does not define:" >&2
    echo "$unresolved" | c++filt >&2
    exit 1
  fi
  echo "xrt-shim-check: the shim compiles against XRT $(cut -d: -f2 "$root/third_party/debian/libxrt-dev/.version") headers;" \
    "$(echo "$declared" | wc -l) functions exported, $(echo "$needed" | wc -l) XRT symbols all in $(basename "$archive")"
  ;;
*)
  echo "usage: build-shim.sh build|check OUTDIR" >&2
  exit 2
  ;;
esac
