# ReLU on the NPU checked against the same kernel on the CPU backend (upstream's
# benchmark.select_cpu_backend(): triton-shared's CPUDriver) and against torch.

import os
import sys

import torch
import triton
import triton.language as tl

sys.path.append(os.path.abspath(".."))
import benchmark  # noqa: E402


@triton.jit
def relu_kernel(X, Y, n_elements: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(X + offsets, mask=mask)
    tl.store(Y + offsets, tl.maximum(x, 0.0), mask=mask)


def run(x):
    y = torch.full_like(x, -7.0)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK_SIZE=1024)
    return y


if __name__ == "__main__":
    torch.manual_seed(1)
    x = torch.randn(4000, dtype=torch.float32)
    benchmark.select_cpu_backend()
    on_cpu = run(x)
    benchmark.select_npu_backend()
    on_npu = run(x)
    torch.testing.assert_close(on_cpu, torch.relu(x))
    torch.testing.assert_close(on_npu, on_cpu, atol=1e-2, rtol=1e-2)
    print("relu N=4000: ok (npu == cpu == torch)")
