# Vector addition, written the way amd/Triton-XDNA's examples are: a @triton.jit kernel, torch
# CPU tensors, the NPU driver selected through the upstream import path, and the result checked
# against torch at upstream's tolerance. Run it from this directory (`triton-npu test-examples`
# does). Only pointer arguments reach the NPU, so the element count is a tl.constexpr (as in
# upstream's examples): a plain `n_elements` would be dropped by the launcher and the device
# would mask with a value it never received.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def check(n: int) -> None:
    x = torch.randn(n, dtype=torch.bfloat16)
    y = torch.randn(n, dtype=torch.bfloat16)
    out = torch.zeros(n, dtype=torch.bfloat16)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
    torch.testing.assert_close(out, x + y, atol=1e-2, rtol=1e-2)
    print(f"vec-add N={n}: ok")


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(0)
    for n in (2**10, 2**12, 2**14):
        check(n)
