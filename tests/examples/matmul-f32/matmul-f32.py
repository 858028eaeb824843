# C = A·B with float32 inputs, upstream-example style (see ../vec-add/vec-add.py). The NPU has
# no f32 matmul: an f32 matmul is compiled with aircc's --bf16-emulation (the backend turns it
# on for such kernels, as upstream does), so the device multiplies the inputs rounded to bf16
# and accumulates in f32. The reference does the same, as upstream's f32 example checks it.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def matmul_f32_kernel(
    A, B, C, K: tl.constexpr, N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, K)
    a = tl.load(A + offs_m[:, None] * K + offs_k[None, :])
    b = tl.load(B + offs_k[:, None] * N + offs_n[None, :])
    tl.store(C + offs_m[:, None] * N + offs_n[None, :], tl.dot(a, b))


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(6)
    M, N, K = 64, 64, 32
    a = torch.rand(M, K, dtype=torch.float32) * 4
    b = torch.rand(K, N, dtype=torch.float32) * 4
    c = torch.zeros(M, N, dtype=torch.float32)
    matmul_f32_kernel[(M // 32, N // 32)](a, b, c, K, N, BLOCK_M=32, BLOCK_N=32)
    ref = a.to(torch.bfloat16).float() @ b.to(torch.bfloat16).float()
    torch.testing.assert_close(c, ref, atol=1e-3, rtol=1e-4)
    # Upstream's tolerance against the exact f32 product.
    torch.testing.assert_close(c, a @ b, atol=10.0, rtol=0.1)
    print(f"matmul f32 (bf16 emulation) {M}x{N}x{K}: ok")
