// C ABI of the benchmark's model of upstream's shared HSA runtime (libtriton_npu_hsa.so, built
// from amd/Triton-XDNA include/HsaRuntime/HsaRuntime.cpp), benchmarks only. See
// hsa_runtime.cpp for what is modelled and from which upstream commit.
#pragma once

#include <cstddef>
#include <cstdint>

// As upstream's TRITON_NPU_HSA_MAX_KERNARGS: a kernarg slot holds this many address/size pairs.
#define MODEL_HSA_MAX_TENSORS 16

extern "C" {

typedef struct model_hsa_program *model_hsa_program_t;

// Loads a hsaco, finds `kernel_name` in it and returns its handle (once per launcher module,
// from set_paths); NULL with a message in err on failure.
model_hsa_program_t model_hsa_prepare(const char *hsaco_path, const char *kernel_name, char *err,
                                      size_t err_len);

// One dispatch: stage each tensor, write the packet, ring, wait, copy every tensor back.
// 0 on success, -1 with a message in err.
int model_hsa_dispatch(model_hsa_program_t program, uint32_t num_tensors,
                       void *const *host_ptrs, const uint64_t *sizes, char *err, size_t err_len);
}
