# RMS normalisation with a weight, upstream-example style (see ../vec-add/vec-add.py and
# upstream's weighted_rms_norm): the mean of squares per row with tl.sum, tl.math.rsqrt, bf16
# in and out, f32 inside.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def rmsnorm_kernel(X, W, Y, N: tl.constexpr, EPS: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, N)
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(X + offs).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=1) / N + EPS)
    w = tl.load(W + cols).to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + offs, y.to(tl.bfloat16))


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(9)
    M, N, eps = 16, 256, 1e-6
    x = torch.randn(M, N, dtype=torch.bfloat16)
    w = torch.randn(N, dtype=torch.bfloat16)
    y = torch.empty(M, N, dtype=torch.bfloat16)
    rmsnorm_kernel[(M // 2,)](x, w, y, N, eps, ROWS=2)
    xf = x.float()
    ref = (xf * torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps) * w.float()).to(
        torch.bfloat16
    )
    # Upstream's weighted_rms_norm tolerance, and a tighter one the harness also meets.
    torch.testing.assert_close(y, ref, atol=5e-1, rtol=1e-1)
    torch.testing.assert_close(y, ref, atol=2e-2, rtol=1e-2)
    print(f"rmsnorm {M}x{N}: ok")
