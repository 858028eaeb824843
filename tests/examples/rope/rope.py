# Rotary position embedding (the rotate-half form of Qwen2.5 / LLaMA), upstream-example style
# (see ../vec-add/vec-add.py): each program rotates one row, seen as a 2×(D/2) block of its
# halves (x1, x2): y = x·cos + (-x2, x1)·sin. The partner half is the same block read with a
# negative row stride, so the kernel has one load per operand and one store.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def rope_kernel(X, COS, SIN, Y, D: tl.constexpr):
    H: tl.constexpr = D // 2
    row = tl.program_id(0)
    half = tl.arange(0, 2)
    j = tl.arange(0, H)
    offs = row * D + half[:, None] * H + j[None, :]
    x = tl.load(X + offs)
    partner = tl.load(X + row * D + (1 - half)[:, None] * H + j[None, :])
    sign = tl.where(half == 0, -1.0, 1.0)
    y = x * tl.load(COS + offs) + partner * sign[:, None] * tl.load(SIN + offs)
    tl.store(Y + offs, y)


def reference(x, cos, sin):
    x1, x2 = x[:, : x.shape[1] // 2], x[:, x.shape[1] // 2 :]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(10)
    seq, dim = 32, 64
    pos = torch.arange(seq, dtype=torch.float32)[:, None]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    angles = torch.cat((pos * inv_freq, pos * inv_freq), dim=-1)
    cos, sin = angles.cos(), angles.sin()
    x = torch.randn(seq, dim, dtype=torch.float32)
    y = torch.empty_like(x)
    rope_kernel[(seq,)](x, cos, sin, y, D=dim)
    torch.testing.assert_close(y, reference(x, cos, sin), atol=1e-5, rtol=1e-5)
    print(f"rope {seq}x{dim}: ok")
