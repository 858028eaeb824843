// Benchmarks only: a no-op ROCr (libhsa-runtime64.so.1), built by benches/noop_libs.py so that
// `make bench` times a warm launch against a device library that costs next to nothing, found
// through the same discovery as an installed ROCr (AMD_NPU_ROCR_PATH). Written here for that
// purpose; not ROCr's code and not the conformance harness's agent (tests/harness/hsa-agent),
// which checks every call.
//
// It defines every HSA function triton-npu resolves (crates/hsa-sys/src/symbols.rs) and the
// benchmark's model of upstream's runtime calls (benches/upstream_launcher/hsa_runtime.cpp),
// with the C signatures of Debian's HSA headers, and answers as the harness agent does by
// default: a CPU agent and an AIE agent named "aie2p" with 8 columns, 64-packet queues, and
// ROCr's three AIE pools in ROCr's order (kernarg, device heap with recommended granule 0,
// data). Nothing is checked, locked, counted or logged, and nothing on the launch path makes a
// system call:
//   * memory comes from aligned_alloc, so copies into "device" buffers are real;
//   * code objects are not read: an executable hands out a fresh kernel object per symbol
//     looked up, whatever its name (the kernel's kernarg size is not reported, as the code
//     is never parsed);
//   * a store to a queue's doorbell completes every packet up to the write index at once, as
//     ROCr's packet processor would after running it: the packet's completion signal is
//     decremented, its header set INVALID and the read index advanced;
//   * a signal is a 64-bit value; a wait spins briefly on it and returns what it saw (HSA lets
//     a wait return before its condition holds; callers check the value).

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/hsa_ext_amd_aie.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

// What the harness agent reports by default (tests/harness/hsa-agent/README.md).
#define AIE_NAME "aie2p"
#define AIE_COLUMNS 8u
#define QUEUE_PACKETS 64u
#define PAGE 4096u
#define DEV_HEAP_BYTES ((size_t)64 << 20)
#define SYSTEM_POOL_BYTES ((size_t)16 << 30)
#define TIMESTAMP_FREQUENCY 1000000000ull
// How many times a wait looks at its signal before returning what it saw.
#define WAIT_SPINS 4096

enum { CPU_AGENT = 0xC0C0, AIE_AGENT = 0xA1E0 };
enum { KERNARG_POOL = 1, DEV_HEAP_POOL = 2, DATA_POOL = 3 };

struct noop_queue;

// A signal's handle is the address of one of these. A queue's doorbell signal knows its queue.
struct noop_signal {
  int64_t value;
  struct noop_queue *queue;
};

struct noop_queue {
  hsa_queue_t queue;
  uint64_t write_index;
  uint64_t read_index;
  struct noop_signal doorbell;
};

struct noop_symbol {
  struct noop_symbol *next;
};

// An executable's handle is the address of one of these: the symbols it handed out, freed with it.
struct noop_executable {
  struct noop_symbol *symbols;
};

static void pause_briefly(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}

static void copy_name(void *value, const char *name) {
  char buf[64] = {0};
  strncpy(buf, name, sizeof buf - 1);
  memcpy(value, buf, sizeof buf);
}

EXPORT hsa_status_t hsa_init(void) { return HSA_STATUS_SUCCESS; }

EXPORT hsa_status_t hsa_shut_down(void) { return HSA_STATUS_SUCCESS; }

EXPORT hsa_status_t hsa_status_string(hsa_status_t status, const char **status_string) {
  switch (status) {
  case HSA_STATUS_SUCCESS:
    *status_string = "HSA_STATUS_SUCCESS: The function has been executed successfully.";
    break;
  case HSA_STATUS_INFO_BREAK:
    *status_string = "HSA_STATUS_INFO_BREAK: A traversal over a list of elements has been "
                     "interrupted by the application before completing.";
    break;
  case HSA_STATUS_ERROR_INVALID_ARGUMENT:
    *status_string = "HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments does not "
                     "meet a precondition stated in the documentation of the corresponding "
                     "formal argument.";
    break;
  case HSA_STATUS_ERROR_OUT_OF_RESOURCES:
    *status_string = "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the "
                     "necessary resources.";
    break;
  default:
    *status_string = "HSA_STATUS_ERROR: A generic error has occurred.";
    break;
  }
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void *value) {
  switch (attribute) {
  case HSA_SYSTEM_INFO_VERSION_MAJOR:
  case HSA_SYSTEM_INFO_VERSION_MINOR:
    *(uint16_t *)value = 1;
    return HSA_STATUS_SUCCESS;
  case HSA_SYSTEM_INFO_TIMESTAMP: {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    *(uint64_t *)value = (uint64_t)now.tv_sec * TIMESTAMP_FREQUENCY + (uint64_t)now.tv_nsec;
    return HSA_STATUS_SUCCESS;
  }
  case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY:
    *(uint64_t *)value = TIMESTAMP_FREQUENCY;
    return HSA_STATUS_SUCCESS;
  case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT:
    *(uint64_t *)value = UINT64_MAX;
    return HSA_STATUS_SUCCESS;
  default:
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

EXPORT hsa_status_t hsa_iterate_agents(hsa_status_t (*callback)(hsa_agent_t agent, void *data),
                                       void *data) {
  const uint64_t agents[] = {CPU_AGENT, AIE_AGENT};
  for (size_t i = 0; i < sizeof agents / sizeof agents[0]; ++i) {
    hsa_agent_t agent = {agents[i]};
    hsa_status_t status = callback(agent, data);
    if (status != HSA_STATUS_SUCCESS) {
      return status;
    }
  }
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute,
                                       void *value) {
  const int aie = agent.handle == AIE_AGENT;
  switch ((int)attribute) {
  case HSA_AGENT_INFO_NAME:
    copy_name(value, aie ? AIE_NAME : "CPU");
    return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_VENDOR_NAME:
    copy_name(value, aie ? "AMD" : "CPU");
    return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_DEVICE:
    *(uint32_t *)value = aie ? HSA_DEVICE_TYPE_AIE : HSA_DEVICE_TYPE_CPU;
    return HSA_STATUS_SUCCESS;
  default:
    break;
  }
  if (!aie) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  switch ((int)attribute) {
  case HSA_AGENT_INFO_QUEUES_MAX:
  case HSA_AGENT_INFO_NODE:
    *(uint32_t *)value = 1;
    return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_QUEUE_MIN_SIZE:
  case HSA_AGENT_INFO_QUEUE_MAX_SIZE:
    *(uint32_t *)value = QUEUE_PACKETS;
    return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_QUEUE_TYPE:
    *(uint32_t *)value = HSA_QUEUE_TYPE_SINGLE;
    return HSA_STATUS_SUCCESS;
  case HSA_AGENT_INFO_PROFILE:
    *(uint32_t *)value = HSA_PROFILE_BASE;
    return HSA_STATUS_SUCCESS;
  case HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT:
    *(uint32_t *)value = AIE_COLUMNS;
    return HSA_STATUS_SUCCESS;
  default:
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

EXPORT hsa_status_t hsa_amd_agent_iterate_memory_pools(
    hsa_agent_t agent, hsa_status_t (*callback)(hsa_amd_memory_pool_t memory_pool, void *data),
    void *data) {
  if (agent.handle != AIE_AGENT) {
    return HSA_STATUS_SUCCESS;
  }
  const uint64_t pools[] = {KERNARG_POOL, DEV_HEAP_POOL, DATA_POOL};
  for (size_t i = 0; i < sizeof pools / sizeof pools[0]; ++i) {
    hsa_amd_memory_pool_t pool = {pools[i]};
    hsa_status_t status = callback(pool, data);
    if (status != HSA_STATUS_SUCCESS) {
      return status;
    }
  }
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t memory_pool,
                                                 hsa_amd_memory_pool_info_t attribute,
                                                 void *value) {
  const int dev_heap = memory_pool.handle == DEV_HEAP_POOL;
  switch (attribute) {
  case HSA_AMD_MEMORY_POOL_INFO_SEGMENT:
    *(uint32_t *)value = HSA_AMD_SEGMENT_GLOBAL;
    return HSA_STATUS_SUCCESS;
  case HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS:
    *(uint32_t *)value = memory_pool.handle == KERNARG_POOL
                             ? (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT |
                                HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED)
                             : HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
    return HSA_STATUS_SUCCESS;
  case HSA_AMD_MEMORY_POOL_INFO_SIZE:
  case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE:
    *(size_t *)value = dev_heap ? DEV_HEAP_BYTES : SYSTEM_POOL_BYTES;
    return HSA_STATUS_SUCCESS;
  case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED:
  case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL:
    *(bool *)value = true;
    return HSA_STATUS_SUCCESS;
  case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE:
  case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT:
    *(size_t *)value = PAGE;
    return HSA_STATUS_SUCCESS;
  case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE:
    *(size_t *)value = dev_heap ? 0 : PAGE;
    return HSA_STATUS_SUCCESS;
  default:
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

EXPORT hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool, size_t size,
                                                 uint32_t flags, void **ptr) {
  (void)memory_pool;
  (void)flags;
  size_t rounded = (size + PAGE - 1) / PAGE * PAGE;
  *ptr = aligned_alloc(PAGE, rounded == 0 ? PAGE : rounded);
  return *ptr == NULL ? HSA_STATUS_ERROR_OUT_OF_RESOURCES : HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_amd_memory_pool_free(void *ptr) {
  free(ptr);
  return HSA_STATUS_SUCCESS;
}

// Code objects are never read: a reader is a placeholder handle.
EXPORT hsa_status_t hsa_code_object_reader_create_from_file(
    hsa_file_t file, hsa_code_object_reader_t *code_object_reader) {
  (void)file;
  code_object_reader->handle = 1;
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_code_object_reader_create_from_memory(
    const void *code_object, size_t size, hsa_code_object_reader_t *code_object_reader) {
  (void)code_object;
  (void)size;
  code_object_reader->handle = 1;
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_code_object_reader_destroy(hsa_code_object_reader_t code_object_reader) {
  (void)code_object_reader;
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_executable_create_alt(
    hsa_profile_t profile, hsa_default_float_rounding_mode_t default_float_rounding_mode,
    const char *options, hsa_executable_t *executable) {
  (void)profile;
  (void)default_float_rounding_mode;
  (void)options;
  struct noop_executable *e = calloc(1, sizeof *e);
  if (e == NULL) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  executable->handle = (uint64_t)(uintptr_t)e;
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_executable_destroy(hsa_executable_t executable) {
  struct noop_executable *e = (struct noop_executable *)(uintptr_t)executable.handle;
  while (e->symbols != NULL) {
    struct noop_symbol *next = e->symbols->next;
    free(e->symbols);
    e->symbols = next;
  }
  free(e);
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_executable_agent_global_variable_define(hsa_executable_t executable,
                                                                hsa_agent_t agent,
                                                                const char *variable_name,
                                                                void *address) {
  (void)executable;
  (void)agent;
  (void)variable_name;
  (void)address;
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_executable_load_agent_code_object(
    hsa_executable_t executable, hsa_agent_t agent, hsa_code_object_reader_t code_object_reader,
    const char *options, hsa_loaded_code_object_t *loaded_code_object) {
  (void)executable;
  (void)agent;
  (void)code_object_reader;
  (void)options;
  if (loaded_code_object != NULL) {
    loaded_code_object->handle = 1;
  }
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_executable_freeze(hsa_executable_t executable, const char *options) {
  (void)executable;
  (void)options;
  return HSA_STATUS_SUCCESS;
}

// Any name is found: the symbol's handle, and its kernel object, is a fresh allocation the
// executable frees when it is destroyed.
EXPORT hsa_status_t hsa_executable_get_symbol_by_name(hsa_executable_t executable,
                                                      const char *symbol_name,
                                                      const hsa_agent_t *agent,
                                                      hsa_executable_symbol_t *symbol) {
  (void)symbol_name;
  (void)agent;
  struct noop_executable *e = (struct noop_executable *)(uintptr_t)executable.handle;
  struct noop_symbol *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  s->next = e->symbols;
  e->symbols = s;
  symbol->handle = (uint64_t)(uintptr_t)s;
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_executable_symbol_get_info(hsa_executable_symbol_t executable_symbol,
                                                   hsa_executable_symbol_info_t attribute,
                                                   void *value) {
  switch (attribute) {
  case HSA_EXECUTABLE_SYMBOL_INFO_TYPE:
    *(uint32_t *)value = HSA_SYMBOL_KIND_KERNEL;
    return HSA_STATUS_SUCCESS;
  case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT:
    *(uint64_t *)value = executable_symbol.handle;
    return HSA_STATUS_SUCCESS;
  case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT:
    *(uint32_t *)value = 64;
    return HSA_STATUS_SUCCESS;
  default:
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

EXPORT hsa_status_t hsa_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                     void (*callback)(hsa_status_t status, hsa_queue_t *source,
                                                      void *data),
                                     void *data, uint32_t private_segment_size,
                                     uint32_t group_segment_size, hsa_queue_t **queue) {
  (void)agent;
  (void)callback; // nothing ever fails, so the error callback is never called
  (void)data;
  (void)private_segment_size;
  (void)group_segment_size;
  const size_t ring_bytes = (size_t)size * sizeof(hsa_amd_aie_kernel_dispatch_packet_t);
  struct noop_queue *q = aligned_alloc(64, (sizeof *q + 63) / 64 * 64);
  void *ring = aligned_alloc(64, (ring_bytes + 63) / 64 * 64);
  if (q == NULL || ring == NULL) {
    free(q);
    free(ring);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  memset(q, 0, sizeof *q);
  hsa_amd_aie_kernel_dispatch_packet_t *packets = ring;
  for (uint32_t i = 0; i < size; ++i) {
    memset(&packets[i], 0, sizeof packets[i]);
    packets[i].header = HSA_AMD_AIE_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE;
  }
  q->queue.type = type;
  q->queue.features = HSA_QUEUE_FEATURE_KERNEL_DISPATCH;
  q->queue.base_address = ring;
  q->queue.size = size;
  q->doorbell.queue = q;
  q->queue.doorbell_signal.handle = (uint64_t)(uintptr_t)&q->doorbell;
  *queue = &q->queue;
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_queue_destroy(hsa_queue_t *queue) {
  free(queue->base_address);
  free(queue); // the hsa_queue_t is the first member of its noop_queue
  return HSA_STATUS_SUCCESS;
}

static struct noop_queue *of_queue(const hsa_queue_t *queue) {
  return (struct noop_queue *)(uintptr_t)queue;
}

EXPORT uint64_t hsa_queue_load_write_index_relaxed(const hsa_queue_t *queue) {
  return __atomic_load_n(&of_queue(queue)->write_index, __ATOMIC_RELAXED);
}

EXPORT void hsa_queue_store_write_index_screlease(const hsa_queue_t *queue, uint64_t value) {
  __atomic_store_n(&of_queue(queue)->write_index, value, __ATOMIC_RELEASE);
}

EXPORT uint64_t hsa_queue_load_read_index_scacquire(const hsa_queue_t *queue) {
  return __atomic_load_n(&of_queue(queue)->read_index, __ATOMIC_ACQUIRE);
}

EXPORT hsa_status_t hsa_signal_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                                      const hsa_agent_t *consumers, hsa_signal_t *signal) {
  (void)num_consumers;
  (void)consumers;
  struct noop_signal *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  s->value = initial_value;
  signal->handle = (uint64_t)(uintptr_t)s;
  return HSA_STATUS_SUCCESS;
}

EXPORT hsa_status_t hsa_signal_destroy(hsa_signal_t signal) {
  free((void *)(uintptr_t)signal.handle);
  return HSA_STATUS_SUCCESS;
}

static struct noop_signal *of_signal(hsa_signal_t signal) {
  return (struct noop_signal *)(uintptr_t)signal.handle;
}

// The doorbell: every packet written up to the write index completes at once.
static void complete_packets(struct noop_queue *q) {
  hsa_amd_aie_kernel_dispatch_packet_t *ring = q->queue.base_address;
  const uint64_t write = __atomic_load_n(&q->write_index, __ATOMIC_ACQUIRE);
  uint64_t read = q->read_index;
  for (; read < write; ++read) {
    hsa_amd_aie_kernel_dispatch_packet_t *packet = &ring[read % q->queue.size];
    if (packet->completion_signal != 0) {
      struct noop_signal *done = (struct noop_signal *)(uintptr_t)packet->completion_signal;
      __atomic_fetch_sub(&done->value, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&packet->header,
                     (uint16_t)(HSA_AMD_AIE_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE),
                     __ATOMIC_RELEASE);
  }
  __atomic_store_n(&q->read_index, read, __ATOMIC_RELEASE);
}

EXPORT void hsa_signal_store_screlease(hsa_signal_t signal, hsa_signal_value_t value) {
  struct noop_signal *s = of_signal(signal);
  __atomic_store_n(&s->value, value, __ATOMIC_RELEASE);
  if (s->queue != NULL) {
    complete_packets(s->queue);
  }
}

EXPORT hsa_signal_value_t hsa_signal_load_scacquire(hsa_signal_t signal) {
  return __atomic_load_n(&of_signal(signal)->value, __ATOMIC_ACQUIRE);
}

static int holds(hsa_signal_condition_t condition, hsa_signal_value_t value,
                 hsa_signal_value_t compare) {
  switch (condition) {
  case HSA_SIGNAL_CONDITION_EQ:
    return value == compare;
  case HSA_SIGNAL_CONDITION_NE:
    return value != compare;
  case HSA_SIGNAL_CONDITION_LT:
    return value < compare;
  default: // HSA_SIGNAL_CONDITION_GTE
    return value >= compare;
  }
}

EXPORT hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t signal,
                                                    hsa_signal_condition_t condition,
                                                    hsa_signal_value_t compare_value,
                                                    uint64_t timeout_hint,
                                                    hsa_wait_state_t wait_state_hint) {
  (void)timeout_hint;
  (void)wait_state_hint;
  const struct noop_signal *s = of_signal(signal);
  hsa_signal_value_t value = __atomic_load_n(&s->value, __ATOMIC_ACQUIRE);
  for (int spins = 0; spins < WAIT_SPINS && !holds(condition, value, compare_value); ++spins) {
    pause_briefly();
    value = __atomic_load_n(&s->value, __ATOMIC_ACQUIRE);
  }
  return value;
}
