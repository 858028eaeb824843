"""Buffers for NPU kernels without torch (upstream's ``triton_npu.shared``).

Triton passes an argument to a kernel as a buffer when it has ``data_ptr()`` and a ``dtype``;
numpy arrays have neither, so this module wraps memory in a :class:`SharedBuffer`:

* :func:`from_numpy` shares an existing C-contiguous array's memory (no copy). Launches copy
  it through the runtime's staging memory, as they do for torch tensors.
* :func:`empty`, :func:`zeros`, :func:`ones`, :func:`full` and the ``*_like`` variants
  allocate memory from the NPU runtime that the device reads and writes in place (an HSA
  shared region, an XRT buffer object), so launches skip the copies. When the runtime cannot
  be opened (not installed, no device) or in compile-only mode, they allocate ordinary host
  memory instead, so compile-only users and machines without an NPU still work; the reason
  is logged at debug level on the ``triton_npu.shared`` logger, and a runtime that cannot be
  opened is not asked again in this process.

:meth:`SharedBuffer.numpy` is a numpy view of the same memory. The memory stays alive while
the buffer or any view of it does.

Which arguments were passed in place: under HSA, any argument lying inside a shared buffer;
under XRT, an argument that is exactly one shared buffer (the whole allocation). Everything
else is staged, with the same results. :func:`dispatch_counts` tells which happened.

Element types: every numpy type Triton has a name for — ``bool``, ``int8/16/32/64``,
``uint8/16/32/64``, ``float16/32/64``. numpy has no ``bfloat16`` (nor float8): with the
``ml-dtypes`` package installed, ``"bfloat16"`` and its float8 types (``float8_e4m3fn``,
``float8_e5m2``, ``float8_e4m3fnuz``, ``float8_e5m2fnuz``) work too; without it they raise a
``TypeError`` that says so.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

from triton_npu._loader import native
from triton_npu.config import resolve_runtime
from triton_npu.errors import DeviceError, NPUInputError, RuntimeNotFoundError

__all__ = [
    "SharedBuffer",
    "dispatch_counts",
    "empty",
    "empty_like",
    "from_numpy",
    "full",
    "ones",
    "zeros",
    "zeros_like",
]

_logger = logging.getLogger(__name__)

_NUMPY_TYPES = (
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
_ML_TYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}

# Runtimes this process could not open, with the reason: asked once, not at every allocation.
_unavailable: dict[str, str] = {}


def _resolve_dtype(dtype: Any) -> np.dtype:
    """A numpy dtype Triton can name, from a numpy dtype or type, a name (``"float32"``,
    ``"bf16"``), or anything whose ``str()`` ends in a supported name (``torch.float32``), as
    Triton's own mapping reads it."""
    resolved: np.dtype | None = None
    if not isinstance(dtype, str):
        try:
            resolved = np.dtype(dtype)
        except TypeError:
            resolved = None
    if resolved is None:
        name = str(dtype).split(".")[-1]
        name = _ALIASES.get(name, name)
        if name in _ML_TYPES:
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
    if str(resolved) not in _NUMPY_TYPES and str(resolved) not in _ML_TYPES:
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
        f"dtype {dtype!r} has no Triton element type; supported: {', '.join(_NUMPY_TYPES)}, "
        f"and with ml-dtypes installed {', '.join(_ML_TYPES)}"
    )


def _resolve_shape(shape: int | Iterable[int]) -> tuple[int, ...]:
    try:
        dims = (operator.index(shape),) if not isinstance(shape, Iterable) else shape
        out = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"shape {out} has a negative dimension")
    return out


def _allocation_of(array: np.ndarray) -> Any:
    """The runtime allocation `array` views, if any (numpy keeps it at the end of `base`)."""
    owner: Any = array
    while isinstance(owner, np.ndarray):
        owner = owner.base
    return owner if isinstance(owner, native().SharedAllocation) else None


class SharedBuffer:
    """A C-contiguous block of typed memory that Triton passes to NPU kernels as a pointer.

    Made by :func:`from_numpy`, :func:`empty`, :func:`zeros` and friends, not directly.
    ``data_ptr()``, ``dtype`` (a numpy dtype), ``shape`` and ``is_contiguous()`` are what
    Triton and the launcher read; :meth:`numpy` views the same memory.
    """

    __slots__ = ("_array", "_owner", "_owner_nbytes", "_ptr", "_runtime")

    def __init__(self, array: np.ndarray) -> None:
        if not isinstance(array, np.ndarray):
            raise TypeError(f"SharedBuffer wraps a numpy array, got {type(array).__name__}")
        if not array.flags.c_contiguous:
            raise ValueError("SharedBuffer needs a C-contiguous array")
        _resolve_dtype(array.dtype)
        self._array = array
        self._ptr = int(array.__array_interface__["data"][0])
        # The array that owns the memory (the end of the chain of views): numpy frees or moves
        # its memory only when it is resized (``resize(..., refcheck=False)``), which changes
        # its size; a buffer whose owner changed size is dangling (see `_live`).
        owner = array
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        self._owner = owner
        self._owner_nbytes = owner.nbytes
        allocation = _allocation_of(array)
        self._runtime = None if allocation is None else allocation.runtime

    def _live(self) -> np.ndarray:
        """The array, after checking that its memory is still where the buffer was made."""
        if self._owner.nbytes != self._owner_nbytes:
            raise NPUInputError(
                f"this SharedBuffer is dangling: the numpy array that owns its memory was "
                f"resized ({self._owner_nbytes} → {self._owner.nbytes} bytes, e.g. by "
                "resize(..., refcheck=False)), which moved or freed the memory the buffer "
                "points to; make a new SharedBuffer from the resized array"
            )
        return self._array

    def data_ptr(self) -> int:
        """The address of the first element; a buffer whose memory was moved or freed (its
        array resized) raises :class:`~triton_npu.errors.NPUInputError`."""
        self._live()
        return self._ptr

    @property
    def flags(self) -> Any:
        """The numpy flags of the memory; launches refuse an output that is not
        ``flags.writeable``."""
        return self._live().flags

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def size(self) -> int:
        """The number of elements."""
        return self._array.size

    @property
    def nbytes(self) -> int:
        return self._array.nbytes

    @property
    def runtime(self) -> str | None:
        """``"hsa"`` or ``"xrt"`` for memory the runtime allocated, ``None`` for host memory."""
        return self._runtime

    @property
    def device(self) -> str:
        """``"hsa:0"`` / ``"xrt:0"`` for runtime memory (upstream's device names), else
        ``"cpu"``."""
        return "cpu" if self._runtime is None else f"{self._runtime}:0"

    def is_contiguous(self) -> bool:
        return True

    def numpy(self) -> np.ndarray:
        """A numpy view of the same memory; it keeps the memory alive."""
        return self._live().view()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        self._live()
        if copy:
            return self._array.astype(dtype or self._array.dtype, copy=True)
        if dtype is not None and np.dtype(dtype) != self._array.dtype:
            if copy is False:
                raise ValueError(
                    f"a {self._array.dtype} SharedBuffer cannot be viewed as {np.dtype(dtype)} "
                    "without a copy"
                )
            return self._array.astype(dtype)
        return self._array.view()

    def __len__(self) -> int:
        if not self._array.shape:
            raise TypeError("len() of a 0-d SharedBuffer")
        return self._array.shape[0]

    def __repr__(self) -> str:
        return f"SharedBuffer(shape={self.shape}, dtype={self.dtype}, device={self.device!r})"


def from_numpy(array: np.ndarray) -> SharedBuffer:
    """Shares `array`'s memory (no copy): kernels read and write the array itself. The buffer
    keeps the array alive. The array must be C-contiguous, writable, in native byte order and
    of a type Triton can name."""
    if not isinstance(array, np.ndarray):
        raise TypeError(
            f"from_numpy takes a numpy array, got {type(array).__name__}; "
            "convert with np.asarray(x) first"
        )
    if not array.flags.c_contiguous:
        raise ValueError(
            "from_numpy needs a C-contiguous array (the NPU reads elements × item size bytes "
            "from its start); pass np.ascontiguousarray(array), which copies"
        )
    if not array.flags.writeable:
        raise ValueError(
            "from_numpy needs a writable array (kernels may write their arguments); "
            "pass array.copy()"
        )
    return SharedBuffer(array)


def _device_array(shape: tuple[int, ...], dtype: np.dtype, runtime: str) -> np.ndarray | None:
    """An array over memory from `runtime`, or None (with the reason logged) when there is
    none to have."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0:
        _logger.debug("zero-size buffer %s %s: host memory (the runtime has none)", shape, dtype)
        return None
    from triton_npu.config import npu_config

    if npu_config.compile_only:
        _logger.debug("compile-only mode: buffer %s %s in host memory", shape, dtype)
        return None
    reason = _unavailable.get(runtime)
    if reason is None:
        from triton_npu._host import facts

        try:
            allocation = native().shared_alloc(nbytes, runtime, facts())
        except (RuntimeNotFoundError, DeviceError) as e:
            reason = _unavailable[runtime] = str(e)
            _logger.debug("the %s runtime cannot be opened: %s", runtime, reason)
        else:
            return np.asarray(allocation).view(dtype).reshape(shape)
    _logger.debug(
        "buffer %s %s in host memory: the %s runtime is unavailable", shape, dtype, runtime
    )
    return None


def _allocate(shape: Any, dtype: Any, runtime: str | None, fill: Any) -> SharedBuffer:
    dims = _resolve_shape(shape)
    dt = _resolve_dtype("float32" if dtype is None else dtype)
    array = _device_array(dims, dt, resolve_runtime(runtime))
    if array is None:
        array = np.empty(dims, dt) if fill is None else np.full(dims, fill, dt)
    elif fill is not None:
        array[...] = fill
    return SharedBuffer(array)


def empty(
    shape: int | Iterable[int], dtype: Any = "float32", runtime: str | None = None
) -> SharedBuffer:
    """An uninitialised buffer, in memory the `runtime` (default ``npu_config.runtime``)
    passes to kernels in place when it can be opened, else in host memory."""
    return _allocate(shape, dtype, runtime, None)


def zeros(
    shape: int | Iterable[int], dtype: Any = "float32", runtime: str | None = None
) -> SharedBuffer:
    """Like :func:`empty`, filled with zeros."""
    return _allocate(shape, dtype, runtime, 0)


def ones(
    shape: int | Iterable[int], dtype: Any = "float32", runtime: str | None = None
) -> SharedBuffer:
    """Like :func:`empty`, filled with ones."""
    return _allocate(shape, dtype, runtime, 1)


def full(
    shape: int | Iterable[int],
    fill_value: Any,
    dtype: Any = "float32",
    runtime: str | None = None,
) -> SharedBuffer:
    """Like :func:`empty`, filled with `fill_value` (converted to `dtype`)."""
    return _allocate(shape, dtype, runtime, fill_value)


def _like(other: Any, dtype: Any, runtime: str | None) -> tuple[Any, Any, str | None]:
    try:
        shape, other_dtype = tuple(other.shape), other.dtype
    except AttributeError:
        raise TypeError(
            f"expected an array-like with shape and dtype, got {type(other).__name__}"
        ) from None
    if runtime is None and isinstance(other, SharedBuffer):
        runtime = other.runtime
    return shape, other_dtype if dtype is None else dtype, runtime


def empty_like(other: Any, dtype: Any = None, runtime: str | None = None) -> SharedBuffer:
    """:func:`empty` with `other`'s shape and dtype (a SharedBuffer, numpy array or tensor);
    the runtime defaults to `other`'s when it is runtime memory."""
    return empty(*_like(other, dtype, runtime))


def zeros_like(other: Any, dtype: Any = None, runtime: str | None = None) -> SharedBuffer:
    """:func:`zeros` with `other`'s shape and dtype; see :func:`empty_like`."""
    return zeros(*_like(other, dtype, runtime))


def dispatch_counts() -> tuple[int, int]:
    """``(in_place, staged)``: how many buffer arguments of this process's kernel launches the
    runtime passed in place and how many it copied through staging memory (upstream's
    ``hsa_dispatch_counts``, here for both runtimes)."""
    return tuple(native().dispatch_counts())
