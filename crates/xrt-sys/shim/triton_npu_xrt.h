/*
 * triton_npu_xrt.h — the C ABI of triton-npu's XRT shim (libtriton_npu_xrt.so).
 *
 * XRT's NPU flows (xrt::hw_context, xrt::device::register_xclbin, xrt::elf, xrt::ext::kernel,
 * xrt::ext::bo) exist only in XRT's C++ API. This header is the small C surface the Rust
 * runtime loads at run time; triton_npu_xrt.cpp implements it over XRT >= 2.19, and the
 * conformance harness implements the same ABI in software (tests/harness/xrt-standin).
 *
 * Conventions
 *  - Every call that can fail returns a status (TRITON_NPU_XRT_OK or an error code below) and
 *    writes a NUL-terminated message into the caller's buffer `err` of `errlen` bytes (which
 *    may be NULL/0 when the caller does not want it). No C++ exception crosses this ABI.
 *  - Handles are opaque. A handle returned through an `out` pointer belongs to the caller, who
 *    releases it with the matching *_free / *_close call. Release children before parents:
 *    runs, then buffers and kernels, then contexts, then xclbins and ELFs, then the device.
 *  - Strings written into caller buffers are NUL-terminated; when a buffer is too small the
 *    text is cut and the call returns TRITON_NPU_XRT_E_TRUNCATED.
 *  - Only triton_npu_xrt_abi_version and triton_npu_xrt_state_name cannot fail; they return
 *    their value directly.
 */
#ifndef TRITON_NPU_XRT_H
#define TRITON_NPU_XRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a declaration in this header changes; the loader refuses a mismatch. */
#define TRITON_NPU_XRT_ABI_VERSION 1

/* Status codes. */
#define TRITON_NPU_XRT_OK 0
/* A bad argument to the shim itself (NULL handle or output pointer, unknown direction). */
#define TRITON_NPU_XRT_E_INVALID 1
/* XRT threw a std::exception; its what() is in err. */
#define TRITON_NPU_XRT_E_XRT 2
/* XRT threw something that is not a std::exception. */
#define TRITON_NPU_XRT_E_UNKNOWN 3
/* The thing looked for does not exist (e.g. no kernel with the requested name prefix). */
#define TRITON_NPU_XRT_E_NOT_FOUND 4
/* An output string did not fit; it was cut. */
#define TRITON_NPU_XRT_E_TRUNCATED 5
/* A run ended in a state other than ERT_CMD_STATE_COMPLETED; the state is written and the
 * command's error text is in err. */
#define TRITON_NPU_XRT_E_COMMAND 6

/* Buffer-object flags: XRT's own values (xrt/detail/xrt_mem.h). */
#define TRITON_NPU_XRT_BO_NORMAL 0u
#define TRITON_NPU_XRT_BO_CACHEABLE (1u << 24)
#define TRITON_NPU_XRT_BO_HOST_ONLY (1u << 29)

/* Sync directions: XRT's enum xclBOSyncDirection. */
#define TRITON_NPU_XRT_SYNC_TO_DEVICE 0
#define TRITON_NPU_XRT_SYNC_FROM_DEVICE 1

/* Command states: XRT's enum ert_cmd_state (xrt/detail/ert.h). */
#define TRITON_NPU_XRT_STATE_NEW 1
#define TRITON_NPU_XRT_STATE_QUEUED 2
#define TRITON_NPU_XRT_STATE_RUNNING 3
#define TRITON_NPU_XRT_STATE_COMPLETED 4
#define TRITON_NPU_XRT_STATE_ERROR 5
#define TRITON_NPU_XRT_STATE_ABORT 6
#define TRITON_NPU_XRT_STATE_SUBMITTED 7
#define TRITON_NPU_XRT_STATE_TIMEOUT 8
#define TRITON_NPU_XRT_STATE_NORESPONSE 9
#define TRITON_NPU_XRT_STATE_SKERROR 10
#define TRITON_NPU_XRT_STATE_SKCRASHED 11

typedef struct triton_npu_xrt_device triton_npu_xrt_device;
typedef struct triton_npu_xrt_xclbin triton_npu_xrt_xclbin;
typedef struct triton_npu_xrt_elf triton_npu_xrt_elf;
typedef struct triton_npu_xrt_context triton_npu_xrt_context;
typedef struct triton_npu_xrt_kernel triton_npu_xrt_kernel;
typedef struct triton_npu_xrt_bo triton_npu_xrt_bo;
typedef struct triton_npu_xrt_run triton_npu_xrt_run;

/* TRITON_NPU_XRT_ABI_VERSION of the library. */
uint32_t triton_npu_xrt_abi_version(void);

/* The ERT name of a command state ("ERT_CMD_STATE_ABORT"), or "ERT_CMD_STATE_UNKNOWN". The
 * string is static. */
const char *triton_npu_xrt_state_name(int32_t state);

/* The version of the XRT library in use, e.g. "2.25.0". */
int triton_npu_xrt_version(char *buf, size_t buflen, char *err, size_t errlen);

/* Device. */
int triton_npu_xrt_device_open(uint32_t index, triton_npu_xrt_device **out, char *err,
                               size_t errlen);
/* The device's name as XRT reports it (e.g. "NPU Strix"). */
int triton_npu_xrt_device_name(triton_npu_xrt_device *device, char *buf, size_t buflen, char *err,
                               size_t errlen);
int triton_npu_xrt_device_close(triton_npu_xrt_device *device, char *err, size_t errlen);

/* xclbin: read from a file and registered with the device (no hardware resources yet). */
int triton_npu_xrt_xclbin_register(triton_npu_xrt_device *device, const char *path,
                                   triton_npu_xrt_xclbin **out, char *err, size_t errlen);
/* The first kernel whose name starts with `prefix`, and its argument count. */
int triton_npu_xrt_xclbin_find_kernel(triton_npu_xrt_xclbin *xclbin, const char *prefix,
                                      char *name, size_t namelen, uint32_t *num_args, char *err,
                                      size_t errlen);
int triton_npu_xrt_xclbin_free(triton_npu_xrt_xclbin *xclbin, char *err, size_t errlen);

/* Full ELF (npu2): read from a file. */
int triton_npu_xrt_elf_open(const char *path, triton_npu_xrt_elf **out, char *err, size_t errlen);
int triton_npu_xrt_elf_free(triton_npu_xrt_elf *elf, char *err, size_t errlen);

/* Hardware contexts: the scarce resource (the driver allows a few dozen per device). */
int triton_npu_xrt_context_from_xclbin(triton_npu_xrt_device *device,
                                       triton_npu_xrt_xclbin *xclbin,
                                       triton_npu_xrt_context **out, char *err, size_t errlen);
int triton_npu_xrt_context_from_elf(triton_npu_xrt_device *device, triton_npu_xrt_elf *elf,
                                    triton_npu_xrt_context **out, char *err, size_t errlen);
int triton_npu_xrt_context_free(triton_npu_xrt_context *context, char *err, size_t errlen);

/* Kernels: xrt::kernel(context, name) for an xclbin context, xrt::ext::kernel(context,
 * "<kernel>:<instance>") for an ELF context. */
int triton_npu_xrt_kernel_open(triton_npu_xrt_context *context, const char *name,
                               triton_npu_xrt_kernel **out, char *err, size_t errlen);
int triton_npu_xrt_ext_kernel_open(triton_npu_xrt_context *context, const char *name,
                                   triton_npu_xrt_kernel **out, char *err, size_t errlen);
/* The memory group to allocate the buffer for argument `argno` in. */
int triton_npu_xrt_kernel_group_id(triton_npu_xrt_kernel *kernel, int32_t argno, int32_t *out,
                                   char *err, size_t errlen);
int triton_npu_xrt_kernel_free(triton_npu_xrt_kernel *kernel, char *err, size_t errlen);

/* Buffer objects: xrt::bo(device, size, flags, group) and xrt::ext::bo(device, size). */
int triton_npu_xrt_bo_alloc(triton_npu_xrt_device *device, size_t size, uint32_t flags,
                            int32_t group, triton_npu_xrt_bo **out, char *err, size_t errlen);
int triton_npu_xrt_ext_bo_alloc(triton_npu_xrt_device *device, size_t size,
                                triton_npu_xrt_bo **out, char *err, size_t errlen);
/* The host mapping of the buffer; valid until the buffer is freed. */
int triton_npu_xrt_bo_map(triton_npu_xrt_bo *bo, void **out, char *err, size_t errlen);
int triton_npu_xrt_bo_sync(triton_npu_xrt_bo *bo, int32_t direction, size_t size, size_t offset,
                           char *err, size_t errlen);
int triton_npu_xrt_bo_free(triton_npu_xrt_bo *bo, char *err, size_t errlen);

/* Runs: set every argument, start, wait. */
int triton_npu_xrt_run_create(triton_npu_xrt_kernel *kernel, triton_npu_xrt_run **out, char *err,
                              size_t errlen);
int triton_npu_xrt_run_set_arg_bo(triton_npu_xrt_run *run, int32_t index, triton_npu_xrt_bo *bo,
                                  char *err, size_t errlen);
/* A scalar argument: `size` bytes at `value`, in the kernel's declared size. */
int triton_npu_xrt_run_set_arg_scalar(triton_npu_xrt_run *run, int32_t index, const void *value,
                                      size_t size, char *err, size_t errlen);
int triton_npu_xrt_run_start(triton_npu_xrt_run *run, char *err, size_t errlen);
/* Waits up to `timeout_ms` (0 = no limit). Writes the state: COMPLETED (status OK), TIMEOUT
 * (status OK; the run is still going and the caller should abort it), or the failed state
 * with status TRITON_NPU_XRT_E_COMMAND. */
int triton_npu_xrt_run_wait(triton_npu_xrt_run *run, uint32_t timeout_ms, int32_t *state,
                            char *err, size_t errlen);
int triton_npu_xrt_run_state(triton_npu_xrt_run *run, int32_t *state, char *err, size_t errlen);
/* Aborts a started run and waits for the abort; writes the resulting state. */
int triton_npu_xrt_run_abort(triton_npu_xrt_run *run, int32_t *state, char *err, size_t errlen);
int triton_npu_xrt_run_free(triton_npu_xrt_run *run, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* TRITON_NPU_XRT_H */
