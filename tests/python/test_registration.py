"""Registration with stock Triton and driver selection."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import run_python


def test_import_triton_discovers_the_backend():
    r = run_python(
        "import triton.backends as b; c = b.backends['amd_triton_npu'];"
        "print(c.compiler.__name__, c.driver.__name__)"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["NPUBackend", "NPUDriver"]


def test_import_triton_survives_a_broken_native_module(tmp_path: Path):
    # Shadow the package with a copy whose native module is unimportable.
    import triton_npu

    pkg = Path(triton_npu.__file__).parent
    copy = tmp_path / "triton_npu"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("_native*", "__pycache__"))
    (copy / "_native.py").write_text("raise ImportError('simulated broken native module')\n")
    code = (
        f"copy = {str(copy)!r}\n"
        "import triton, triton.backends as b;"
        "assert 'amd_triton_npu' in b.backends, list(b.backends);"
        "import triton_npu; assert triton_npu.__file__.startswith(copy);"
        "from triton_npu import NPUDriver;"
        "import triton_npu._loader as l\n"
        # Selecting the driver reads the runtime names from the native core: the broken
        # module is reported there, with what to do, and never at `import triton`.
        "try:\n    NPUDriver('xrt')\nexcept l.NativeModuleError as e:\n    print('ERR', e)\n"
    )
    r = run_python(code, env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "simulated broken native module" in r.stdout
    assert "make develop" in r.stdout or "reinstall" in r.stdout


def test_driver_runtime_selection(monkeypatch: pytest.MonkeyPatch):
    from triton_npu import NPUDriver

    assert NPUDriver().runtime == "xrt"
    assert NPUDriver("HSA").runtime == "hsa"
    monkeypatch.setenv("AMD_TRITON_NPU_RUNTIME", "hsa")
    assert NPUDriver().runtime == "hsa"
    assert NPUDriver("xrt").runtime == "xrt"
    with pytest.raises(ValueError, match="xrt, hsa"):
        NPUDriver("cuda")
    monkeypatch.setenv("AMD_TRITON_NPU_RUNTIME", "opencl")
    with pytest.raises(ValueError, match="AMD_TRITON_NPU_RUNTIME"):
        NPUDriver()


def test_driver_facts():
    from triton.backends.compiler import GPUTarget
    from triton_npu import NPUDriver

    d = NPUDriver("xrt")
    assert d.get_current_target() == GPUTarget("npu", 0, 0)
    assert d.get_current_device() == "npu"
    assert d.get_current_stream() is None
    assert d.map_python_to_cpp_type("*fp32") == "void*"
    assert d.map_python_to_cpp_type("i32") == "int32_t"
    with pytest.raises(ValueError):
        d.set_current_device("cuda:0")


def test_is_active_follows_triton_default_backend(monkeypatch: pytest.MonkeyPatch):
    from triton_npu.backend.driver import NPUDriver

    assert NPUDriver.is_active() is False
    monkeypatch.setenv("TRITON_DEFAULT_BACKEND", "amd_triton_npu")
    assert NPUDriver.is_active() is True


def test_triton_default_backend_activates_it():
    r = run_python(
        "import triton; d = triton.runtime.driver.active;"
        "print(type(d).__name__, d.runtime, d.get_current_target())",
        env={"TRITON_DEFAULT_BACKEND": "amd_triton_npu", "AMD_TRITON_NPU_RUNTIME": "hsa"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("NPUDriver hsa GPUTarget(backend='npu'")


def test_without_selection_triton_does_not_pick_the_npu():
    r = run_python("import triton; print(type(triton.runtime.driver.active).__name__)")
    # No GPU here either: Triton finds no active driver, and says so; what matters is that
    # the NPU backend did not claim to be active.
    assert "NPUDriver" not in r.stdout


def test_console_script_and_module_run_doctor():
    exe = Path(sys.executable).parent / "triton-npu"
    for cmd in (
        [str(exe), "doctor", "--json"],
        [sys.executable, "-m", "triton_npu", "doctor", "--json"],
    ):
        import subprocess

        env = {k: v for k, v in os.environ.items() if not k.startswith("AMD_TRITON_NPU_")}
        env["AMD_TRITON_NPU_TARGET"] = "npu2"
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        report = json.loads(r.stdout)
        assert report["target"] == "npu2"
        assert report["output_format"] == "elf"
        assert isinstance(report["errors"], list)
        assert r.returncode == (0 if report["usable"] else 1)
