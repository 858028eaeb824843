# Vector addition in bf16 over several sizes, as upstream's vec-add example: NPU result
# against torch at upstream's tolerance, and the kernel's artifacts where upstream keeps them.

import os
import sys

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import get_npu_cache_dir

sys.path.append(os.path.abspath(".."))
import benchmark  # noqa: E402


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)
    y = tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, x + y)


if __name__ == "__main__":
    benchmark.select_npu_backend()
    torch.manual_seed(0)
    for n in (2**10, 2**12):
        x = torch.randn(n, dtype=torch.bfloat16)
        y = torch.randn(n, dtype=torch.bfloat16)
        out = torch.empty(n, dtype=torch.bfloat16)
        grid = (triton.cdiv(n, 1024),)
        compiled = add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
        torch.testing.assert_close(out, x + y, atol=1e-2, rtol=1e-2)
        assert "aie.elf" in os.listdir(get_npu_cache_dir(compiled))
        print(f"vec-add N={n}: ok")
