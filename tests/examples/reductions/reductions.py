# tl.sum, tl.max and tl.min along both axes of a 2-D block, upstream-example style (see
# ../vec-add/vec-add.py and upstream's average_pool): each program takes ROWS rows and returns
# x - max(x, axis=1) + sum(x, axis=0) / ROWS - min(x, axis=1) for its block. triton-shared
# lowers each reduction to linalg.fill + linalg.reduce, one over the last axis through a
# linalg.transpose.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def reduce_kernel(X, Y, N: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, N)
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(X + offs)
    row_max = tl.max(x, axis=1, keep_dims=True)
    row_min = tl.min(x, axis=1)
    col_sum = tl.sum(x, axis=0)
    y = x - row_max + col_sum[None, :] / ROWS - row_min[:, None]
    tl.store(Y + offs, y)


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(7)
    M, N, ROWS = 32, 64, 8
    x = torch.randn(M, N, dtype=torch.float32)
    y = torch.empty(M, N, dtype=torch.float32)
    reduce_kernel[(M // ROWS,)](x, y, N, ROWS=ROWS)
    blocks = x.reshape(M // ROWS, ROWS, N)
    ref = (
        blocks
        - blocks.max(dim=2, keepdim=True).values
        + blocks.sum(dim=1, keepdim=True) / ROWS
        - blocks.min(dim=2, keepdim=True).values
    ).reshape(M, N)
    torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
    print(f"reductions {M}x{N}: ok")
