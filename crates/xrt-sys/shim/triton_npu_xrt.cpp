// triton_npu_xrt.cpp — triton-npu's XRT shim: the C ABI of triton_npu_xrt.h over XRT's C++ API.
//
// Built by `make xrt-shim` into libtriton_npu_xrt.so without linking libxrt_coreutil.so.2: the
// Rust loader dlopens XRT's coreutil with RTLD_GLOBAL first, and this library's XRT symbols
// resolve against it. Needs XRT >= 2.19 headers (hw_context from an ELF).
//
// Every entry point runs its body through `guarded`, which turns any C++ exception into a
// status code and a message: exceptions must never unwind into the Rust caller.

#include "triton_npu_xrt.h"

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_hw_context.h>
#include <xrt/xrt_kernel.h>
#include <xrt/experimental/xrt_elf.h>
#include <xrt/experimental/xrt_ext.h>
#include <xrt/experimental/xrt_version.h>
#include <xrt/experimental/xrt_xclbin.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#define TNX_EXPORT extern "C" __attribute__((visibility("default")))

struct triton_npu_xrt_device {
  xrt::device device;
};
struct triton_npu_xrt_xclbin {
  xrt::xclbin xclbin;
  xrt::uuid uuid;
};
struct triton_npu_xrt_elf {
  xrt::elf elf;
};
struct triton_npu_xrt_context {
  xrt::hw_context context;
};
struct triton_npu_xrt_kernel {
  // xrt::ext::kernel adds no state to xrt::kernel, so both kinds are held as the base handle.
  xrt::kernel kernel;
};
struct triton_npu_xrt_bo {
  xrt::bo bo;
};
struct triton_npu_xrt_run {
  xrt::run run;
};

namespace {

// Copies `text` into a caller buffer, cut to fit; true when it fitted. Never throws.
bool put_text(char *buf, size_t len, const char *text) noexcept {
  if (buf == nullptr || len == 0) {
    return true;
  }
  size_t n = std::strlen(text);
  bool fits = n < len;
  if (!fits) {
    n = len - 1;
  }
  std::memcpy(buf, text, n);
  buf[n] = '\0';
  return fits;
}

// A refusal of the shim's own arguments, reported as TRITON_NPU_XRT_E_INVALID.
struct invalid_argument {
  const char *what;
};

template <typename T> T &require(T *handle, const char *what) {
  if (handle == nullptr) {
    throw invalid_argument{what};
  }
  return *handle;
}

template <typename Body> int guarded(char *err, size_t errlen, Body &&body) noexcept {
  put_text(err, errlen, "");
  try {
    return std::forward<Body>(body)();
  } catch (const invalid_argument &e) {
    put_text(err, errlen, e.what);
    return TRITON_NPU_XRT_E_INVALID;
  } catch (const std::exception &e) {
    put_text(err, errlen, e.what());
    return TRITON_NPU_XRT_E_XRT;
  } catch (...) {
    put_text(err, errlen, "XRT threw a C++ exception that is not a std::exception");
    return TRITON_NPU_XRT_E_UNKNOWN;
  }
}

// Writes a string result, reporting truncation through the status.
int put_result(char *buf, size_t buflen, const std::string &text, char *err, size_t errlen) {
  if (buf == nullptr || buflen == 0) {
    throw invalid_argument{"output buffer is NULL or empty"};
  }
  if (put_text(buf, buflen, text.c_str())) {
    return TRITON_NPU_XRT_OK;
  }
  put_text(err, errlen, "output buffer too small; the text was cut");
  return TRITON_NPU_XRT_E_TRUNCATED;
}

template <typename Handle> int release(Handle *handle) {
  delete handle;
  return TRITON_NPU_XRT_OK;
}

} // namespace

TNX_EXPORT uint32_t triton_npu_xrt_abi_version(void) { return TRITON_NPU_XRT_ABI_VERSION; }

TNX_EXPORT const char *triton_npu_xrt_state_name(int32_t state) {
  switch (state) {
  case TRITON_NPU_XRT_STATE_NEW:
    return "ERT_CMD_STATE_NEW";
  case TRITON_NPU_XRT_STATE_QUEUED:
    return "ERT_CMD_STATE_QUEUED";
  case TRITON_NPU_XRT_STATE_RUNNING:
    return "ERT_CMD_STATE_RUNNING";
  case TRITON_NPU_XRT_STATE_COMPLETED:
    return "ERT_CMD_STATE_COMPLETED";
  case TRITON_NPU_XRT_STATE_ERROR:
    return "ERT_CMD_STATE_ERROR";
  case TRITON_NPU_XRT_STATE_ABORT:
    return "ERT_CMD_STATE_ABORT";
  case TRITON_NPU_XRT_STATE_SUBMITTED:
    return "ERT_CMD_STATE_SUBMITTED";
  case TRITON_NPU_XRT_STATE_TIMEOUT:
    return "ERT_CMD_STATE_TIMEOUT";
  case TRITON_NPU_XRT_STATE_NORESPONSE:
    return "ERT_CMD_STATE_NORESPONSE";
  case TRITON_NPU_XRT_STATE_SKERROR:
    return "ERT_CMD_STATE_SKERROR";
  case TRITON_NPU_XRT_STATE_SKCRASHED:
    return "ERT_CMD_STATE_SKCRASHED";
  default:
    return "ERT_CMD_STATE_UNKNOWN";
  }
}

TNX_EXPORT int triton_npu_xrt_version(char *buf, size_t buflen, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    std::string text = std::to_string(xrt::version::major()) + "." +
                       std::to_string(xrt::version::minor()) + "." +
                       std::to_string(xrt::version::patch());
    return put_result(buf, buflen, text, err, errlen);
  });
}

TNX_EXPORT int triton_npu_xrt_device_open(uint32_t index, triton_npu_xrt_device **out, char *err,
                                          size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &slot = require(out, "device_open: out is NULL");
    slot = new triton_npu_xrt_device{xrt::device{index}};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_device_name(triton_npu_xrt_device *device, char *buf,
                                          size_t buflen, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &dev = require(device, "device_name: device is NULL");
    auto name = dev.device.get_info<xrt::info::device::name>();
    return put_result(buf, buflen, name, err, errlen);
  });
}

TNX_EXPORT int triton_npu_xrt_device_close(triton_npu_xrt_device *device, char *err,
                                           size_t errlen) {
  return guarded(err, errlen, [&] { return release(device); });
}

TNX_EXPORT int triton_npu_xrt_xclbin_register(triton_npu_xrt_device *device, const char *path,
                                              triton_npu_xrt_xclbin **out, char *err,
                                              size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &dev = require(device, "xclbin_register: device is NULL");
    require(path, "xclbin_register: path is NULL");
    auto &slot = require(out, "xclbin_register: out is NULL");
    xrt::xclbin xclbin{std::string{path}};
    // On the NPU, registration only records the xclbin; it is loaded when a context is made.
    xrt::uuid uuid = dev.device.register_xclbin(xclbin);
    slot = new triton_npu_xrt_xclbin{std::move(xclbin), uuid};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_xclbin_find_kernel(triton_npu_xrt_xclbin *xclbin,
                                                 const char *prefix, char *name, size_t namelen,
                                                 uint32_t *num_args, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &xb = require(xclbin, "xclbin_find_kernel: xclbin is NULL");
    require(prefix, "xclbin_find_kernel: prefix is NULL");
    auto &args = require(num_args, "xclbin_find_kernel: num_args is NULL");
    std::string wanted{prefix};
    std::string seen;
    for (const auto &kernel : xb.xclbin.get_kernels()) {
      std::string kname = kernel.get_name();
      if (kname.compare(0, wanted.size(), wanted) == 0) {
        args = static_cast<uint32_t>(kernel.get_num_args());
        return put_result(name, namelen, kname, err, errlen);
      }
      seen += seen.empty() ? kname : ", " + kname;
    }
    std::string message = "no kernel whose name starts with \"" + wanted + "\" (kernels: " +
                          (seen.empty() ? std::string{"none"} : seen) + ")";
    put_text(err, errlen, message.c_str());
    return TRITON_NPU_XRT_E_NOT_FOUND;
  });
}

TNX_EXPORT int triton_npu_xrt_xclbin_free(triton_npu_xrt_xclbin *xclbin, char *err,
                                          size_t errlen) {
  return guarded(err, errlen, [&] { return release(xclbin); });
}

TNX_EXPORT int triton_npu_xrt_elf_open(const char *path, triton_npu_xrt_elf **out, char *err,
                                       size_t errlen) {
  return guarded(err, errlen, [&] {
    require(path, "elf_open: path is NULL");
    auto &slot = require(out, "elf_open: out is NULL");
    slot = new triton_npu_xrt_elf{xrt::elf{std::string{path}}};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_elf_free(triton_npu_xrt_elf *elf, char *err, size_t errlen) {
  return guarded(err, errlen, [&] { return release(elf); });
}

TNX_EXPORT int triton_npu_xrt_context_from_xclbin(triton_npu_xrt_device *device,
                                                  triton_npu_xrt_xclbin *xclbin,
                                                  triton_npu_xrt_context **out, char *err,
                                                  size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &dev = require(device, "context_from_xclbin: device is NULL");
    auto &xb = require(xclbin, "context_from_xclbin: xclbin is NULL");
    auto &slot = require(out, "context_from_xclbin: out is NULL");
    slot = new triton_npu_xrt_context{xrt::hw_context{dev.device, xb.uuid}};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_context_from_elf(triton_npu_xrt_device *device,
                                               triton_npu_xrt_elf *elf,
                                               triton_npu_xrt_context **out, char *err,
                                               size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &dev = require(device, "context_from_elf: device is NULL");
    auto &e = require(elf, "context_from_elf: elf is NULL");
    auto &slot = require(out, "context_from_elf: out is NULL");
    slot = new triton_npu_xrt_context{xrt::hw_context{dev.device, e.elf}};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_context_free(triton_npu_xrt_context *context, char *err,
                                           size_t errlen) {
  return guarded(err, errlen, [&] { return release(context); });
}

TNX_EXPORT int triton_npu_xrt_kernel_open(triton_npu_xrt_context *context, const char *name,
                                          triton_npu_xrt_kernel **out, char *err,
                                          size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &ctx = require(context, "kernel_open: context is NULL");
    require(name, "kernel_open: name is NULL");
    auto &slot = require(out, "kernel_open: out is NULL");
    slot = new triton_npu_xrt_kernel{xrt::kernel{ctx.context, std::string{name}}};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_ext_kernel_open(triton_npu_xrt_context *context, const char *name,
                                              triton_npu_xrt_kernel **out, char *err,
                                              size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &ctx = require(context, "ext_kernel_open: context is NULL");
    require(name, "ext_kernel_open: name is NULL");
    auto &slot = require(out, "ext_kernel_open: out is NULL");
    xrt::kernel kernel = xrt::ext::kernel{ctx.context, std::string{name}};
    slot = new triton_npu_xrt_kernel{std::move(kernel)};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_kernel_group_id(triton_npu_xrt_kernel *kernel, int32_t argno,
                                              int32_t *out, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &k = require(kernel, "kernel_group_id: kernel is NULL");
    auto &slot = require(out, "kernel_group_id: out is NULL");
    slot = static_cast<int32_t>(k.kernel.group_id(static_cast<int>(argno)));
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_kernel_free(triton_npu_xrt_kernel *kernel, char *err,
                                          size_t errlen) {
  return guarded(err, errlen, [&] { return release(kernel); });
}

TNX_EXPORT int triton_npu_xrt_bo_alloc(triton_npu_xrt_device *device, size_t size,
                                       uint32_t flags, int32_t group, triton_npu_xrt_bo **out,
                                       char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &dev = require(device, "bo_alloc: device is NULL");
    auto &slot = require(out, "bo_alloc: out is NULL");
    xrt::bo bo{dev.device, size, static_cast<xrt::bo::flags>(flags),
               static_cast<xrt::memory_group>(group)};
    slot = new triton_npu_xrt_bo{std::move(bo)};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_ext_bo_alloc(triton_npu_xrt_device *device, size_t size,
                                           triton_npu_xrt_bo **out, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &dev = require(device, "ext_bo_alloc: device is NULL");
    auto &slot = require(out, "ext_bo_alloc: out is NULL");
    xrt::bo bo = xrt::ext::bo{dev.device, size};
    slot = new triton_npu_xrt_bo{std::move(bo)};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_bo_map(triton_npu_xrt_bo *bo, void **out, char *err,
                                     size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &b = require(bo, "bo_map: bo is NULL");
    auto &slot = require(out, "bo_map: out is NULL");
    slot = b.bo.map();
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_bo_sync(triton_npu_xrt_bo *bo, int32_t direction, size_t size,
                                      size_t offset, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &b = require(bo, "bo_sync: bo is NULL");
    xclBOSyncDirection dir;
    switch (direction) {
    case TRITON_NPU_XRT_SYNC_TO_DEVICE:
      dir = XCL_BO_SYNC_BO_TO_DEVICE;
      break;
    case TRITON_NPU_XRT_SYNC_FROM_DEVICE:
      dir = XCL_BO_SYNC_BO_FROM_DEVICE;
      break;
    default:
      throw invalid_argument{"bo_sync: direction is neither TO_DEVICE (0) nor FROM_DEVICE (1)"};
    }
    b.bo.sync(dir, size, offset);
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_bo_free(triton_npu_xrt_bo *bo, char *err, size_t errlen) {
  return guarded(err, errlen, [&] { return release(bo); });
}

TNX_EXPORT int triton_npu_xrt_run_create(triton_npu_xrt_kernel *kernel, triton_npu_xrt_run **out,
                                         char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &k = require(kernel, "run_create: kernel is NULL");
    auto &slot = require(out, "run_create: out is NULL");
    slot = new triton_npu_xrt_run{xrt::run{k.kernel}};
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_run_set_arg_bo(triton_npu_xrt_run *run, int32_t index,
                                             triton_npu_xrt_bo *bo, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &r = require(run, "run_set_arg_bo: run is NULL");
    auto &b = require(bo, "run_set_arg_bo: bo is NULL");
    r.run.set_arg(static_cast<int>(index), b.bo);
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_run_set_arg_scalar(triton_npu_xrt_run *run, int32_t index,
                                                 const void *value, size_t size, char *err,
                                                 size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &r = require(run, "run_set_arg_scalar: run is NULL");
    if (value == nullptr) {
      throw invalid_argument{"run_set_arg_scalar: value is NULL"};
    }
    r.run.set_arg(static_cast<int>(index), value, size);
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_run_start(triton_npu_xrt_run *run, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    require(run, "run_start: run is NULL").run.start();
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_run_wait(triton_npu_xrt_run *run, uint32_t timeout_ms,
                                       int32_t *state, char *err, size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &r = require(run, "run_wait: run is NULL");
    auto &slot = require(state, "run_wait: state is NULL");
    try {
      // wait2 throws command_error, which carries the driver's error text, for any end state
      // but COMPLETED; a plain wait() would only give the state.
      auto status = r.run.wait2(std::chrono::milliseconds{timeout_ms});
      slot = status == std::cv_status::timeout ? TRITON_NPU_XRT_STATE_TIMEOUT
                                               : TRITON_NPU_XRT_STATE_COMPLETED;
      return TRITON_NPU_XRT_OK;
    } catch (const xrt::run::command_error &e) {
      slot = static_cast<int32_t>(e.get_command_state());
      put_text(err, errlen, e.what());
      return TRITON_NPU_XRT_E_COMMAND;
    }
  });
}

TNX_EXPORT int triton_npu_xrt_run_state(triton_npu_xrt_run *run, int32_t *state, char *err,
                                        size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &r = require(run, "run_state: run is NULL");
    require(state, "run_state: state is NULL") = static_cast<int32_t>(r.run.state());
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_run_abort(triton_npu_xrt_run *run, int32_t *state, char *err,
                                        size_t errlen) {
  return guarded(err, errlen, [&] {
    auto &r = require(run, "run_abort: run is NULL");
    require(state, "run_abort: state is NULL") = static_cast<int32_t>(r.run.abort());
    return TRITON_NPU_XRT_OK;
  });
}

TNX_EXPORT int triton_npu_xrt_run_free(triton_npu_xrt_run *run, char *err, size_t errlen) {
  return guarded(err, errlen, [&] { return release(run); });
}
