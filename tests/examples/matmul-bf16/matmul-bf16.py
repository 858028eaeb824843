# C = A·B with bfloat16 inputs and a float32 result, upstream-example style (see
# ../vec-add/vec-add.py): a 2-D grid of programs, each computing one BLOCK_M×BLOCK_N tile over
# the whole K with one tl.dot (triton-shared: linalg.fill + linalg.matmul). The device
# accumulates in f32.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def matmul_kernel(
    A,
    B,
    C,
    K: tl.constexpr,
    stride_am: tl.constexpr,
    stride_bk: tl.constexpr,
    stride_cm: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, K)
    a = tl.load(A + offs_m[:, None] * stride_am + offs_k[None, :])
    b = tl.load(B + offs_k[:, None] * stride_bk + offs_n[None, :])
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], tl.dot(a, b))


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(4)
    M, N, K = 128, 128, 64
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(K, N, dtype=torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.float32)
    grid = (M // 64, N // 64)
    matmul_kernel[grid](a, b, c, K, a.stride(0), b.stride(0), c.stride(0), BLOCK_M=64, BLOCK_N=64)
    torch.testing.assert_close(c, torch.matmul(a, b).to(torch.float32), atol=1e1, rtol=1e-1)
    # Tighter than upstream's tolerance: f32 accumulation of exact bf16 products.
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-3, rtol=1e-4)
    print(f"matmul bf16 {M}x{N}x{K}: ok")
