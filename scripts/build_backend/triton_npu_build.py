"""The PEP 517 backend of ``pip install .``: maturin's, after building the standalone
``triton-npu`` binary into the wheel's scripts (``stage_cli``). maturin compiles only the
Python extension of a pyo3 project, and a wheel must carry the binary pip installs as the
``triton-npu`` command; without this step a fresh checkout would have none to ship.

maturin refuses to run at all while ``[tool.maturin] data`` names a folder that does not
exist, so the hooks that need no binary (metadata, sdist) create it empty first."""

from __future__ import annotations

import maturin
import stage_cli
from maturin import (  # noqa: F401 - hooks a PEP 517 frontend may call, unchanged
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    stage_cli.stage(stage_cli.build())
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    stage_cli.stage(stage_cli.build())
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    stage_cli.scripts_dir()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    stage_cli.scripts_dir()
    return maturin.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_sdist(sdist_directory, config_settings=None):
    stage_cli.scripts_dir()
    return maturin.build_sdist(sdist_directory, config_settings)
