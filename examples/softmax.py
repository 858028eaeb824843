"""Row softmax on the NPU, checked against numpy."""

import sys
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl
from triton_npu import NPUDriver
from triton_npu.config import npu_config

# The built-in default schedule serves elementwise kernels only: softmax's reductions do not
# fuse, so under it one_shot_bufferize would leave their results in L3, which mlir-air refuses
# inside air.segment. The row-wise schedule of the upstream-style suite fits this kernel.
SCHEDULE = Path(__file__).resolve().parent.parent / "tests/examples/softmax/transform_aie2p.mlir"


@triton.jit
def softmax_kernel(x_ptr, out_ptr, N_COLS: tl.constexpr, ROWS: tl.constexpr):
    # ROWS rows per program: the schedule gives each core one row of the block, so a program
    # of one row would ask for one core per element, a herd no array has.
    rows = tl.program_id(axis=0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, N_COLS)
    offs = rows[:, None] * N_COLS + cols[None, :]
    x = tl.load(x_ptr + offs)
    x = x - tl.max(x, axis=1, keep_dims=True)
    e = tl.exp(x)
    tl.store(out_ptr + offs, e / tl.sum(e, axis=1, keep_dims=True))


def main() -> int:
    triton.runtime.driver.set_active(NPUDriver())
    if npu_config.transform_tiling_script is None:
        npu_config.transform_tiling_script = str(SCHEDULE)
    rows, cols = 16, 256
    x = torch.randn(rows, cols)
    out = torch.empty(rows, cols)
    softmax_kernel[(rows // 4,)](x, out, N_COLS=cols, ROWS=4)
    e = np.exp(x.numpy() - x.numpy().max(axis=1, keepdims=True))
    ok = np.allclose(out.numpy(), e / e.sum(axis=1, keepdims=True), atol=1e-2, rtol=1e-2)
    print(f"softmax of {rows}x{cols} float32: {'matches numpy' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
