# out = alpha * x + y, launched inside upstream's driver_scope("npu") (the heterogeneous
# examples' way), with the configuration read through the driver module as upstream scripts do.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver, npu_config
from triton.backends.amd_triton_npu.driver_scope import driver_scope


@triton.jit
def axpy_kernel(X, Y, OUT, alpha: tl.constexpr, n_elements: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(OUT + offsets, alpha * tl.load(X + offsets) + tl.load(Y + offsets))


if __name__ == "__main__":
    torch.manual_seed(2)
    n = 2048
    x = torch.randn(n, dtype=torch.bfloat16)
    y = torch.randn(n, dtype=torch.bfloat16)
    out = torch.empty(n, dtype=torch.bfloat16)
    before = triton.runtime.driver._active
    with driver_scope("npu") as npu:
        assert isinstance(npu, NPUDriver) and npu.runtime == npu_config.runtime
        axpy_kernel[(n // 1024,)](x, y, out, 2.0, n, BLOCK_SIZE=1024)
    assert triton.runtime.driver._active is before
    torch.testing.assert_close(out, 2.0 * x + y, atol=1e-2, rtol=1e-2)
    print(f"axpy N={n}: ok")
