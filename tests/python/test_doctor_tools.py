"""`triton-npu doctor` checks every tool a compile for the chosen target and format runs,
directly or inside aircc, says where it looked and what each tool reports as its version."""

from __future__ import annotations

from pathlib import Path

from conftest import run_doctor

TOOLS = [
    "air-opt",
    "aircc",
    "aiecc",
    "bootgen",
    "aiebu-asm",
    "xclbinutil",
    "peano",
    "triton-shared-opt",
]


def _tool(path: Path, banner: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{banner}'\n")
    path.chmod(0o755)


def _doctor(env: dict) -> dict:
    """The report's components by name, with no toolchain location inherited."""
    rc, report = run_doctor(env, drop=_LOCATIONS)
    assert rc == (0 if report["usable"] else 1)
    return {c["component"]: c for c in report["components"]}


_LOCATIONS = (
    "MLIR_AIR_INSTALL_DIR",
    "PEANO_INSTALL_DIR",
    "LLVM_BINARY_DIR",
    "TRITON_SHARED_OPT_PATH",
    "XILINX_XRT",
    "XRT_DEV_DIR",
    "AIE_XCLBINUTIL",
)


def test_every_tool_of_a_compile_is_checked(tmp_path: Path):
    on_path = tmp_path / "bin"
    xrt = tmp_path / "xrt"
    _tool(on_path / "aiecc", "aiecc version 1.4.2.dev14")
    _tool(on_path / "bootgen", "****** Bootgen v2024.2")
    _tool(xrt / "bin" / "aiebu-asm", "aiebu-asm version 1.0")
    _tool(xrt / "bin" / "xclbinutil", "XRT Build Version: 2.19.0")
    env = {"PATH": str(on_path), "XILINX_XRT": str(xrt)}

    npu2 = _doctor({**env, "AMD_TRITON_NPU_TARGET": "npu2"})
    assert [t for t in TOOLS if t in npu2] == TOOLS
    for name, banner in [("aiecc", "aiecc version 1.4.2.dev14"), ("bootgen", "Bootgen v2024.2")]:
        assert npu2[name]["status"] == "ok"
        assert str(on_path / name) in npu2[name]["detail"] and banner in npu2[name]["detail"]
    # XRT's tools exist but aiecc would not find them off PATH: elf needs aiebu-asm.
    aiebu = npu2["aiebu-asm"]
    assert aiebu["status"] == "error", aiebu
    assert str(xrt / "bin" / "aiebu-asm") in aiebu["detail"]
    assert f"add {xrt / 'bin'} to PATH" in aiebu["detail"]
    assert "XRT" in aiebu["fix"]
    assert npu2["xclbinutil"]["status"] == "warn"  # not needed for elf
    assert "not needed for the elf format" in npu2["xclbinutil"]["detail"]

    # npu1 compiles to xclbin: xclbinutil is needed, aiebu-asm is not.
    npu1 = _doctor({**env, "AMD_TRITON_NPU_TARGET": "npu1"})
    assert npu1["xclbinutil"]["status"] == "error"
    assert npu1["aiebu-asm"]["status"] == "warn"

    # On PATH, they are found, with their versions.
    found = _doctor({"PATH": f"{on_path}:{xrt / 'bin'}", "AMD_TRITON_NPU_TARGET": "npu1"})
    assert found["xclbinutil"]["status"] == "ok"
    assert "XRT Build Version: 2.19.0" in found["xclbinutil"]["detail"]


def test_missing_tools_say_how_to_get_the_pinned_ones(tmp_path: Path):
    report = _doctor({"PATH": str(tmp_path), "AMD_TRITON_NPU_TARGET": "npu2"})
    for name in ["air-opt", "aircc"]:
        assert report[name]["status"] == "error"
        assert "mlir_air[aie]==0.0.1.2026081604+d0e522b.no.rtti" in report[name]["fix"]
    assert "1.4.2.dev14+gc84915b" in report["aiecc"]["fix"]
    assert "on PATH only" in report["aiecc"]["fix"]
    assert report["bootgen"]["status"] == "warn"  # aiecc may have it built in
    fix = report["triton-shared-opt"]["fix"]
    assert "TRITON_PLUGIN_DIRS" in fix and "microsoft/triton-shared" in fix
    assert "TRITON_SHARED_OPT_PATH" in fix
