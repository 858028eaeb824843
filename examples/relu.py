"""ReLU on the NPU, checked against numpy."""

import sys

import numpy as np
import torch
import triton
import triton.language as tl
from triton_npu import NPUDriver


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


def main() -> int:
    triton.runtime.driver.set_active(NPUDriver())
    n, block = 1 << 13, 1024
    x = torch.randn(n)
    out = torch.empty(n)
    relu_kernel[(n // block,)](x, out, n, BLOCK_SIZE=block)
    ok = np.allclose(out.numpy(), np.maximum(x.numpy(), 0.0), atol=1e-2, rtol=1e-2)
    print(f"relu of {n} float32: {'matches numpy' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
