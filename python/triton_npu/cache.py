"""The kernel cache: compiled NPU artifacts, built once and shared between processes.

An entry is identified by a set of named inputs (kernel IR, grid, kernel name, output
format, runtime, target, flags, the transform script's content, tool versions …). The first
caller that asks for a missing entry builds it; concurrent callers, in this process or in
others, wait for that build instead of repeating it. An entry is published only when its
build succeeded, and a damaged entry is never served: it is rebuilt.

The cache lives in ``AMD_TRITON_NPU_CACHE_DIR``, else ``$TRITON_CACHE_DIR/npu``, else
``$TRITON_HOME/.triton/cache/npu``, else ``~/.triton/cache/npu``; ``triton-npu cache``
lists, verifies and clears it.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping

__all__ = ["get_or_build", "cache_dir", "key"]


def _inputs(inputs: Mapping[str, str | bytes]) -> dict[str, str | bytes]:
    if not isinstance(inputs, Mapping):
        raise TypeError(
            f"cache inputs must be a mapping of str to str or bytes, got {type(inputs).__name__}"
        )
    return dict(inputs)


def get_or_build(
    inputs: Mapping[str, str | bytes], build: Callable[[pathlib.Path], None]
) -> pathlib.Path:
    """Returns the directory of the entry for ``inputs``, building it first if needed.

    ``build`` receives an empty private directory and fills it with the artifacts. If it
    raises, the exception propagates unchanged and nothing is published. Text and bytes are
    hashed as their bytes (``"abc"`` and ``b"abc"`` are the same input). Other processes never
    evict an entry this process has received recently.
    """
    from triton_npu._loader import native

    return native().cache_get_or_build(_inputs(inputs), build)


def cache_dir() -> pathlib.Path:
    """The cache directory of the current configuration (created if missing)."""
    from triton_npu._loader import native

    return native().cache_dir()


def key(inputs: Mapping[str, str | bytes]) -> str:
    """The 64-hex-digit key ``get_or_build`` uses for ``inputs``."""
    from triton_npu._loader import native

    return native().cache_key(_inputs(inputs))
