"""Triton backend for AMD XDNA NPUs (Ryzen AI), with its driver layer in Rust.

Importing this package is cheap and never loads the native module or an NPU runtime: Triton
imports the backend at ``import triton``, and nothing here may break that.
"""

from __future__ import annotations

# `typing` is not imported at run time: the `triton-npu` command imports this package, and
# it must start in milliseconds.
TYPE_CHECKING = False

__all__ = ["NPUDriver", "__version__"]

if TYPE_CHECKING:
    from triton_npu.backend.driver import NPUDriver


def __getattr__(name: str) -> object:
    if name == "NPUDriver":
        from triton_npu.backend.driver import NPUDriver

        return NPUDriver
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("triton-npu")
        except PackageNotFoundError:
            return "0+unknown"
    raise AttributeError(f"module 'triton_npu' has no attribute {name!r}")
