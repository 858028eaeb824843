"""A real @triton.jit kernel through Triton's frontend and our stages on this CPU-only machine."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def _source() -> ASTSource:
    return ASTSource(
        fn=add_kernel,
        signature={
            "x_ptr": "*fp32",
            "y_ptr": "*fp32",
            "out_ptr": "*fp32",
            "n_elements": "i32",
            "BLOCK_SIZE": "constexpr",
        },
        constexprs={"BLOCK_SIZE": 1024},
    )


def test_missing_triton_shared_opt_is_a_clear_error(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_SHARED_OPT_PATH", str(tmp_path / "nowhere" / "triton-shared-opt"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(Exception) as info:
        triton.compile(_source(), target=GPUTarget("npu", 0, 0))
    text = str(info.value)
    assert "triton-shared-opt" in text
    assert "TRITON_SHARED_OPT_PATH" in text and str(tmp_path / "nowhere") in text
    assert "PATH" in text
    assert "To fix:" in text


def test_ttir_stage_runs_and_feeds_triton_shared_opt(monkeypatch, tmp_path: Path):
    # A triton-shared-opt of our own making records its input, proving the TTIR stage ran
    # with Triton's real frontend and the tool got the real command line.
    seen = tmp_path / "seen.mlir"
    tool = tmp_path / "bin" / "triton-shared-opt"
    tool.parent.mkdir()
    tool.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path}/argv\n'
        "out=''; prev=''\n"
        'for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done\n'
        f'cp "$1" {seen}\n'
        "printf 'module {\\n  func.func @add_kernel(%%arg0: memref<*xf32>) {\\n"
        '    return\\n  }\\n}\\n\' > "$out"\n'
    )
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_SHARED_OPT_PATH", str(tool))
    compiled = triton.compile(_source(), target=GPUTarget("npu", 0, 0))
    ttir = seen.read_text()
    assert "tt.func public @add_kernel" in ttir and "tt.load" in ttir and "arith.addf" in ttir
    argv = (tmp_path / "argv").read_text().split()
    assert argv[1:3] == ["--triton-to-linalg-experimental", "--mlir-print-debuginfo"]
    assert compiled.metadata.name == "add_kernel"
    assert set(compiled.asm) >= {"ttir", "ttsharedir"}
    assert b"func.func @add_kernel" in compiled.asm["ttsharedir"]


def _tool_printing(tmp_path: Path, output: str) -> Path:
    """A triton-shared-opt that writes `output` to its `-o` file."""
    (tmp_path / "output.mlir").write_text(output)
    tool = tmp_path / "bin" / "triton-shared-opt"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(
        "#!/bin/sh\n"
        "out=''; prev=''\n"
        'for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done\n'
        f'cp {tmp_path / "output.mlir"} "$out"\n'
    )
    tool.chmod(0o755)
    return tool


def test_kernel_name_comes_from_the_mlir_reader(monkeypatch, tmp_path: Path):
    # --mlir-print-debuginfo output: a declaration before the kernel, quoted locations holding
    # `)`, `->` and quotes, location aliases after the module.
    output = (
        "module {\n"
        '  func.func private @helper(i32) loc("f(x) -> \\"y\\"":1:2)\n'
        "  func.func @the_kernel(%arg0: memref<*xf32> "
        '{tt.divisibility = 16 : i32} loc("x_ptr"(#loc1))) {\n'
        "    return loc(#loc2)\n"
        "  } loc(#loc1)\n"
        "} loc(#loc1)\n"
        '#loc1 = loc("/p/k.py":3:0)\n'
        "#loc2 = loc(fused[#loc1, #loc1])\n"
    )
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_SHARED_OPT_PATH", str(_tool_printing(tmp_path, output)))
    compiled = triton.compile(_source(), target=GPUTarget("npu", 0, 0))
    assert compiled.metadata.name == "the_kernel"


def test_unreadable_triton_shared_output_says_where(monkeypatch, tmp_path: Path):
    output = "module {\n  func.func @k(%arg0: memref<*xf32>]) {\n  }\n}\n"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_SHARED_OPT_PATH", str(_tool_printing(tmp_path, output)))
    with pytest.raises(RuntimeError) as info:
        triton.compile(_source(), target=GPUTarget("npu", 0, 0))
    text = str(info.value)
    assert "cannot name the kernel" in text and "2:36" in text, text
    assert "does not close the `(` opened at 2:15" in text, text


def test_failing_triton_shared_opt_reports_its_output(monkeypatch, tmp_path: Path):
    tool = tmp_path / "triton-shared-opt"
    tool.write_text("#!/bin/sh\necho 'error: failed to legalize tt.dot' >&2\nexit 3\n")
    tool.chmod(0o755)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_SHARED_OPT_PATH", str(tmp_path))  # a directory holding it
    with pytest.raises(Exception) as info:
        triton.compile(_source(), target=GPUTarget("npu", 0, 0))
    assert "exit status 3" in str(info.value) and "failed to legalize" in str(info.value)


def test_backend_hash_changes_with_the_toolchain(monkeypatch, tmp_path: Path):
    from triton_npu.backend import compiler

    backend = compiler.NPUBackend(GPUTarget("npu", 0, 0))
    compiler._toolchain_fingerprint.cache_clear()
    before = backend.hash()
    assert "triton-npu-" in before
    tool = tmp_path / "triton-shared-opt"
    tool.write_text("#!/bin/sh\necho 'triton-shared-opt version 9.9'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("TRITON_SHARED_OPT_PATH", str(tool))
    compiler._toolchain_fingerprint.cache_clear()
    assert backend.hash() != before
