"""Vector add on the NPU, checked against numpy.

python examples/vector_add.py            # runtime from AMD_TRITON_NPU_RUNTIME (xrt default)
AMD_TRITON_NPU_RUNTIME=hsa python examples/vector_add.py
"""

import sys

import numpy as np
import torch
import triton
import triton.language as tl
from triton_npu import NPUDriver


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def main() -> int:
    driver = NPUDriver()
    triton.runtime.driver.set_active(driver)
    n, block = 1 << 14, 1024
    x = torch.rand(n)
    y = torch.rand(n)
    out = torch.empty(n)
    add_kernel[(n // block,)](x, y, out, n, BLOCK_SIZE=block)
    expected = x.numpy() + y.numpy()
    ok = np.allclose(out.numpy(), expected, atol=1e-2, rtol=1e-2)
    worst = float(np.max(np.abs(out.numpy() - expected)))
    print(f"vector add of {n} float32 through the {driver.runtime} runtime:")
    print(f"  out[:4]      = {out[:4].tolist()}")
    print(f"  numpy[:4]    = {expected[:4].tolist()}")
    print(f"  max |error|  = {worst:.3g}  -> {'matches numpy' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
