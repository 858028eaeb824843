# A 2-D kernel over a matrix that the blocks do not divide, read through strides (stored
# transposed), with masks on both dimensions and `other` for the masked-off lanes, and the program ids
# used as values, upstream-example style (see ../vec-add/vec-add.py). Sizes and strides are
# tl.constexpr: only pointers reach the NPU.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def masked_2d_kernel(
    X,
    Y,
    M: tl.constexpr,
    N: tl.constexpr,
    stride_xm: tl.constexpr,
    stride_xn: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0)
    # Each block adds its program ids, and the row maximum (masked lanes read 0 via `other`).
    tag = (pid_m * 100 + pid_n).to(tl.float32)
    y = x * 2.0 + tag + tl.max(x, axis=1, keep_dims=True)
    tl.store(Y + rows[:, None] * N + cols[None, :], y, mask=mask)


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(14)
    M, N, BM, BN = 50, 70, 16, 32
    # The matrix is stored transposed (N×M, contiguous): the kernel reads x[m, n] at
    # m * 1 + n * M, strides it receives as constexprs. Only contiguous tensors reach the NPU.
    stored = torch.randn(N, M, dtype=torch.float32)
    x = stored.t()
    y = torch.full((M, N), -99.0, dtype=torch.float32)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    masked_2d_kernel[grid](stored, y, M, N, x.stride(0), x.stride(1), BLOCK_M=BM, BLOCK_N=BN)
    ref = torch.empty(M, N)
    for bm in range(grid[0]):
        for bn in range(grid[1]):
            r, c = slice(bm * BM, (bm + 1) * BM), slice(bn * BN, (bn + 1) * BN)
            block = x[r, c]
            row_max = block.max(dim=1, keepdim=True).values.clamp(min=0.0)
            if block.shape[1] == BN:
                row_max = block.max(dim=1, keepdim=True).values
            ref[r, c] = block * 2 + (bm * 100 + bn) + row_max
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    print(f"masked 2-D {M}x{N} in {BM}x{BN} blocks: ok")
