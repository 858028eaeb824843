# out = alpha * x + y with alpha a compile-time constant, upstream-example style (see
# ../vec-add/vec-add.py): the constant is baked into the kernel, never passed to the device.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def axpy_kernel(X, Y, OUT, alpha: tl.constexpr, n_elements: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(X + offsets)
    y = tl.load(Y + offsets)
    tl.store(OUT + offsets, alpha * x + y)


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(2)
    for alpha in (2.0, -0.5):
        n = 2048
        x = torch.randn(n, dtype=torch.bfloat16)
        y = torch.randn(n, dtype=torch.bfloat16)
        out = torch.empty(n, dtype=torch.bfloat16)
        axpy_kernel[(n // 1024,)](x, y, out, alpha, n, BLOCK_SIZE=1024)
        torch.testing.assert_close(out, alpha * x + y, atol=1e-2, rtol=1e-2)
        print(f"axpy alpha={alpha} N={n}: ok")
