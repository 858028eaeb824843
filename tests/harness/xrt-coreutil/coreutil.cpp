// coreutil.cpp — conformance harness only: a stand-in for XRT's libxrt_coreutil.so.2, so that
// triton-npu's real XRT shim (crates/xrt-sys/shim/triton_npu_xrt.cpp) is the code the tests run.
//
// It defines the part of XRT's C++ API the shim calls (xrt::device, xrt::xclbin, xrt::elf,
// xrt::hw_context, xrt::kernel, xrt::ext::kernel, xrt::bo, xrt::ext::bo, xrt::run,
// xrt::run::command_error, xrt::version; and xrt::bo::size, which the benchmark's model of
// upstream's launcher reaches through bo::sync(direction)), compiled against the same XRT
// headers as the shim, so every symbol and class layout is XRT's. The device behind it is the harness's software XRT
// device (tests/harness/xrt-standin, libnpu_harness_xrt.so, found next to this library): each
// C++ call maps onto one call of that library's C ABI, which enforces XRT's and amdxdna's rules
// and runs the harness program. Failures are thrown as XRT throws them (std::runtime_error, and
// xrt::run::command_error from wait2), so the shim's own exception handling is exercised.
//
// `npu_harness_coreutil_calls()` (not XRT API) counts the XRT API calls made through this
// library, so a test can tell that the shim, not the Rust stand-in directly, served a launch.

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_hw_context.h>
#include <xrt/xrt_kernel.h>
#include <xrt/experimental/xrt_elf.h>
#include <xrt/experimental/xrt_ext.h>
#include <xrt/experimental/xrt_version.h>
#include <xrt/experimental/xrt_xclbin.h>

#include "../../../crates/xrt-sys/shim/triton_npu_xrt.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#define HARNESS_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::atomic<unsigned long> api_calls{0};

// Every function of the harness device's C ABI (triton_npu_xrt.h) the coreutil calls.
#define HARNESS_FNS(X) \
  X(device_open) \
  X(device_name) \
  X(device_close) \
  X(xclbin_register) \
  X(xclbin_find_kernel) \
  X(xclbin_free) \
  X(elf_open) \
  X(elf_free) \
  X(context_from_xclbin) \
  X(context_from_elf) \
  X(context_free) \
  X(kernel_open) \
  X(ext_kernel_open) \
  X(kernel_group_id) \
  X(kernel_free) \
  X(bo_alloc) \
  X(ext_bo_alloc) \
  X(bo_map) \
  X(bo_sync) \
  X(bo_free) \
  X(run_create) \
  X(run_set_arg_bo) \
  X(run_set_arg_scalar) \
  X(run_start) \
  X(run_wait) \
  X(run_state) \
  X(run_abort) \
  X(run_free)

// That ABI, loaded from libnpu_harness_xrt.so in this library's own directory. Loaded
// RTLD_LOCAL: its exports share the shim's names.
struct Device {
#define HARNESS_FIELD(name) decltype(&::triton_npu_xrt_##name) name = nullptr;
  HARNESS_FNS(HARNESS_FIELD)
#undef HARNESS_FIELD
};

const Device &device_lib() {
  static std::once_flag once;
  static Device lib;
  static std::string failure;
  std::call_once(once, [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&device_lib), &info) == 0 || info.dli_fname == nullptr) {
      failure = "npu-harness coreutil: cannot find its own path";
      return;
    }
    std::string path{info.dli_fname};
    path = path.substr(0, path.rfind('/') + 1) + "libnpu_harness_xrt.so";
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      failure = std::string{"npu-harness coreutil: cannot load the harness device "} + path +
                ": " + dlerror();
      return;
    }
#define HARNESS_LOAD(name)                                                                       \
  lib.name = reinterpret_cast<decltype(lib.name)>(dlsym(handle, "triton_npu_xrt_" #name));     \
  if (lib.name == nullptr) {                                                                   \
    failure = "npu-harness coreutil: " + path + " lacks triton_npu_xrt_" #name;               \
    return;                                                                                    \
  }
    HARNESS_FNS(HARNESS_LOAD)
#undef HARNESS_LOAD
  });
  if (!failure.empty()) {
    throw std::runtime_error(failure);
  }
  return lib;
}

// The message buffer of one harness call.
struct Err {
  char text[1024] = {0};
};

// Counts an XRT API call and returns the harness device.
const Device &api() {
  api_calls.fetch_add(1, std::memory_order_relaxed);
  return device_lib();
}

// Throws what XRT throws for a failed call: a std::runtime_error with the driver's text.
void check(int status, const Err &err) {
  if (status != TRITON_NPU_XRT_OK) {
    throw std::runtime_error(err.text);
  }
}

// Releases a harness handle, as XRT's destructors do: errors are not thrown from destructors.
template <typename Handle>
void release(int (*fn)(Handle *, char *, size_t), Handle *handle) noexcept {
  if (handle == nullptr) {
    return;
  }
  Err err;
  (void)fn(handle, err.text, sizeof err.text);
}

// An xclbin registered with the harness device, until the device is closed.
struct Registered {
  triton_npu_xrt_xclbin *raw = nullptr;
  ~Registered() {
    if (raw != nullptr) {
      release(device_lib().xclbin_free, raw);
    }
  }
};

} // namespace

// ---- impl classes (declared, not defined, by XRT's headers) --------------------------------

namespace xrt_core {
class device {
public:
  triton_npu_xrt_device *raw = nullptr;
  std::mutex lock;
  std::map<std::string, std::shared_ptr<Registered>> xclbins; // by uuid text
  unsigned long next_uuid = 1;
  ~device() {
    xclbins.clear();
    if (raw != nullptr) {
      release(device_lib().device_close, raw);
    }
  }
};
} // namespace xrt_core

namespace xrt {

class xclbin_impl {
public:
  std::string path;
};

class xclbin::kernel_impl {
public:
  std::string name;
  size_t num_args = 0;
};

class elf_impl {
public:
  triton_npu_xrt_elf *raw = nullptr;
  ~elf_impl() {
    if (raw != nullptr) {
      release(device_lib().elf_free, raw);
    }
  }
};

class hw_context_impl {
public:
  std::shared_ptr<xrt_core::device> device;
  std::shared_ptr<Registered> xclbin;
  std::shared_ptr<elf_impl> elf;
  triton_npu_xrt_context *raw = nullptr;
  ~hw_context_impl() {
    if (raw != nullptr) {
      release(device_lib().context_free, raw);
    }
  }
};

class kernel_impl {
public:
  std::shared_ptr<hw_context_impl> context;
  triton_npu_xrt_kernel *raw = nullptr;
  ~kernel_impl() {
    if (raw != nullptr) {
      release(device_lib().kernel_free, raw);
    }
  }
};

class bo_impl {
public:
  std::shared_ptr<xrt_core::device> device;
  triton_npu_xrt_bo *raw = nullptr;
  // What bo::size() answers: the size the buffer was made with (XRT reports the same).
  size_t bytes = 0;
  ~bo_impl() {
    if (raw != nullptr) {
      release(device_lib().bo_free, raw);
    }
  }
};

class run_impl {
public:
  std::shared_ptr<kernel_impl> kernel;
  // Buffer arguments are held by handle, not kept alive: a buffer freed after set_arg is
  // refused by the device when the run starts again (the Rust runtime sets every buffer anew).
  triton_npu_xrt_run *raw = nullptr;
  ~run_impl() {
    if (raw != nullptr) {
      release(device_lib().run_free, raw);
    }
  }
};

class run::command_error_impl {
public:
  ert_cmd_state state;
  std::string message;
};

// ---- version ---------------------------------------------------------------------------------

namespace version {
unsigned int major() { return 2; }
unsigned int minor() { return 25; }
unsigned int patch() { return 0; }
} // namespace version

// ---- device ----------------------------------------------------------------------------------

device::device(unsigned int index) {
  auto impl = std::make_shared<xrt_core::device>();
  Err err;
  check(api().device_open(index, &impl->raw, err.text, sizeof err.text), err);
  handle = std::move(impl);
}

device::~device() = default;

std::any device::get_info_std(info::device param, const xrt::detail::abi &) const {
  if (param != info::device::name) {
    throw std::runtime_error("npu-harness coreutil: only xrt::info::device::name is modelled");
  }
  char name[256] = {0};
  Err err;
  check(api().device_name(handle->raw, name, sizeof name, err.text, sizeof err.text), err);
  return std::string{name};
}

uuid device::register_xclbin(const xrt::xclbin &xclbin) {
  auto &dev = *handle;
  auto registered = std::make_shared<Registered>();
  Err err;
  check(api().xclbin_register(dev.raw, xclbin.get_handle()->path.c_str(), &registered->raw,
                              err.text, sizeof err.text),
        err);
  std::lock_guard<std::mutex> guard{dev.lock};
  // A uuid of this registration (real XRT reads it from the xclbin's header).
  xuid_t raw{};
  unsigned long n = dev.next_uuid++;
  std::memcpy(raw, &n, sizeof n);
  uuid id{raw};
  dev.xclbins[id.to_string()] = std::move(registered);
  return id;
}

// ---- xclbin ----------------------------------------------------------------------------------

xclbin::xclbin(const std::string &filename) {
  api();
  auto impl = std::make_shared<xclbin_impl>();
  impl->path = filename;
  handle = std::move(impl);
}

std::vector<xclbin::kernel> xclbin::get_kernels() const {
  // Read through a private registration, as the harness device reads xclbins; aiecc's xclbins
  // have one kernel, which is what the harness device reports.
  const auto &lib = api();
  Err err;
  triton_npu_xrt_device *dev = nullptr;
  check(lib.device_open(0, &dev, err.text, sizeof err.text), err);
  triton_npu_xrt_xclbin *xb = nullptr;
  int status = lib.xclbin_register(dev, handle->path.c_str(), &xb, err.text, sizeof err.text);
  std::vector<xclbin::kernel> kernels;
  if (status == TRITON_NPU_XRT_OK) {
    char name[256] = {0};
    uint32_t args = 0;
    status = lib.xclbin_find_kernel(xb, "", name, sizeof name, &args, err.text, sizeof err.text);
    if (status == TRITON_NPU_XRT_OK) {
      auto k = std::make_shared<kernel_impl>();
      k->name = name;
      k->num_args = args;
      kernels.emplace_back(std::move(k));
    } else if (status == TRITON_NPU_XRT_E_NOT_FOUND) {
      status = TRITON_NPU_XRT_OK; // no kernels
    }
    release(lib.xclbin_free, xb);
  }
  release(lib.device_close, dev);
  check(status, err);
  return kernels;
}

std::string xclbin::kernel::get_name() const { return get_handle()->name; }

size_t xclbin::kernel::get_num_args() const { return get_handle()->num_args; }

// ---- elf -------------------------------------------------------------------------------------

elf::elf(const std::string &fnm) {
  auto impl = std::make_shared<elf_impl>();
  Err err;
  check(api().elf_open(fnm.c_str(), &impl->raw, err.text, sizeof err.text), err);
  handle = std::move(impl);
}

// ---- hw_context ------------------------------------------------------------------------------

hw_context::hw_context(const xrt::device &device, const xrt::uuid &xclbin_id, access_mode) {
  const auto &lib = api();
  auto dev = device.get_handle();
  auto impl = std::make_shared<hw_context_impl>();
  impl->device = dev;
  {
    std::lock_guard<std::mutex> guard{dev->lock};
    auto found = dev->xclbins.find(xclbin_id.to_string());
    if (found == dev->xclbins.end()) {
      throw std::runtime_error("No xclbin with uuid " + xclbin_id.to_string() +
                               " is registered with the device (register_xclbin first)");
    }
    impl->xclbin = found->second;
  }
  Err err;
  check(lib.context_from_xclbin(dev->raw, impl->xclbin->raw, &impl->raw, err.text,
                                sizeof err.text),
        err);
  handle = std::move(impl);
}

hw_context::hw_context(const xrt::device &device, const xrt::elf &elf) {
  const auto &lib = api();
  auto impl = std::make_shared<hw_context_impl>();
  impl->device = device.get_handle();
  impl->elf = elf.get_handle();
  Err err;
  check(lib.context_from_elf(impl->device->raw, impl->elf->raw, &impl->raw, err.text,
                             sizeof err.text),
        err);
  handle = std::move(impl);
}

hw_context::~hw_context() = default;

// ---- kernels ---------------------------------------------------------------------------------

namespace {
std::shared_ptr<kernel_impl> open_kernel(const xrt::hw_context &ctx, const std::string &name,
                                         bool ext) {
  const auto &lib = api();
  auto impl = std::make_shared<kernel_impl>();
  impl->context = ctx.get_handle();
  Err err;
  auto open = ext ? lib.ext_kernel_open : lib.kernel_open;
  check(open(impl->context->raw, name.c_str(), &impl->raw, err.text, sizeof err.text), err);
  return impl;
}
} // namespace

kernel::kernel(const xrt::hw_context &ctx, const std::string &name)
    : handle(open_kernel(ctx, name, false)) {}

kernel::~kernel() = default;

int kernel::group_id(int argno) const {
  int32_t group = 0;
  Err err;
  check(api().kernel_group_id(handle->raw, argno, &group, err.text, sizeof err.text), err);
  return group;
}

ext::kernel::kernel(const xrt::hw_context &ctx, const std::string &name)
    : xrt::kernel(open_kernel(ctx, name, true)) {}

// ---- buffer objects --------------------------------------------------------------------------

bo::bo(const xrt::device &device, size_t sz, bo::flags flags, memory_group grp) {
  auto impl = std::make_shared<bo_impl>();
  impl->device = device.get_handle();
  Err err;
  check(api().bo_alloc(impl->device->raw, sz, static_cast<uint32_t>(flags),
                       static_cast<int32_t>(grp), &impl->raw, err.text, sizeof err.text),
        err);
  impl->bytes = sz;
  handle = std::move(impl);
}

bo::~bo() = default;

size_t bo::size() const { return handle->bytes; }

void *bo::map() {
  void *ptr = nullptr;
  Err err;
  check(api().bo_map(handle->raw, &ptr, err.text, sizeof err.text), err);
  return ptr;
}

void bo::sync(xclBOSyncDirection dir, size_t sz, size_t offset) {
  Err err;
  check(api().bo_sync(handle->raw, static_cast<int32_t>(dir), sz, offset, err.text,
                      sizeof err.text),
        err);
}

namespace {
std::shared_ptr<bo_impl> ext_bo(const xrt::device &device, size_t sz) {
  auto impl = std::make_shared<bo_impl>();
  impl->device = device.get_handle();
  Err err;
  check(api().ext_bo_alloc(impl->device->raw, sz, &impl->raw, err.text, sizeof err.text), err);
  impl->bytes = sz;
  return impl;
}
} // namespace

ext::bo::bo(const xrt::device &device, size_t sz) : xrt::bo(ext_bo(device, sz)) {}

// ---- runs ------------------------------------------------------------------------------------

run::run(const xrt::kernel &krnl) {
  auto impl = std::make_shared<run_impl>();
  impl->kernel = krnl.get_handle();
  Err err;
  check(api().run_create(impl->kernel->raw, &impl->raw, err.text, sizeof err.text), err);
  handle = std::move(impl);
}

run::~run() = default;

void run::set_arg_at_index(int index, const xrt::bo &bo) {
  Err err;
  check(api().run_set_arg_bo(handle->raw, index, bo.get_handle()->raw, err.text,
                             sizeof err.text),
        err);
}

void run::set_arg_at_index(int index, const void *value, size_t bytes) {
  Err err;
  check(api().run_set_arg_scalar(handle->raw, index, value, bytes, err.text, sizeof err.text),
        err);
}

void run::start() {
  Err err;
  check(api().run_start(handle->raw, err.text, sizeof err.text), err);
}

std::cv_status run::wait2(const std::chrono::milliseconds &timeout) const {
  int32_t state = 0;
  Err err;
  auto ms = static_cast<uint32_t>(timeout.count());
  int status = api().run_wait(handle->raw, ms, &state, err.text, sizeof err.text);
  if (status == TRITON_NPU_XRT_E_COMMAND) {
    throw command_error(static_cast<ert_cmd_state>(state), err.text);
  }
  check(status, err);
  return state == TRITON_NPU_XRT_STATE_TIMEOUT ? std::cv_status::timeout
                                               : std::cv_status::no_timeout;
}

ert_cmd_state run::state() const {
  int32_t state = 0;
  Err err;
  check(api().run_state(handle->raw, &state, err.text, sizeof err.text), err);
  return static_cast<ert_cmd_state>(state);
}

ert_cmd_state run::abort() {
  int32_t state = 0;
  Err err;
  check(api().run_abort(handle->raw, &state, err.text, sizeof err.text), err);
  return static_cast<ert_cmd_state>(state);
}

run::command_error::command_error(ert_cmd_state state, const std::string &what)
    : detail::pimpl<command_error_impl>(
          std::make_shared<command_error_impl>(command_error_impl{state, what})),
      m_impl(get_handle()) {}

ert_cmd_state run::command_error::get_command_state() const { return m_impl->state; }

const char *run::command_error::what() const noexcept { return m_impl->message.c_str(); }

} // namespace xrt

// ---- not XRT API -----------------------------------------------------------------------------

/// How many XRT API calls this library has served (tests: the shim's C++ ran).
HARNESS_EXPORT unsigned long npu_harness_coreutil_calls(void) {
  return api_calls.load(std::memory_order_relaxed);
}
