// Benchmarks only: a no-op XRT (libxrt_coreutil.so.2), built by benches/noop_libs.py so that
// `make bench` times a warm launch against a device library that costs next to nothing, found
// the way an installed XRT is (XILINX_XRT/lib, loaded by triton-npu's shim). Written here for
// that purpose; not XRT's code and not the conformance harness's coreutil
// (tests/harness/xrt-coreutil), which forwards every call to a device that checks it.
//
// It defines the members of XRT's C++ API that triton-npu's shim
// (crates/xrt-sys/shim/triton_npu_xrt.cpp) and the benchmark's model of upstream's launcher
// (benches/upstream_launcher/launcher.cpp) call, compiled against Debian's libxrt-dev headers
// so every symbol and class layout is XRT's. It reports the harness device's default name
// ("NPU Strix", an npu2) and XRT 2.25.0. Nothing is checked, locked or logged, and nothing on
// the launch path makes a system call:
//   * a buffer object is host memory from aligned_alloc; map returns it and sync does nothing;
//   * a run completes when it starts: wait2 returns at once and its state is COMPLETED;
//   * runs share one static state object, so making a run (upstream makes one per launch)
//     allocates nothing;
//   * xclbins and ELFs are not read: an xclbin lists no kernels, so only the ELF path (the one
//     an npu2 takes) opens a kernel.

#include <xrt/experimental/xrt_elf.h>
#include <xrt/experimental/xrt_ext.h>
#include <xrt/experimental/xrt_version.h>
#include <xrt/experimental/xrt_xclbin.h>
#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_hw_context.h>
#include <xrt/xrt_kernel.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace {

constexpr size_t PAGE = 4096;
// What the harness device reports by default (tests/harness/xrt-standin/README.md).
constexpr const char *DEVICE_NAME = "NPU Strix";

} // namespace

// ---- impl classes (declared, not defined, by XRT's headers) --------------------------------

namespace xrt_core {
class device {};
} // namespace xrt_core

namespace xrt {

class xclbin_impl {};
class xclbin::kernel_impl {};
class elf_impl {};
class hw_context_impl {};
class kernel_impl {};

class bo_impl {
public:
  void *memory = nullptr;
  size_t bytes = 0;
  ~bo_impl() { std::free(memory); }
};

class run_impl {};

class run::command_error_impl {
public:
  ert_cmd_state state;
  std::string message;
};

namespace {

// Host memory for a buffer object, in whole pages.
std::shared_ptr<bo_impl> host_bo(size_t bytes) {
  auto impl = std::make_shared<bo_impl>();
  const size_t rounded = bytes == 0 ? PAGE : (bytes + PAGE - 1) / PAGE * PAGE;
  impl->memory = std::aligned_alloc(PAGE, rounded);
  if (impl->memory == nullptr) {
    throw std::bad_alloc();
  }
  impl->bytes = bytes;
  return impl;
}

// The state every run shares: a pointer without a control block, so copies count nothing.
run_impl shared_run_state;

} // namespace

// ---- version ---------------------------------------------------------------------------------

namespace version {
unsigned int major() { return 2; }
unsigned int minor() { return 25; }
unsigned int patch() { return 0; }
} // namespace version

// ---- device ----------------------------------------------------------------------------------

device::device(unsigned int) : handle(std::make_shared<xrt_core::device>()) {}

device::~device() = default;

std::any device::get_info_std(info::device param, const xrt::detail::abi &) const {
  if (param == info::device::name) {
    return std::string{DEVICE_NAME};
  }
  return {};
}

uuid device::register_xclbin(const xrt::xclbin &) { return uuid{}; }

// ---- xclbin ----------------------------------------------------------------------------------

xclbin::xclbin(const std::string &) : detail::pimpl<xclbin_impl>(std::make_shared<xclbin_impl>()) {}

std::vector<xclbin::kernel> xclbin::get_kernels() const { return {}; }

std::string xclbin::kernel::get_name() const { return {}; }

size_t xclbin::kernel::get_num_args() const { return 0; }

// ---- elf -------------------------------------------------------------------------------------

elf::elf(const std::string &) : detail::pimpl<elf_impl>(std::make_shared<elf_impl>()) {}

// ---- hw_context ------------------------------------------------------------------------------

hw_context::hw_context(const xrt::device &, const xrt::uuid &, access_mode)
    : detail::pimpl<hw_context_impl>(std::make_shared<hw_context_impl>()) {}

hw_context::hw_context(const xrt::device &, const xrt::elf &)
    : detail::pimpl<hw_context_impl>(std::make_shared<hw_context_impl>()) {}

hw_context::~hw_context() = default;

// ---- kernels ---------------------------------------------------------------------------------

kernel::kernel(const xrt::hw_context &, const std::string &)
    : handle(std::make_shared<kernel_impl>()) {}

kernel::~kernel() = default;

int kernel::group_id(int) const { return 0; }

ext::kernel::kernel(const xrt::hw_context &, const std::string &)
    : xrt::kernel(std::make_shared<kernel_impl>()) {}

// ---- buffer objects --------------------------------------------------------------------------

bo::bo(const xrt::device &, size_t sz, bo::flags, memory_group) : handle(host_bo(sz)) {}

bo::~bo() = default;

size_t bo::size() const { return handle->bytes; }

void *bo::map() { return handle->memory; }

void bo::sync(xclBOSyncDirection, size_t, size_t) {}

ext::bo::bo(const xrt::device &, size_t sz) : xrt::bo(host_bo(sz)) {}

// ---- runs ------------------------------------------------------------------------------------

run::run(const xrt::kernel &) : handle(std::shared_ptr<run_impl>(), &shared_run_state) {}

run::~run() = default;

void run::set_arg_at_index(int, const xrt::bo &) {}

void run::set_arg_at_index(int, const void *, size_t) {}

void run::start() {}

std::cv_status run::wait2(const std::chrono::milliseconds &) const {
  return std::cv_status::no_timeout;
}

ert_cmd_state run::state() const { return ERT_CMD_STATE_COMPLETED; }

ert_cmd_state run::abort() { return ERT_CMD_STATE_COMPLETED; }

run::command_error::command_error(ert_cmd_state state, const std::string &what)
    : detail::pimpl<command_error_impl>(
          std::make_shared<command_error_impl>(command_error_impl{state, what})),
      m_impl(get_handle()) {}

ert_cmd_state run::command_error::get_command_state() const { return m_impl->state; }

const char *run::command_error::what() const noexcept { return m_impl->message.c_str(); }

} // namespace xrt
