# Layer normalisation of bfloat16 rows with float32 statistics, upstream-example style (see
# ../vec-add/vec-add.py and upstream's gpt2 layernorm): mean and variance with tl.sum, then
# (x - mean) / sqrt(var + eps) * w + b, stored as bf16.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def layernorm_kernel(X, W, B, Y, N: tl.constexpr, EPS: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, N)
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(X + offs).to(tl.float32)
    mean = tl.sum(x, axis=1, keep_dims=True) / N
    xc = x - mean
    var = tl.sum(xc * xc, axis=1, keep_dims=True) / N
    w = tl.load(W + cols)
    b = tl.load(B + cols)
    y = xc / tl.sqrt(var + EPS) * w[None, :] + b[None, :]
    tl.store(Y + offs, y.to(tl.bfloat16))


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(8)
    M, N, eps = 16, 128, 1e-5
    x = torch.randn(M, N, dtype=torch.bfloat16)
    w = torch.rand(N, dtype=torch.float32) + 0.5
    b = torch.randn(N, dtype=torch.float32)
    y = torch.empty(M, N, dtype=torch.bfloat16)
    layernorm_kernel[(M // 4,)](x, w, b, y, N, eps, ROWS=4)
    ref = torch.nn.functional.layer_norm(x.float(), (N,), w, b, eps).to(torch.bfloat16)
    torch.testing.assert_close(y, ref, atol=5e-2, rtol=1e-2)
    print(f"layernorm {M}x{N}: ok")
