"""What the harness computes and refuses, end to end, and the shape of the IR its
triton-shared-opt prints.

* The Linalg the stand-in prints for every TTIR fixture (real triton 3.9 output, one per kernel
  kind) parses and verifies with upstream MLIR (iree-base-compiler's bindings).
* A kernel whose result depends on a scalar the NPU never receives is refused when it runs,
  with the reason, under both runtimes; with the scalar a tl.constexpr it computes.
* A matmul whose sizes are not whole launch tiles (constexprs M and N, upstream's actual-sizes
  rule) computes with mlir-air's split-launch-for-padding: its boundary tiles read only the
  actual rows of A and columns of B, and write only the actual part of C.
* Triton 3.9's frontend has removed tl.make_block_ptr: a kernel that uses it fails with
  Triton's own message before anything reaches the backend.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import HARNESS, REPO, harness_env

FIXTURES = REPO / "tests" / "harness" / "tools" / "tests" / "fixtures"


def _triton_shared_opt() -> Path:
    tool = HARNESS / "bin" / "triton-shared-opt"
    assert tool.is_file(), f"{tool} is missing: run `make harness` first"
    return tool


@pytest.mark.parametrize("debuginfo", [False, True])
def test_the_linalg_of_every_fixture_verifies_with_upstream_mlir(debuginfo: bool, tmp_path: Path):
    ir = pytest.importorskip("iree.compiler.ir", reason="make venv installs iree-base-compiler")
    fixtures = sorted(FIXTURES.glob("*.ttir"))
    assert len(fixtures) >= 25
    args = ["--triton-to-linalg-experimental"] + (["--mlir-print-debuginfo"] if debuginfo else [])
    for fixture in fixtures:
        out = subprocess.run(
            [str(_triton_shared_opt()), *args, str(fixture)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, f"{fixture.name}: {out.stderr}"
        text = out.stdout
        assert "cannot print" not in text, f"{fixture.name}:\n{text}"
        with ir.Context() as ctx:
            try:
                module = ir.Module.parse(text, ctx)
            except Exception as e:  # noqa: BLE001 - the message is the diagnostic
                pytest.fail(f"{fixture.name} does not parse: {e}\n{text}")
            assert module.operation.verify(), fixture.name
        assert "linalg." in text and "func.func @" in text, fixture.name


KERNELS = textwrap.dedent(
    """
    import json, sys
    import torch
    import triton
    import triton.language as tl
    from triton_npu import NPUDriver

    @triton.jit
    def scaled_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    @triton.jit
    def scaled_add_constexpr(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.full((1000,), 5.0)
    result = {}
    try:
        scaled_add[(4,)](x, y, out, 1000, BLOCK=256)
        result["error"] = None
    except RuntimeError as e:
        result["error"] = str(e)
    result["untouched"] = bool((out == 5.0).all())
    scaled_add_constexpr[(4,)](x, y, out, 1000, BLOCK=256)
    result["constexpr_ok"] = bool(torch.allclose(out, x + y))
    print(json.dumps(result))
    """
)


@pytest.mark.parametrize("runtime", ["xrt", "hsa"])
def test_a_kernel_that_needs_a_dropped_scalar_is_refused_with_the_reason(
    runtime: str, tmp_path: Path
):
    script = tmp_path / "kernels.py"  # Triton reads a @jit function's source from its file
    script.write_text(KERNELS)
    env = harness_env(tmp_path)
    r = subprocess.run(
        [sys.executable, str(script), runtime],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["error"], "the kernel ran with a value the device never received"
    assert result["untouched"], "a refused kernel writes nothing"
    if runtime == "xrt":
        # The XRT stand-in reports the reason; ROCr reports only a failed completion signal.
        assert "scalar parameter %n (i32)" in result["error"], result["error"]
        assert "tl.constexpr" in result["error"], result["error"]
    assert result["constexpr_ok"], "with n a tl.constexpr the kernel computes"


def test_block_pointers_fail_in_tritons_frontend_with_its_message(tmp_path: Path):
    script = tmp_path / "block_ptr.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            import triton
            import triton.language as tl
            from triton_npu import NPUDriver

            @triton.jit
            def copy(x_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr):
                src = tl.make_block_ptr(x_ptr, (R, C), (C, 1), (0, 0), (R, C), (1, 0))
                dst = tl.make_block_ptr(y_ptr, (R, C), (C, 1), (0, 0), (R, C), (1, 0))
                tl.store(dst, tl.load(src))

            triton.runtime.driver.set_active(NPUDriver("xrt"))
            x, y = torch.randn(4, 8), torch.zeros(4, 8)
            try:
                copy[(1,)](x, y, R=4, C=8)
            except Exception as e:
                print("ERROR", type(e).__name__, str(e).replace("\\n", " "))
            print("UNTOUCHED", bool((y == 0).all()))
            """
        )
    )
    r = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=harness_env(tmp_path),
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Block pointers have been removed in favor of the tensor descriptor API" in r.stdout
    assert "UNTOUCHED True" in r.stdout


PADDED_MATMUL = """
import json, sys
import torch
import triton
import triton.language as tl
from triton.backends.amd_triton_npu.driver import NPUDriver


@triton.jit
def matmul_kernel(A, B, C, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = tl.program_id(1) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, K)
    a = tl.load(A + offs_m[:, None] * K + offs_k[None, :])
    b = tl.load(B + offs_k[:, None] * N + offs_n[None, :])
    tl.store(C + offs_m[:, None] * 128 + offs_n[None, :], tl.dot(a, b))


triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
torch.manual_seed(16)
M, N, K = 100, 70, 64
# A and B hold only the actual rows and columns; C holds whole 64x64 tiles (128x128).
a = torch.randn(M, K, dtype=torch.bfloat16)
b = torch.randn(K, N, dtype=torch.bfloat16)
c = torch.full((128, 128), -7.0)
matmul_kernel[(2, 2)](a, b, c, M, N, K, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64)
ref = a.float() @ b.float()
print(json.dumps({
    "actual": torch.allclose(c[:M, :N], ref, atol=1e-3, rtol=1e-4),
    "rows_untouched": bool((c[M:, :] == -7.0).all()),
    "cols_untouched": bool((c[:, N:] == -7.0).all()),
}))
"""


@pytest.mark.parametrize("runtime", ["xrt", "hsa"])
def test_a_matmul_cut_by_its_actual_sizes_reads_and_writes_only_them(runtime: str, tmp_path: Path):
    script = tmp_path / "padded.py"
    script.write_text(PADDED_MATMUL)
    r = subprocess.run(
        [sys.executable, str(script), runtime],
        capture_output=True,
        text=True,
        env=harness_env(tmp_path),
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result == {"actual": True, "rows_untouched": True, "cols_untouched": True}, result
