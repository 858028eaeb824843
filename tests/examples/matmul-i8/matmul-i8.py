# C = A·B with int8 inputs and an int32 accumulator, upstream-example style (see
# ../vec-add/vec-add.py): exact, as upstream checks it (atol=0, rtol=0).

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def matmul_i8_kernel(
    A, B, C, K: tl.constexpr, N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, K)
    a = tl.load(A + offs_m[:, None] * K + offs_k[None, :])
    b = tl.load(B + offs_k[:, None] * N + offs_n[None, :])
    c = tl.dot(a, b, out_dtype=tl.int32)
    tl.store(C + offs_m[:, None] * N + offs_n[None, :], c)


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(5)
    M, N, K = 128, 64, 64
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8)
    b = torch.randint(-128, 128, (K, N), dtype=torch.int8)
    c = torch.zeros(M, N, dtype=torch.int32)
    matmul_i8_kernel[(M // 32, N // 32)](a, b, c, K, N, BLOCK_M=32, BLOCK_N=32)
    torch.testing.assert_close(c, a.to(torch.int32) @ b.to(torch.int32), atol=0, rtol=0)
    print(f"matmul i8 {M}x{N}x{K}: ok")
