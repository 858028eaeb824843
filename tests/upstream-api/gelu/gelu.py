# GELU (tanh approximation) in f32, as upstream's gelu example checks it (atol/rtol 1e-1).

import os
import sys

import torch
import triton
import triton.language as tl

sys.path.append(os.path.abspath(".."))
import benchmark  # noqa: E402


@triton.jit
def gelu_kernel(X, Y, n_elements: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(X + offsets)
    inner = 0.7978845608 * (x + 0.044715 * x * x * x)
    tl.store(Y + offsets, 0.5 * x * (1.0 + (2.0 * tl.sigmoid(2.0 * inner) - 1.0)))


if __name__ == "__main__":
    benchmark.select_npu_backend()
    torch.manual_seed(3)
    n = 2048
    x = torch.randn(n, dtype=torch.float32)
    y = torch.empty_like(x)
    gelu_kernel[(n // 1024,)](x, y, n, BLOCK_SIZE=1024)
    torch.testing.assert_close(
        y, torch.nn.functional.gelu(x, approximate="tanh"), atol=1e-1, rtol=1e-1
    )
    print(f"gelu N={n}: ok")
