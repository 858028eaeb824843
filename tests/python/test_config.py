"""The configuration API (upstream's names) and the output-format rules behind doctor."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import run_doctor
from triton_npu.config import config_context, npu_config, set_config


def test_defaults():
    assert npu_config.runtime == "xrt"
    assert npu_config.target is None
    assert npu_config.output_format is None
    assert npu_config.compile_only is False
    assert npu_config.bf16_emulation is False
    assert npu_config.transform_tiling_script is None
    assert npu_config.air_project_path is None
    assert npu_config.debug is False


def test_environment_then_programmatic(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AMD_TRITON_NPU_RUNTIME", "hsa")
    monkeypatch.setenv("AMD_TRITON_NPU_OUTPUT_FORMAT", "XCLBIN")
    monkeypatch.setenv("AMD_TRITON_NPU_COMPILE_ONLY", "1")
    assert npu_config.runtime == "hsa"
    assert npu_config.output_format == "xclbin"
    assert npu_config.compile_only is True
    npu_config.runtime = "xrt"
    npu_config.compile_only = False
    assert npu_config.runtime == "xrt"
    assert npu_config.compile_only is False
    npu_config.runtime = None  # back to the environment
    assert npu_config.runtime == "hsa"


def test_round_trips_every_property(tmp_path: Path):
    values = {
        "runtime": "hsa",
        "target": "npu1",
        "output_format": "pdi",
        "compile_only": True,
        "bf16_emulation": True,
        "transform_tiling_script": str(tmp_path / "t.mlir"),
        "debug": True,
        "xrt_dir": "/opt/xilinx/xrt",
    }
    set_config(**values, air_project_path=tmp_path / "ap")
    for key, value in values.items():
        assert getattr(npu_config, key) == value, key
    assert npu_config.air_project_path == tmp_path / "ap"


def test_invalid_values_name_the_variable():
    with pytest.raises(ValueError, match="npu_config.runtime.*cuda"):
        npu_config.runtime = "cuda"
    with pytest.raises(ValueError, match="target"):
        npu_config.target = "npu7"
    with pytest.raises(ValueError, match="output_format"):
        npu_config.output_format = "hsaco"
    assert npu_config.runtime == "xrt"


def test_invalid_environment_is_reported(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AMD_TRITON_NPU_TARGET", "npu9")
    with pytest.raises(ValueError, match="AMD_TRITON_NPU_TARGET"):
        _ = npu_config.target


def test_set_config_unknown_key_sets_nothing():
    with pytest.raises(ValueError, match="bogus"):
        set_config(runtime="hsa", bogus=1)
    assert npu_config.runtime == "xrt"
    with pytest.raises(ValueError):
        set_config(runtime="hsa", target="npu3")
    assert npu_config.runtime == "xrt", "a refused value rolls back the whole call"
    set_config(runtime=dataclasses.MISSING, target="npu2")
    assert npu_config.target == "npu2"


def test_config_context_restores_exactly():
    npu_config.target = "npu1"
    with config_context(runtime="hsa", target="npu2", compile_only=True) as cfg:
        assert (cfg.runtime, cfg.target, cfg.compile_only) == ("hsa", "npu2", True)
        npu_config.debug = True
    assert (npu_config.runtime, npu_config.target) == ("xrt", "npu1")
    assert npu_config.compile_only is False and npu_config.debug is False
    with pytest.raises(RuntimeError), config_context(runtime="hsa"):
        raise RuntimeError("boom")
    assert npu_config.runtime == "xrt"


def _doctor(env: dict) -> tuple[int, dict]:
    return run_doctor(env)


def test_doctor_output_format_rules():
    _, npu2 = _doctor({"AMD_TRITON_NPU_TARGET": "npu2"})
    assert (npu2["target"], npu2["output_format"]) == ("npu2", "elf")
    _, npu1 = _doctor({"AMD_TRITON_NPU_TARGET": "npu1"})
    assert (npu1["target"], npu1["output_format"]) == ("npu1", "xclbin")
    rc, pdi = _doctor(
        {
            "AMD_TRITON_NPU_TARGET": "npu2",
            "AMD_TRITON_NPU_RUNTIME": "hsa",
            "AMD_TRITON_NPU_OUTPUT_FORMAT": "pdi",
        }
    )
    assert rc == 1 and pdi["output_format"] is None
    assert any("pdi" in e and "hsa" in e for e in pdi["errors"]), pdi["errors"]
    rc, elf1 = _doctor({"AMD_TRITON_NPU_TARGET": "npu1", "AMD_TRITON_NPU_OUTPUT_FORMAT": "elf"})
    assert rc == 1 and any("npu1" in e for e in elf1["errors"])
    # XRT refuses a bare PDI too (upstream's XRT launcher does, at launch): doctor says so
    # before anything is compiled, with the refusal compile and launch give.
    rc, pdi_xrt = _doctor({"AMD_TRITON_NPU_TARGET": "npu2", "AMD_TRITON_NPU_OUTPUT_FORMAT": "pdi"})
    assert rc == 1 and pdi_xrt["output_format"] is None
    assert any(
        "pdi output format cannot run under XRT (AMD_TRITON_NPU_RUNTIME=xrt)" in e
        for e in pdi_xrt["errors"]
    ), pdi_xrt["errors"]


def test_doctor_without_device_explains():
    rc, report = _doctor({"PATH": "/usr/bin:/bin"})
    assert rc == 1
    assert report["target"] is None
    assert any("AMD_TRITON_NPU_TARGET" in e for e in report["errors"])


def test_rust_logs_reach_python_logging(monkeypatch, caplog, capsys):
    import logging

    from triton_npu.cli import main

    monkeypatch.setenv("PATH", "/nonexistent")
    # In-process, so detection is memoised per process: this is the only in-process doctor.
    npu_config.debug = True
    assert logging.getLogger("triton_npu").level == logging.DEBUG
    with caplog.at_level(logging.DEBUG, logger="triton_npu"):
        assert main(["doctor", "--json"]) == 1
    records = [r for r in caplog.records if r.name == "triton_npu"]
    assert any(
        "target detection" in r.getMessage() and "xrt-smi" in r.getMessage() for r in records
    ), [r.getMessage() for r in records]
    assert all(r.levelno == logging.DEBUG for r in records)
    npu_config.debug = False
    npu_config.runtime = "hsa"  # a new detection (results are memoised per runtime)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="triton_npu"):
        main(["doctor", "--json"])
    assert not [r for r in caplog.records if r.name == "triton_npu"], "debug off: no debug logs"
    capsys.readouterr()
