# ReLU over float32, upstream-example style (see ../vec-add/vec-add.py).

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(1)
    # 4000 is not a multiple of the block: the last program's loads and stores are masked.
    n = 4000
    x = torch.randn(n, dtype=torch.float32)
    out = torch.full((n,), -7.0, dtype=torch.float32)
    relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
    torch.testing.assert_close(out, torch.relu(x), atol=1e-2, rtol=1e-2)
    print(f"relu N={n}: ok")
