# Row-wise softmax over bfloat16, upstream-example style (see ../vec-add/vec-add.py): each
# program normalises ROWS rows of N_COLS columns with tl.max / tl.sum along axis 1, the
# reductions triton-shared lowers to linalg.reduce.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def softmax_kernel(x_ptr, out_ptr, N_COLS: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, N_COLS)
    offs = rows[:, None] * N_COLS + cols[None, :]
    x = tl.load(x_ptr + offs)
    x = x - tl.max(x, axis=1, keep_dims=True)
    e = tl.exp(x)
    tl.store(out_ptr + offs, e / tl.sum(e, axis=1, keep_dims=True))


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(3)
    rows, cols = 64, 128
    x = torch.randn(rows, cols, dtype=torch.bfloat16)
    out = torch.zeros(rows, cols, dtype=torch.bfloat16)
    softmax_kernel[(rows // 4,)](x, out, N_COLS=cols, ROWS=4)
    torch.testing.assert_close(out, torch.softmax(x, dim=1), atol=1e-2, rtol=1e-2)
    print(f"softmax {rows}x{cols}: ok")
