/* The software HSA agent's stand-in for ROCr's AIE extension header (tests only).
 *
 * ROCr discovery accepts a prefix only if it carries include/hsa/hsa_ext_amd_aie.h next to
 * libhsa-runtime64, as upstream's driver does; install.sh puts this file there. The layout is
 * the kernel-object packet documented in docs/reference/runtime-apis.md A.2.2 (the one
 * crates/hsa-sys/src/aie.rs declares); nothing includes this file. */
#ifndef NPU_HARNESS_HSA_EXT_AMD_AIE_H
#define NPU_HARNESS_HSA_EXT_AMD_AIE_H

#include <stdint.h>

#define HSA_AMD_AIE_INTERFACE_VERSION_MAJOR 1
#define HSA_AMD_AIE_INTERFACE_VERSION_MINOR 0

typedef enum { HSA_AMD_AIE_PACKET_TYPE_READY = 0, HSA_AMD_AIE_PACKET_TYPE_INVALID = 1 } hsa_amd_aie_packet_type_t;
typedef enum { HSA_AMD_AIE_PACKET_OPCODE_KMQ = 0 } hsa_amd_aie_packet_opcode_t;

typedef struct hsa_amd_aie_kernel_dispatch_packet_s {
  uint16_t header;
  uint16_t opcode;
  uint16_t count;
  uint8_t reserved0;
  uint8_t reserved1;
  uint64_t completion_signal;
  uint32_t reserved2;
  uint32_t kernel_object_low;
  uint32_t kernel_object_high;
  uint16_t num_kernargs;
  uint16_t reserved3;
  void *kernarg_address;
  uint64_t reserved4;
  void *reserved5;
  uint64_t reserved6;
} hsa_amd_aie_kernel_dispatch_packet_t;

#endif
