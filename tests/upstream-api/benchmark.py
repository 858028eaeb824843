# Upstream's examples/benchmark.py helpers (amd/Triton-XDNA), as its examples import them:
# `sys.path.append(os.path.abspath("..")); import benchmark`.

import triton
from triton.backends.amd_triton_npu.driver import NPUDriver
from triton.backends.triton_shared.driver import CPUDriver


def select_npu_backend():
    triton.runtime.driver.set_active(NPUDriver())


def select_cpu_backend():
    triton.runtime.driver.set_active(CPUDriver())


def select_gpu_backend():
    triton.runtime.driver.reset_active()
