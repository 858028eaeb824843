"""out = alpha * x + y with alpha compiled into the kernel (scalars never reach the NPU, so
alpha is a constexpr), checked against numpy."""

import sys

import numpy as np
import torch
import triton
import triton.language as tl
from triton_npu import NPUDriver


@triton.jit
def axpy_kernel(
    x_ptr, y_ptr, out_ptr, n_elements: tl.constexpr, ALPHA: tl.constexpr, BLOCK_SIZE: tl.constexpr
):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, ALPHA * x + y, mask=mask)


def main() -> int:
    triton.runtime.driver.set_active(NPUDriver())
    n, block, alpha = 1 << 13, 1024, 0.5
    x, y = torch.randn(n), torch.randn(n)
    out = torch.empty(n)
    axpy_kernel[(n // block,)](x, y, out, n, ALPHA=alpha, BLOCK_SIZE=block)
    ok = np.allclose(out.numpy(), alpha * x.numpy() + y.numpy(), atol=1e-2, rtol=1e-2)
    print(f"axpy (alpha={alpha}) of {n} float32: {'matches numpy' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
