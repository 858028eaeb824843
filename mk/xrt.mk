# XRT shim targets (included from the top-level Makefile).
#
#   make xrt-shim        build target/xrt-shim/libtriton_npu_xrt.so when XRT >= 2.19 headers are
#                        found (AMD_TRITON_NPU_XRT_DIR, XRT_DEV_DIR, XILINX_XRT, /opt/xilinx/xrt,
#                        system include dirs, third_party/debian/libxrt-dev); otherwise print that
#                        it is skipped and why
#   make xrt-shim-check  fetch Debian's libxrt-dev headers and compile the shim against them;
#                        fails if the shim misuses XRT's API (part of `make test`)
#
# The recipes live in crates/xrt-sys/shim/build-shim.sh.

XRT_MK_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

.PHONY: xrt-shim xrt-shim-check

xrt-shim:
	@bash "$(XRT_MK_ROOT)/crates/xrt-sys/shim/build-shim.sh" build "$(XRT_MK_ROOT)/target/xrt-shim"

xrt-shim-check: uuid-dev
	@bash "$(XRT_MK_ROOT)/crates/xrt-sys/shim/build-shim.sh" check "$(XRT_MK_ROOT)/target/xrt-shim/check"
