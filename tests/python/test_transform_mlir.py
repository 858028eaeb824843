"""Our transform library and schedules parse and verify with a real MLIR.

The `iree-base-compiler` package ships upstream MLIR's Python bindings (`iree.compiler.ir`),
which parse and verify the transform, linalg, bufferization, scf, memref, arith and tensor
dialects. Checked here: every file of the transform library, the expansion of our own test
scripts (tests/fixtures/transform/scripts), the default elementwise schedule for unary, binary
and ternary kernels in bf16, f32, i8 and i32 on npu1 and npu2, and the automatic matmul
schedule for bf16, f32 and i8 on both targets (all printed by `triton-npu transform expand`,
so the scripts checked are the ones air-opt gets). The kernels themselves (written here in
triton-shared's shape, with masks and a scalar operand) parse and verify too.

Three differences between upstream MLIR as IREE ships it (October 2026) and the version
mlir-air d0e522b builds against (LLVM 56bcc187, August 2026) are bridged before parsing, and
only these (`as_iree_mlir`):

* `transform.air.*` ops are mlir-air's: IREE does not register them, and a named sequence
  must hold only ops that implement the transform interface, so each becomes
  `transform.merge_handles` of the same operands (one handle result, like every air op we
  use). Their own syntax (`$target attr-dict : functional-type`, AIRTransformOps.td at
  d0e522b) is checked by the Rust tests instead.
* IREE's MLIR reads the inherent attributes of `transform.structured.bufferize_to_allocation`
  and `transform.structured.pad` from a `<{...}>` property dictionary; the pinned version reads
  them from the attribute dictionary `{...}`, which is how upstream's scripts (run on that
  version) and ours write them.
* IREE's MLIR spells `transform.loop.unroll %l factor = 2` and `transform.split_handle %h
  overflow_result = 1`; the pinned version reads `{factor = 2}` and `{overflow_result = 1}`,
  as upstream's matmul schedule generator (matmul_transform.py) and ours write them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from iree.compiler import ir

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "crates" / "npu-transform" / "src" / "library"
FIXTURES = REPO / "tests" / "fixtures" / "transform"

_AIR_OP = re.compile(
    r"transform\.air\.\w+\s+(%[\w.$-]+(?:\s*,\s*%[\w.$-]+)*)\s*(?:\{[^{}]*\})?\s*:\s*"
    r"\([^()]*\)\s*->\s*!transform\.any_op",
    re.S,
)
_KEYWORD = re.compile(
    r"(transform\.(?:loop\.unroll|split_handle)\s+%[\w.$-]+)\s*\{\s*(\w+)\s*=\s*(\d+)\s*\}"
)
_PROPERTIES = re.compile(
    r"(transform\.structured\.(?:bufferize_to_allocation|pad)\s+%[\w.$-]+)\s*\{([^{}]*)\}",
    re.S,
)


def as_iree_mlir(text: str) -> str:
    """The three translations described in the module docstring."""
    text = _AIR_OP.sub(lambda m: f"transform.merge_handles {m.group(1)} : !transform.any_op", text)
    text = _KEYWORD.sub(lambda m: f"{m.group(1)} {m.group(2)} = {m.group(3)}", text)
    return _PROPERTIES.sub(lambda m: f"{m.group(1)} <{m.group(2)}>", text)


def verify(text: str, *, translate: bool = True) -> None:
    """Parses and verifies `text` with upstream MLIR; fails the test with MLIR's message."""
    ctx = ir.Context()
    try:
        module = ir.Module.parse(as_iree_mlir(text) if translate else text, ctx)
    except Exception as e:  # MLIR's diagnostics come as one exception
        pytest.fail(f"MLIR refused the text: {e}\n{text}")
    assert module.operation.verify()


def triton_npu(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "triton_npu", "transform", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def expand(*args: str) -> tuple[str, str]:
    out = triton_npu("expand", *args)
    assert out.returncode == 0, out.stderr
    assert "transform.include" not in out.stdout
    return out.stdout, out.stderr


def test_the_translation_touches_only_what_it_says():
    script = (
        "%h = transform.air.par_to_herd %p : (!transform.any_op) -> !transform.any_op\n"
        "%c = transform.air.vector_type_cast %m {target_element_type = bf16, input_indices = [0]}"
        "\n    : (!transform.any_op) -> !transform.any_op\n"
        "%b, %n = transform.structured.bufferize_to_allocation %x\n"
        "    {memory_space = 2, emit_dealloc} : !transform.any_op\n"
        '%f = transform.structured.match ops{["func.func"]} in %r : (!transform.any_op) -> '
        "!transform.any_op\n"
        "transform.loop.unroll %l {factor = 2} : !transform.any_op\n"
        "%i, %o = transform.split_handle %s {overflow_result = 1} : (!transform.any_op) -> "
        "(!transform.any_op, !transform.any_op)\n"
    )
    out = as_iree_mlir(script)
    assert "%h = transform.merge_handles %p : !transform.any_op" in out
    assert "%c = transform.merge_handles %m : !transform.any_op" in out
    assert "bufferize_to_allocation %x <memory_space = 2, emit_dealloc>" in out
    assert 'ops{["func.func"]}' in out
    assert "transform.loop.unroll %l factor = 2 :" in out
    assert "transform.split_handle %s overflow_result = 1 :" in out


@pytest.mark.parametrize("path", sorted(LIBRARY.glob("*.mlir")), ids=lambda p: p.name)
def test_library_files_verify(path: Path):
    text = path.read_text()
    verify("module attributes {transform.with_named_sequence} {\n" + text + "\n}\n")


def test_the_library_lists_its_25_sequences():
    out = triton_npu("list", "--json")
    assert out.returncode == 0, out.stderr
    import json

    entries = json.loads(out.stdout)
    assert len(entries) == 25
    assert all(e["signature"].startswith("@" + e["name"] + "(") and e["doc"] for e in entries)


@pytest.mark.parametrize(
    "path", sorted((FIXTURES / "scripts").glob("*.mlir")), ids=lambda p: p.name
)
def test_our_scripts_expand_and_verify(path: Path):
    text, _ = expand(str(path))
    verify(text)


@pytest.mark.parametrize(
    "name,message",
    [
        ("unknown_include.mlir", "unknown_include.mlir:7: transform.include @tile_for_the_moon"),
        ("recursive.mlir", "recursive.mlir:8: transform.include @ping: the includes are recursive"),
        (
            "bad_nesting.mlir",
            "bad_nesting.mlir:8: `)` does not close the `{` opened at 4:56 (bad nesting)",
        ),
    ],
)
def test_bad_scripts_exit_2_with_file_and_line(name: str, message: str):
    out = triton_npu("expand", str(FIXTURES / "errors" / name))
    assert out.returncode == 2
    assert out.stdout == ""
    assert message in out.stderr


# Kernels in triton-shared's shape: one linalg.generic per Triton operation, fills for splats
# and scalar operands, masked loads (subview + copy) and a masked store (extract_slice +
# materialize_in_destination). bf16 kernels compute in f32, as Triton does.

_MAP = "#map = affine_map<(d0) -> (d0)>\n"


class _Kernel:
    def __init__(self, elem: str, n_ptrs: int, scalars: list[str]):
        self.elem = elem
        self.compute = "f32" if elem == "bf16" else elem
        self.lines: list[str] = []
        self.n = 0
        self.ptrs = n_ptrs
        params = [
            f"%arg{i}: memref<*x{elem}> {{tt.divisibility = 16 : i32}}" for i in range(n_ptrs)
        ]
        params += [f"%arg{n_ptrs + i}: {t}" for i, t in enumerate(scalars)]
        first_id = n_ptrs + len(scalars)
        params += [f"%arg{first_id + i}: i32" for i in range(6)]
        self.scalar = lambda i: f"%arg{n_ptrs + i}"
        self.head = f"  func.func @kernel({', '.join(params)}) {{\n"
        pid = f"%arg{first_id + 3}"
        n_elements = self.scalar(len(scalars) - 1)
        self.emit(
            "%c1024_i32 = arith.constant 1024 : i32",
            f"%pid_off = arith.muli {pid}, %c1024_i32 : i32",
            "%off = arith.index_cast %pid_off : i32 to index",
            "%c1024 = arith.constant 1024 : index",
            "%end = arith.addi %off, %c1024 : index",
            f"%limit = arith.index_cast {n_elements} : i32 to index",
            "%stop = arith.minsi %end, %limit : index",
            "%len = arith.subi %stop, %off : index",
        )

    def emit(self, *lines: str) -> None:
        self.lines += [f"    {ln}" for ln in lines]

    def fresh(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def load(self, arg: int) -> str:
        t, k = self.elem, self.fresh()[2:]
        strided = "strided<[1], offset: ?>"
        self.emit(
            f"%rc{k} = memref.reinterpret_cast %arg{arg} to offset: [%off], sizes: [1024], "
            f"strides: [1] : memref<*x{t}> to memref<1024x{t}, {strided}>",
            f"%alloc{k} = memref.alloc() : memref<1024x{t}>",
            f"%src{k} = memref.subview %rc{k}[0] [%len] [1] : memref<1024x{t}, {strided}> to "
            f"memref<?x{t}, {strided}>",
            f"%dst{k} = memref.subview %alloc{k}[0] [%len] [1] : memref<1024x{t}> to "
            f"memref<?x{t}, strided<[1]>>",
            f"memref.copy %src{k}, %dst{k} : memref<?x{t}, {strided}> to "
            f"memref<?x{t}, strided<[1]>>",
            f"%t{k} = bufferization.to_tensor %alloc{k} restrict writable : memref<1024x{t}> to "
            f"tensor<1024x{t}>",
        )
        value = f"%t{k}"
        if self.elem == "bf16":
            value = self.generic(
                [value], ["bf16"], "f32", lambda a: (f"arith.extf {a[0]} : bf16 to f32",)
            )
        return value

    def splat(self, value: str, ty: str) -> str:
        e, r = self.fresh(), self.fresh()
        self.emit(
            f"{e} = tensor.empty() : tensor<1024x{ty}>",
            f"{r} = linalg.fill ins({value} : {ty}) outs({e} : tensor<1024x{ty}>) -> tensor<1024x{ty}>",
        )
        return r

    def generic(self, ins, in_types, out_type, body) -> str:
        """One generic; `body(args)` gives the ops computing the result `%r` from block args."""
        e, r = self.fresh(), self.fresh()
        maps = ", ".join(["#map"] * (len(ins) + 1))
        tensors = ", ".join(f"tensor<1024x{t}>" for t in in_types)
        args = [f"%b{i}" for i in range(len(ins))]
        block = ", ".join(f"{a}: {t}" for a, t in zip(args, in_types, strict=True))
        ops = body(args)
        self.emit(
            f"{e} = tensor.empty() : tensor<1024x{out_type}>",
            f'{r} = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}} '
            f"ins({', '.join(ins)} : {tensors}) outs({e} : tensor<1024x{out_type}>) {{",
            f"^bb0({block}, %out: {out_type}):",
            *[f"  %r{i} = {op}" for i, op in enumerate(ops)],
            f"  linalg.yield %r{len(ops) - 1} : {out_type}",
            f"}} -> tensor<1024x{out_type}>",
        )
        return r

    def binary(self, op: str, a: str, b: str) -> str:
        c = self.compute
        return self.generic([a, b], [c, c], c, lambda x: (f"{op} {x[0]}, {x[1]} : {c}",))

    def store(self, value: str, arg: int) -> str:
        t, strided = self.elem, "strided<[1], offset: ?>"
        if self.elem == "bf16":
            value = self.generic(
                [value], ["f32"], "bf16", lambda a: (f"arith.truncf {a[0]} : f32 to bf16",)
            )
        self.emit(
            f"%rc_out = memref.reinterpret_cast %arg{arg} to offset: [%off], sizes: [1024], "
            f"strides: [1] : memref<*x{t}> to memref<1024x{t}, {strided}>",
            f"%slice = tensor.extract_slice {value}[0] [%len] [1] : tensor<1024x{t}> to tensor<?x{t}>",
            f"%dst_out = memref.subview %rc_out[0] [%len] [1] : memref<1024x{t}, {strided}> to "
            f"memref<?x{t}, {strided}>",
            f"bufferization.materialize_in_destination %slice in writable %dst_out : "
            f"(tensor<?x{t}>, memref<?x{t}, {strided}>) -> ()",
            "return",
        )
        return self.text()

    def text(self) -> str:
        return _MAP + "module {\n" + self.head + "\n".join(self.lines) + "\n  }\n}\n"


def _ops(compute: str) -> dict:
    if compute.startswith("i"):
        zero = f"arith.constant 0 : {compute}"
        return {
            "add": "arith.addi",
            "mul": "arith.muli",
            "max": "arith.maxsi",
            "gt": "arith.cmpi sgt",
            "zero": zero,
        }
    zero = f"arith.constant 0.000000e+00 : {compute}"
    return {
        "add": "arith.addf",
        "mul": "arith.mulf",
        "max": "arith.maxnumf",
        "gt": "arith.cmpf ogt",
        "zero": zero,
    }


def elementwise_kernel(kind: str, elem: str) -> str:
    """relu (unary), axpy with a scalar alpha (binary), or where(x > y, x, z) (ternary)."""
    scalar = "f32" if elem == "bf16" else elem
    if kind == "unary":
        k = _Kernel(elem, 2, ["i32"])
        ops = _ops(k.compute)
        x = k.load(0)
        k.emit(f"%zero = {ops['zero']}")
        return k.store(k.binary(ops["max"], x, k.splat("%zero", k.compute)), 1)
    if kind == "binary":
        k = _Kernel(elem, 3, [scalar, "i32"])
        ops = _ops(k.compute)
        x, y = k.load(0), k.load(1)
        ax = k.binary(ops["mul"], x, k.splat(k.scalar(0), k.compute))
        return k.store(k.binary(ops["add"], ax, y), 2)
    k = _Kernel(elem, 4, ["i32"])
    ops = _ops(k.compute)
    x, y, z = k.load(0), k.load(1), k.load(2)
    c = k.compute
    cond = k.generic([x, y], [c, c], "i1", lambda a: (f"{ops['gt']}, {a[0]}, {a[1]} : {c}",))
    picked = k.generic(
        [cond, x, z], ["i1", c, c], c, lambda a: (f"arith.select {a[0]}, {a[1]}, {a[2]} : {c}",)
    )
    return k.store(picked, 3)


@pytest.mark.parametrize("target", ["npu1", "npu2"])
@pytest.mark.parametrize("elem", ["bf16", "f32", "i8", "i32"])
@pytest.mark.parametrize("kind", ["unary", "binary", "ternary"])
def test_the_default_schedule_verifies(tmp_path: Path, kind: str, elem: str, target: str):
    kernel = elementwise_kernel(kind, elem)
    verify(kernel, translate=False)  # the kernel is real MLIR
    path = tmp_path / "kernel.mlir"
    path.write_text(kernel)
    script, note = expand("--kernel", str(path), "--target", target)
    assert "default elementwise schedule" in note
    assert "may not fit" not in script, script
    verify(script)
    loads = {"unary": 1, "binary": 2, "ternary": 3}[kind]
    assert script.count("memory_space = 2") == loads + 1
    assert script.count("num_threads [4]" if target == "npu1" else "num_threads [8]") == 1
    # bf16 kernels are computed in f32: the casts back to bf16 follow the herd mapping.
    assert ("foreach_match" in script) == (elem == "bf16")


@pytest.mark.parametrize("target", ["npu1", "npu2"])
@pytest.mark.parametrize("elem", ["bf16", "f32", "i8"])
def test_the_matmul_schedule_verifies(elem: str, target: str):
    path = FIXTURES / "kernels" / f"matmul_{elem}.mlir"
    verify(path.read_text(), translate=False)
    script, note = expand("--kernel", str(path), "--target", target)
    assert "automatic matmul schedule" in note
    verify(script)
    assert script.count("transform.loop.forall_to_parallel") == 3
