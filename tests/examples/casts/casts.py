# Conversions among float32, bfloat16, float16, int8, int16 and int32, upstream-example style
# (see ../vec-add/vec-add.py): one single-output kernel per (source, destination) pair; each
# result must be exactly torch's conversion (round to nearest even for narrower floats,
# truncation toward zero for float to int, wrap-around for narrower ints).

import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def cast_kernel(X, Y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    tl.store(Y + offs, x.to(Y.dtype.element_ty))


PAIRS = [
    (torch.float32, torch.bfloat16),
    (torch.float32, torch.float16),
    (torch.float32, torch.int8),
    (torch.float32, torch.int32),
    (torch.bfloat16, torch.float32),
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.int16),
    (torch.int8, torch.float32),
    (torch.int16, torch.bfloat16),
    (torch.int32, torch.int16),
    (torch.int32, torch.float16),
    (torch.int8, torch.int32),
]


def source(dtype, n):
    if dtype.is_floating_point:
        # Within int8's range after truncation, and with fractions that need rounding.
        return (torch.randn(n) * 40).clamp(-127.0, 127.0).to(dtype)
    info = torch.iinfo(dtype)
    low, high = max(info.min, -(2**20)), min(info.max, 2**20)
    return torch.randint(low, high, (n,), dtype=dtype)


if __name__ == "__main__":
    triton.runtime.driver.set_active(NPUDriver())
    torch.manual_seed(13)
    n = 1024
    for src, dst in PAIRS:
        x = source(src, n)
        y = torch.empty(n, dtype=dst)
        cast_kernel[(n // 256,)](x, y, BLOCK=256)
        torch.testing.assert_close(y, x.to(dst), atol=0, rtol=0)
        print(f"{src} -> {dst} N={n}: ok")
