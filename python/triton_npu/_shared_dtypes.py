"""Element types and shapes of :mod:`triton_npu.shared` buffers: what Triton can name, as
torch dtypes, numpy dtypes or names, and torch's two spellings of a shape."""

from __future__ import annotations

import functools
import operator
import sys
from typing import Any

import numpy as np

from triton_npu._shared_devices import SharedBufferError

NUMPY_TYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)
# Names Triton maps to its types, which numpy lacks and ml_dtypes provides.
ML_TYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}

# ---------------------------------------------------------------------------------------------
# Element types


def resolve_dtype(dtype: Any) -> np.dtype:
    """A numpy dtype Triton can name, from a numpy dtype or type, a name (``"float32"``,
    ``"bf16"``), or anything whose ``str()`` ends in a supported name (``torch.float32``), as
    Triton's own mapping reads it. TypeError otherwise."""
    resolved: np.dtype | None = None
    if not isinstance(dtype, str):
        try:
            resolved = np.dtype(dtype)
        except TypeError:
            resolved = None
    if resolved is None:
        name = str(dtype).split(".")[-1]
        name = _ALIASES.get(name, name)
        if name in ML_TYPES:
            resolved = _ml_dtype(name)
        else:
            try:
                resolved = np.dtype(name)
            except TypeError:
                raise TypeError(_unsupported(dtype)) from None
    if not resolved.isnative:
        raise TypeError(
            f"dtype {resolved.str!r} is not in this machine's byte order; the NPU reads native "
            "byte order: convert with array.astype(array.dtype.newbyteorder('='))"
        )
    if str(resolved) not in NUMPY_TYPES and str(resolved) not in ML_TYPES:
        raise TypeError(_unsupported(dtype))
    return resolved


def _ml_dtype(name: str) -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError(
            f"numpy has no {name} type; install the ml-dtypes package (pip install ml-dtypes), "
            f"whose numpy {name} Triton understands, or pass torch tensors"
        ) from None
    return np.dtype(getattr(ml_dtypes, name))


def _unsupported(dtype: Any) -> str:
    return (
        f"dtype {dtype!r} has no Triton element type; supported: {', '.join(NUMPY_TYPES)}, "
        f"and with ml-dtypes installed {', '.join(ML_TYPES)}"
    )


@functools.lru_cache(maxsize=1)
def torch_module() -> Any:
    """torch, or None when it is not installed (imported on first need, once)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def require_torch(what: str) -> Any:
    torch = torch_module()
    if torch is None:
        raise SharedBufferError(f"{what} needs torch, which is not installed (pip install torch)")
    return torch


def is_torch_dtype(dtype: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(dtype, torch.dtype)


def element_type(dtype: Any) -> tuple[np.dtype, Any]:
    """``(numpy dtype, what .dtype reports)`` for a requested dtype (None: torch's default
    when torch is installed, else float32)."""
    if dtype is None:
        torch = torch_module()
        dtype = np.float32 if torch is None else torch.get_default_dtype()
    try:
        resolved = resolve_dtype(dtype)
    except TypeError as e:
        raise SharedBufferError(str(e)) from None
    return resolved, dtype if is_torch_dtype(dtype) else resolved


def torch_dtype(array: np.ndarray) -> Any:
    """The torch dtype of `array`'s elements, or None when torch.from_numpy reads them."""
    name = array.dtype.name
    return getattr(require_torch("a torch view"), name) if name in ML_TYPES else None


# ---------------------------------------------------------------------------------------------
# Shapes


def shape_of(shape: Any) -> tuple[int, ...]:
    """A shape as ints; SharedBufferError for a non-integer (saying where a dtype goes when
    one was passed positionally, as this module's former ``empty(n, dtype)`` took it)."""
    if isinstance(shape, np.ndarray):
        raise SharedBufferError(
            "SharedBuffer(shape, dtype, device) allocates new memory; to wrap an existing "
            "numpy array use shared.from_numpy(array)"
        )
    try:
        items = tuple(shape)
    except TypeError:
        items = (shape,)
    out = []
    for d in items:
        try:
            out.append(operator.index(d))
        except TypeError:
            hint = ""
            if isinstance(d, (str, type, np.dtype)) or is_torch_dtype(d):
                hint = f"; pass the element type as a keyword: dtype={d!r}"
            raise SharedBufferError(f"shape {items} has a non-integer dimension{hint}") from None
    if any(d < 0 for d in out):
        raise SharedBufferError(f"shape {tuple(out)} has a negative dimension")
    return tuple(out)


def size_of(size: tuple[Any, ...]) -> tuple[int, ...]:
    """``f(128, 768)`` or ``f((128, 768))``, as torch takes both."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return shape_of(size[0])
    return shape_of(size)
