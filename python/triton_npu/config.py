"""Upstream's configuration API: ``npu_config``, ``set_config`` and ``config_context``.

Every value lives in the Rust core (crate ``npu-target``), which also reads the environment,
so Python and Rust always agree. Precedence: a value set here > the environment variable >
the default. Setting ``None`` returns a property to environment/default.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from triton_npu._loader import native
from triton_npu.errors import NPUConfigError

__all__ = ["npu_config", "set_config", "config_context", "NPUConfig", "resolve_runtime"]


def _properties() -> tuple[str, ...]:
    """The settable properties, from the native table of variables (declared once, in Rust)."""
    return tuple(v["property"] for v in native().variables() if v["property"] is not None)


def _encode(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a str, bool, Path or None, got {type(value).__name__}")


class NPUConfig:
    """The driver configuration of this process (one instance: ``npu_config``)."""

    def _get(self, name: str) -> Any:
        return native().config_snapshot()[name]

    def _set(self, name: str, value: Any) -> None:
        native().config_set(name, _encode(value))
        if name == "debug":
            _apply_debug_level()

    runtime = property(lambda s: s._get("runtime"), lambda s, v: s._set("runtime", v))
    target = property(lambda s: s._get("target"), lambda s, v: s._set("target", v))
    output_format = property(
        lambda s: s._get("output_format"), lambda s, v: s._set("output_format", v)
    )
    compile_only = property(
        lambda s: s._get("compile_only"), lambda s, v: s._set("compile_only", v)
    )
    bf16_emulation = property(
        lambda s: s._get("bf16_emulation"), lambda s, v: s._set("bf16_emulation", v)
    )
    transform_tiling_script = property(
        lambda s: s._get("transform_tiling_script"),
        lambda s, v: s._set("transform_tiling_script", v),
    )
    debug = property(lambda s: s._get("debug"), lambda s, v: s._set("debug", v))
    xrt_dir = property(lambda s: s._get("xrt_dir"), lambda s, v: s._set("xrt_dir", v))

    @property
    def air_project_path(self) -> Path | None:
        value = self._get("air_project_path")
        return None if value is None else Path(value)

    @air_project_path.setter
    def air_project_path(self, value: str | Path | None) -> None:
        self._set("air_project_path", value)

    def reset(self) -> None:
        """Forgets every programmatic value."""
        native().config_restore({})
        _apply_debug_level()

    def as_dict(self) -> dict[str, Any]:
        snap = native().config_snapshot()
        return {name: snap[name] for name in _properties()}

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"NPUConfig({body})"


npu_config = NPUConfig()


def _apply_debug_level() -> None:
    """Follows ``npu_config.debug`` in the Rust log filter. The ``triton_npu`` logger's own
    level is set only when debug is on (and reset only if we set it), so a level the user
    chose is kept; the Rust side also forwards debug events when the user's logger wants them.
    """
    try:
        debug = native().config_snapshot()["debug"]
    except ValueError:
        return  # an invalid environment is reported where a value is read, not here
    logger = logging.getLogger("triton_npu")
    global _set_logger_level
    if debug and logger.level != logging.DEBUG:
        logger.setLevel(logging.DEBUG)
        _set_logger_level = True
    elif not debug and _set_logger_level:
        logger.setLevel(logging.NOTSET)
        _set_logger_level = False
    wants_debug = debug or logger.isEnabledFor(logging.DEBUG)
    native().set_log_level("debug" if wants_debug else "info")


_set_logger_level = False


def set_config(**kwargs: Any) -> None:
    """Sets several properties at once; an unknown key raises ``ValueError`` and sets nothing."""
    properties = _properties()
    unknown = sorted(k for k in kwargs if k not in properties)
    if unknown:
        raise NPUConfigError(
            f"unknown configuration key(s) {', '.join(unknown)}; valid keys: "
            + ", ".join(properties)
        )
    saved = native().config_overrides()
    try:
        for key, value in kwargs.items():
            if value is dataclasses.MISSING:
                continue
            setattr(npu_config, key, value)
    except BaseException:
        native().config_restore(saved)
        raise


@contextlib.contextmanager
def config_context(**kwargs: Any) -> Iterator[NPUConfig]:
    """Applies ``set_config(**kwargs)`` for the duration of a ``with`` block, then restores
    exactly the programmatic values that were set before."""
    saved = native().config_overrides()
    try:
        set_config(**kwargs)
        yield npu_config
    finally:
        native().config_restore(saved)
        _apply_debug_level()


def resolve_runtime(runtime: str | None) -> str:
    """``runtime``, or ``npu_config.runtime`` when it is ``None``, as a runtime name; an unknown
    name raises ``NPUConfigError`` (a ``ValueError``) that lists the valid names."""
    if runtime is None:
        return npu_config.runtime
    return native().parse_runtime(
        runtime if isinstance(runtime, str) else repr(runtime),
        "the runtime argument or AMD_TRITON_NPU_RUNTIME",
    )
