# The math and comparison ops upstream's kernels use, upstream-example style (see
# ../vec-add/vec-add.py): one kernel with the op a tl.constexpr, so each op compiles to its own
# single-output elementwise kernel (as upstream's gelu/sigmoid/silu examples are): exp, exp2,
# log, sqrt, rsqrt, erf, sigmoid, tanh (Triton 3.9 has no tl.tanh: written with tl.sigmoid),
# tl.where over a comparison, maximum/minimum, and comparison results as values.

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver

OPS = {
    "exp": lambda x, y: torch.exp(x),
    "exp2": lambda x, y: torch.exp2(x),
    "log": lambda x, y: torch.log(x.abs() + 0.5),
    "sqrt": lambda x, y: torch.sqrt(x.abs() + 0.5),
    "rsqrt": lambda x, y: torch.rsqrt(x.abs() + 0.5),
    "erf": lambda x, y: torch.erf(x),
    "sigmoid": lambda x, y: torch.sigmoid(x),
    "tanh": lambda x, y: torch.tanh(x),
    "where": lambda x, y: torch.where(x > y, x - y, y * 0.5),
    "max-min": lambda x, y: torch.maximum(x, y) - torch.minimum(x, y),
    "compare": lambda x, y: (x < y).float() + 2 * (x == y).float() + 4 * (x >= 0).float(),
}


@triton.jit
def math_kernel(X, Y, OUT, BLOCK: tl.constexpr, OP: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    y = tl.load(Y + offs)
    if OP == "exp":
        r = tl.exp(x)
    elif OP == "exp2":
        r = tl.exp2(x)
    elif OP == "log":
        r = tl.log(tl.abs(x) + 0.5)
    elif OP == "sqrt":
        r = tl.sqrt(tl.abs(x) + 0.5)
    elif OP == "rsqrt":
        r = tl.math.rsqrt(tl.abs(x) + 0.5)
    elif OP == "erf":
        r = tl.erf(x)
    elif OP == "sigmoid":
        r = tl.sigmoid(x)
    elif OP == "tanh":
        r = 2.0 * tl.sigmoid(2.0 * x) - 1.0
    elif OP == "where":
        r = tl.where(x > y, x - y, y * 0.5)
    elif OP == "max-min":
        r = tl.maximum(x, y) - tl.minimum(x, y)
    else:
        lt = (x < y).to(tl.float32)
        eq = (x == y).to(tl.float32)
        r = lt + 2.0 * eq + 4.0 * (x >= 0.0).to(tl.float32)
    tl.store(OUT + offs, r)


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(12)
    n = 2048
    x = torch.randn(n, dtype=torch.float32) * 2
    y = torch.randn(n, dtype=torch.float32)
    y[::17] = x[::17]  # some equal pairs
    for name, ref in OPS.items():
        out = torch.empty(n, dtype=torch.float32)
        math_kernel[(n // 512,)](x, y, out, BLOCK=512, OP=name)
        torch.testing.assert_close(out, ref(x, y), atol=1e-5, rtol=1e-5)
        print(f"{name} N={n}: ok")
