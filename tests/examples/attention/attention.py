# Causal self-attention for one head per program, upstream-example style (see
# ../vec-add/vec-add.py and upstream's gpt2/qwen2_5 attention): S = Q·Kᵀ·scale (a tl.dot with a
# transposed operand), a causal tl.where, a row softmax, then P·V with P cast to bf16 and an
# f32 accumulator. Every size is a tl.constexpr; the whole sequence is one block.

import math

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def attention_kernel(Q, K, V, Out, SEQ: tl.constexpr, HEAD_DIM: tl.constexpr, SCALE: tl.constexpr):
    head = tl.program_id(0)
    rows = tl.arange(0, SEQ)
    d = tl.arange(0, HEAD_DIM)
    offs = head * SEQ * HEAD_DIM + rows[:, None] * HEAD_DIM + d[None, :]
    q = tl.load(Q + offs)
    k = tl.load(K + offs)
    v = tl.load(V + offs)
    s = tl.dot(q, tl.trans(k)) * SCALE
    s = tl.where(rows[:, None] >= rows[None, :], s, float("-inf"))
    p = tl.exp(s - tl.max(s, axis=1, keep_dims=True))
    p = p / tl.sum(p, axis=1, keep_dims=True)
    o = tl.dot(p.to(tl.bfloat16), v)
    tl.store(Out + offs, o.to(tl.bfloat16))


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(11)
    heads, seq, dim = 4, 32, 64
    q = torch.randn(heads, seq, dim, dtype=torch.bfloat16)
    k = torch.randn(heads, seq, dim, dtype=torch.bfloat16)
    v = torch.randn(heads, seq, dim, dtype=torch.bfloat16)
    o = torch.empty_like(q)
    scale = 1.0 / math.sqrt(dim)
    attention_kernel[(heads,)](q, k, v, o, SEQ=seq, HEAD_DIM=dim, SCALE=scale)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=True, scale=scale
    ).to(torch.bfloat16)
    torch.testing.assert_close(o, ref, atol=5e-2, rtol=5e-2)
    print(f"attention {heads}x{seq}x{dim}: ok")
