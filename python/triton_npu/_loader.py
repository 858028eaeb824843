"""Lazy access to the native module, with an error that says what to do when it is broken."""

from __future__ import annotations

import functools
from types import ModuleType


class NativeModuleError(ImportError):
    """The compiled part of triton-npu (``triton_npu._native``) cannot be imported."""


@functools.cache
def native() -> ModuleType:
    try:
        from triton_npu import _native
    except ImportError as e:
        raise NativeModuleError(
            f"triton-npu's native module triton_npu._native cannot be imported ({e}); "
            "reinstall the package (pip install --force-reinstall triton-npu) or, in a source "
            "checkout, run `make develop`"
        ) from e
    _native.init_logging()
    return _native
