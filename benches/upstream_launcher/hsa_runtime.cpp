// Benchmarks only: a model of upstream's shared HSA runtime, written for `make bench` to time
// what upstream's generated HSA launcher costs per call against the same no-op device libraries
// as ours. Not upstream's code: written here from reading amd/Triton-XDNA
// amd_triton_npu/backend/include/HsaRuntime/HsaRuntime.cpp at commit
// 7c7c41819413e63602fcdeedde831c860b8d6d61 (the runtime every generated HSA launcher links).
//
// Per dispatch it makes the calls upstream makes, in its order: take the dispatch lock; for each
// tensor take a staging buffer of the rounded size from a free list kept in an unordered_map of
// vectors and memcpy the tensor in; load the write index, wait (yielding) until
// write - read index < queue size; write addresses then sizes into the ring slot's fixed kernarg
// block; build the AIE packet on the stack; store 1 into the completion signal; copy the packet
// into the ring slot; store write index + 1; store the index into the doorbell signal; wait with
// hsa_signal_wait_scacquire(LT 1, BLOCKED) until the value drops below 1; memcpy every tensor
// back; return the buffers to the free list. Both waits read std::chrono::steady_clock for a
// deadline, as upstream's do; the watchdog stays off unless AMD_TRITON_NPU_HSA_TIMEOUT is set.
//
// Where it differs, and why none of it is per-call work:
// * the packet names a kernel object (hsaco loaded through a code-object reader and a frozen
//   executable), the form upstream's PR #158 moved to; at 7c7c418 the packet carried PDI and
//   instruction addresses, which the harness's ROCr (like ROCr's AIE support) does not take;
// * staging buffers come from hsa_amd_memory_pool_allocate on the data pool rather than
//   upstream's four vmem calls (handle, reserve, map, set access): the harness's ROCr has no vmem
//   API, and both happen only when the free list has no buffer of the size, never once warm;
// * the queue is created with an error callback (upstream passes none; the harness's ROCr
//   refuses a queue without one, as AIE submission errors are reported only through it).

#include "hsa_runtime.h"

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/hsa_ext_amd_aie.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

struct model_hsa_program {
  uint64_t kernel_object = 0;
  hsa_executable_t executable{};
};

namespace {

// Upstream asks for 32 and clamps into the agent's [min, max] (the AIE agent takes exactly 64).
constexpr uint32_t WANTED_QUEUE_SIZE = 32;
// Bytes after completion_signal up to kernarg_address, as the AIE packet ABI fixes.
constexpr uint16_t PACKET_COUNT = 24;
constexpr const char *TIMEOUT_VAR = "AMD_TRITON_NPU_HSA_TIMEOUT";

void check(hsa_status_t status, const char *call) {
  if (status == HSA_STATUS_SUCCESS || status == HSA_STATUS_INFO_BREAK) {
    return;
  }
  const char *text = nullptr;
  hsa_status_string(status, &text);
  throw std::runtime_error(std::string(call) + ": " + (text ? text : "unknown status"));
}

struct AgentsOfType {
  hsa_device_type_t type;
  std::vector<hsa_agent_t> found;
};

hsa_status_t collect_agent(hsa_agent_t agent, void *data) {
  auto *want = static_cast<AgentsOfType *>(data);
  hsa_device_type_t type{};
  hsa_status_t status = hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type);
  if (status != HSA_STATUS_SUCCESS) {
    return status;
  }
  if (type == want->type) {
    want->found.push_back(agent);
  }
  return HSA_STATUS_SUCCESS;
}

// The first global pool with one of `flags` whose allocatability (a non-zero recommended
// granule) is `allocatable`: upstream's way of telling the dev heap from the data pool.
struct PoolWanted {
  uint32_t flags;
  bool allocatable;
  bool found = false;
  hsa_amd_memory_pool_t pool{};
};

hsa_status_t match_pool(hsa_amd_memory_pool_t pool, void *data) {
  auto *want = static_cast<PoolWanted *>(data);
  hsa_amd_segment_t segment{};
  uint32_t flags = 0;
  size_t granule = 0;
  if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment) !=
          HSA_STATUS_SUCCESS ||
      segment != HSA_AMD_SEGMENT_GLOBAL) {
    return HSA_STATUS_SUCCESS;
  }
  if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags) !=
          HSA_STATUS_SUCCESS ||
      (flags & want->flags) == 0) {
    return HSA_STATUS_SUCCESS;
  }
  if (hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE,
                                   &granule) != HSA_STATUS_SUCCESS ||
      (granule != 0) != want->allocatable) {
    return HSA_STATUS_SUCCESS;
  }
  want->pool = pool;
  want->found = true;
  return HSA_STATUS_INFO_BREAK;
}

void on_queue_error(hsa_status_t, hsa_queue_t *, void *) {}

struct Staging {
  void *address = nullptr;
  size_t bytes = 0;
};

class Runtime {
public:
  Runtime() { start(); }

  model_hsa_program *prepare(const std::string &hsaco, const std::string &kernel) {
    std::lock_guard<std::mutex> hold(programs_lock_);
    std::string key = hsaco + '\0' + kernel;
    auto known = programs_.find(key);
    if (known != programs_.end()) {
      return known->second.get();
    }
    int fd = open(hsaco.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      throw std::runtime_error("cannot open " + hsaco);
    }
    hsa_code_object_reader_t reader{};
    hsa_status_t status = hsa_code_object_reader_create_from_file(fd, &reader);
    close(fd);
    check(status, "hsa_code_object_reader_create_from_file");
    auto program = std::make_unique<model_hsa_program>();
    check(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                                    nullptr, &program->executable),
          "hsa_executable_create_alt");
    check(hsa_executable_load_agent_code_object(program->executable, aie_, reader, nullptr,
                                                nullptr),
          "hsa_executable_load_agent_code_object");
    check(hsa_executable_freeze(program->executable, nullptr), "hsa_executable_freeze");
    hsa_code_object_reader_destroy(reader);
    hsa_executable_symbol_t symbol{};
    check(hsa_executable_get_symbol_by_name(program->executable, kernel.c_str(), &aie_, &symbol),
          "hsa_executable_get_symbol_by_name");
    check(hsa_executable_symbol_get_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
                                         &program->kernel_object),
          "hsa_executable_symbol_get_info");
    if (program->kernel_object == 0) {
      throw std::runtime_error("kernel " + kernel + " has no kernel object");
    }
    model_hsa_program *handle = program.get();
    programs_.emplace(std::move(key), std::move(program));
    return handle;
  }

  void dispatch(const model_hsa_program *program, uint32_t n, void *const *host,
                const uint64_t *sizes) {
    if (program == nullptr) {
      throw std::runtime_error("dispatch without a prepared program");
    }
    if (n > MODEL_HSA_MAX_TENSORS) {
      throw std::runtime_error("too many tensor arguments: " + std::to_string(n));
    }
    std::lock_guard<std::mutex> hold(dispatch_lock_);
    std::array<Staging, MODEL_HSA_MAX_TENSORS> staged{};
    uint32_t taken = 0;
    try {
      for (uint32_t i = 0; i < n; ++i) {
        staged[i] = take(sizes[i]);
        taken = i + 1;
        std::memcpy(staged[i].address, host[i], sizes[i]);
      }
      const uint64_t write = hsa_queue_load_write_index_relaxed(queue_);
      wait_for_room(write);
      const uint64_t slot = write % queue_->size;
      auto *kernargs =
          reinterpret_cast<uint64_t *>(static_cast<char *>(kernarg_blocks_) + slot * kernarg_slot_);
      for (uint32_t i = 0; i < n; ++i) {
        kernargs[i] = reinterpret_cast<uint64_t>(staged[i].address);
        kernargs[n + i] = sizes[i];
      }
      hsa_amd_aie_kernel_dispatch_packet_t packet{};
      packet.header = static_cast<uint16_t>(
          (HSA_AMD_AIE_PACKET_TYPE_READY << HSA_PACKET_HEADER_TYPE) |
          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
      packet.opcode = HSA_AMD_AIE_PACKET_OPCODE_KMQ;
      packet.count = PACKET_COUNT;
      packet.completion_signal = completion_.handle;
      packet.kernel_object_low = static_cast<uint32_t>(program->kernel_object);
      packet.kernel_object_high = static_cast<uint32_t>(program->kernel_object >> 32);
      packet.num_kernargs = static_cast<uint16_t>(n);
      packet.kernarg_address = n > 0 ? kernargs : nullptr;

      hsa_signal_store_screlease(completion_, 1);
      static_cast<hsa_amd_aie_kernel_dispatch_packet_t *>(queue_->base_address)[slot] = packet;
      hsa_queue_store_write_index_screlease(queue_, write + 1);
      hsa_signal_store_screlease(queue_->doorbell_signal, static_cast<hsa_signal_value_t>(write));

      const hsa_signal_value_t value = wait_for_completion();
      if (value != 0) {
        throw std::runtime_error("AIE dispatch failed: completion signal = " +
                                 std::to_string(static_cast<long long>(value)));
      }
      for (uint32_t i = 0; i < n; ++i) {
        std::memcpy(host[i], staged[i].address, sizes[i]);
      }
      for (uint32_t i = 0; i < n; ++i) {
        give_back(staged[i]);
      }
    } catch (...) {
      for (uint32_t i = 0; i < taken; ++i) {
        give_back(staged[i]);
      }
      throw;
    }
  }

private:
  hsa_agent_t aie_{};
  hsa_amd_memory_pool_t data_pool_{};
  size_t granule_ = 0;
  hsa_queue_t *queue_ = nullptr;
  hsa_signal_t completion_{};
  void *kernarg_blocks_ = nullptr;
  size_t kernarg_slot_ = 0;
  std::chrono::steady_clock::duration timeout_{};
  uint64_t wait_ticks_ = UINT64_MAX;
  std::unordered_map<size_t, std::vector<Staging>> free_;
  std::map<std::string, std::unique_ptr<model_hsa_program>> programs_;
  std::mutex programs_lock_;
  std::mutex dispatch_lock_;

  void start() {
    check(hsa_init(), "hsa_init");
    read_timeout();
    AgentsOfType aie{HSA_DEVICE_TYPE_AIE, {}};
    check(hsa_iterate_agents(collect_agent, &aie), "hsa_iterate_agents");
    AgentsOfType cpu{HSA_DEVICE_TYPE_CPU, {}};
    check(hsa_iterate_agents(collect_agent, &cpu), "hsa_iterate_agents");
    if (aie.found.empty()) {
      throw std::runtime_error("no HSA AIE agent found");
    }
    aie_ = aie.found.front();
    PoolWanted dev{HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, false};
    PoolWanted data{HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, true};
    PoolWanted kernarg{HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT, true};
    for (PoolWanted *want : {&dev, &data, &kernarg}) {
      check(hsa_amd_agent_iterate_memory_pools(aie_, match_pool, want),
            "hsa_amd_agent_iterate_memory_pools");
    }
    if (!dev.found || !data.found) {
      throw std::runtime_error("the AIE agent lacks a dev heap or a data pool");
    }
    data_pool_ = data.pool;
    hsa_amd_memory_pool_t kernarg_pool = kernarg.found ? kernarg.pool : data.pool;
    check(hsa_amd_memory_pool_get_info(data_pool_, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE,
                                       &granule_),
          "hsa_amd_memory_pool_get_info");
    if (granule_ == 0) {
      granule_ = 4096;
    }
    uint32_t min_size = 0;
    uint32_t max_size = 0;
    check(hsa_agent_get_info(aie_, HSA_AGENT_INFO_QUEUE_MIN_SIZE, &min_size),
          "hsa_agent_get_info");
    check(hsa_agent_get_info(aie_, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &max_size),
          "hsa_agent_get_info");
    uint32_t size = WANTED_QUEUE_SIZE < min_size ? min_size : WANTED_QUEUE_SIZE;
    if (max_size > 0 && size > max_size) {
      size = max_size;
    }
    check(hsa_queue_create(aie_, size, HSA_QUEUE_TYPE_SINGLE, on_queue_error, nullptr, 0, 0,
                           &queue_),
          "hsa_queue_create");
    check(hsa_signal_create(0, 0, nullptr, &completion_), "hsa_signal_create");
    kernarg_slot_ = (MODEL_HSA_MAX_TENSORS * 2 * sizeof(uint64_t) + 63) & ~size_t{63};
    check(hsa_amd_memory_pool_allocate(kernarg_pool, kernarg_slot_ * queue_->size, 0,
                                       &kernarg_blocks_),
          "hsa_amd_memory_pool_allocate");
  }

  void read_timeout() {
    const char *text = std::getenv(TIMEOUT_VAR);
    const double seconds = text != nullptr && *text != '\0' ? std::strtod(text, nullptr) : 0.0;
    uint64_t frequency = 0;
    if (!(seconds > 0.0) ||
        hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &frequency) !=
            HSA_STATUS_SUCCESS ||
        frequency == 0) {
      return;
    }
    const double ticks = seconds * static_cast<double>(frequency);
    wait_ticks_ = ticks >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(ticks);
    wait_ticks_ = wait_ticks_ == 0 ? 1 : wait_ticks_;
    timeout_ = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(seconds));
  }

  bool watched() const { return timeout_ != std::chrono::steady_clock::duration{}; }

  void wait_for_room(uint64_t write) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (write - hsa_queue_load_read_index_scacquire(queue_) >= queue_->size) {
      if (watched() && std::chrono::steady_clock::now() >= deadline) {
        throw std::runtime_error("no room in the AIE queue");
      }
      std::this_thread::yield();
    }
  }

  hsa_signal_value_t wait_for_completion() const {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      const hsa_signal_value_t value = hsa_signal_wait_scacquire(
          completion_, HSA_SIGNAL_CONDITION_LT, 1, wait_ticks_, HSA_WAIT_STATE_BLOCKED);
      if (value < 1) {
        return value;
      }
      if (watched() && std::chrono::steady_clock::now() >= deadline) {
        throw std::runtime_error("AIE dispatch timed out");
      }
    }
  }

  size_t rounded(uint64_t bytes) const {
    return static_cast<size_t>((bytes + granule_ - 1) / granule_ * granule_);
  }

  Staging take(uint64_t bytes) {
    const size_t size = rounded(bytes);
    auto list = free_.find(size);
    if (list != free_.end() && !list->second.empty()) {
      Staging buffer = list->second.back();
      list->second.pop_back();
      return buffer;
    }
    Staging buffer{nullptr, size};
    check(hsa_amd_memory_pool_allocate(data_pool_, size, 0, &buffer.address),
          "hsa_amd_memory_pool_allocate");
    return buffer;
  }

  void give_back(Staging &buffer) {
    if (buffer.address == nullptr) {
      return;
    }
    free_[buffer.bytes].push_back(buffer);
    buffer.address = nullptr;
  }
};

Runtime &runtime() {
  static Runtime instance;
  return instance;
}

void put_error(char *err, size_t len, const std::string &text) {
  if (err == nullptr || len == 0) {
    return;
  }
  const size_t n = text.size() < len - 1 ? text.size() : len - 1;
  std::memcpy(err, text.data(), n);
  err[n] = '\0';
}

} // namespace

extern "C" model_hsa_program_t model_hsa_prepare(const char *hsaco_path, const char *kernel_name,
                                                 char *err, size_t err_len) {
  try {
    return runtime().prepare(hsaco_path, kernel_name);
  } catch (const std::exception &e) {
    put_error(err, err_len, std::string("HSA prepare failed: ") + e.what());
    return nullptr;
  }
}

extern "C" int model_hsa_dispatch(model_hsa_program_t program, uint32_t num_tensors,
                                  void *const *host_ptrs, const uint64_t *sizes, char *err,
                                  size_t err_len) {
  try {
    runtime().dispatch(program, num_tensors, host_ptrs, sizes);
    return 0;
  } catch (const std::exception &e) {
    put_error(err, err_len, std::string("HSA dispatch failed: ") + e.what());
    return -1;
  }
}
