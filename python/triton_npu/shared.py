"""Buffers the NPU reads and writes in place (upstream's ``amd_triton_npu.shared``).

Allocate through the torch-shaped factories, naming the NPU runtime that owns the memory::

    from triton.backends.amd_triton_npu import shared   # or: from triton_npu import shared

    with shared.zeros(128, 768, dtype=torch.float32, device="xrt:0") as c:
        kernel[grid](a, b, c, ...)                         # passed to the NPU in place
        chain.run(..., bound_buffers={4: c.bo})            # XRT: a chain's bound buffer

Factories (upstream's signatures): ``empty``, ``zeros``, ``ones``, ``full``, ``rand``,
``randn``, ``arange``, ``empty_like``, ``zeros_like``, ``ones_like``, ``full_like``,
``from_tensor``, and ``SharedBuffer(shape, dtype, device, share=())``. ``device`` is required
(which runtime owns the pages decides how they are allocated); ``share`` names further
devices to map the pages into. Devices: ``"xrt:0"`` (an XRT buffer object) and ``"hsa:0"``
(an HSA shared region of the AIE agent); see :mod:`triton_npu._shared_devices` for the
grammar. ``hip:N`` (``cuda``/``rocm``) parses, but this package has no GPU runtime, so
mapping a buffer into one raises :class:`SharedBufferError`; so do XRT and HSA together,
device indices other than 0, and any device the runtime cannot open (no fallback to host
memory: the attempt is the check, and the error carries the cause).

A buffer behaves as the CPU torch tensor over its memory (``buf + 1``, ``buf.sum()``,
``torch.add(a, b, out=buf)``, ``buf[:4]``); ``torch()`` is that tensor, ``numpy()`` the numpy
array, and ``torch.from_dlpack(buf)`` / ``np.from_dlpack(buf)`` share the memory. Without
torch installed the same operations act on the numpy array. ``.bo`` (XRT) is the buffer
object a chain's ``bound_buffers`` takes; ``aie_ptr()`` (HSA) is the region's address.

Buffers are a resource: ``close()`` (or ``with``) gives the memory to a pool that serves the
next request of the same size and device without asking the runtime (``empty_cache``,
``set_cache_enabled``, ``cache_stats``). Memory something still views (a numpy array, a
tensor, a DLPack consumer) is never pooled; it is freed when the last view goes.

:func:`from_numpy` (ours) wraps an existing array without copying; launches stage it.
:func:`hsa_dispatch_counts` tells how HSA launches passed their buffers, ``(in_place,
staged)``; :func:`dispatch_counts` the same over both runtimes.

Element types: ``bool``, ``int8/16/32/64``, ``uint8/16/32/64``, ``float16/32/64``, given as
torch dtypes, numpy dtypes or names; with the ``ml-dtypes`` package also ``bfloat16`` and the
float8 types. ``dtype`` reports a torch dtype when one was asked for (or torch's default when
none was and torch is installed), else a numpy dtype.
"""

from __future__ import annotations

import atexit
import functools
import math
import operator
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from triton_npu import _shared_devices as devices_
from triton_npu._loader import native
from triton_npu._shared_devices import SharedBufferError
from triton_npu._shared_pool import Pool
from triton_npu.errors import DeviceError, NPUInputError, RuntimeNotFoundError

__all__ = [
    "BufferObject",
    "SharedBuffer",
    "SharedBufferError",
    "arange",
    "as_torch",
    "cache_stats",
    "dispatch_counts",
    "dlpack_device",
    "empty",
    "empty_cache",
    "empty_like",
    "from_numpy",
    "from_tensor",
    "full",
    "full_like",
    "hsa_dispatch_counts",
    "is_on_device",
    "ones",
    "ones_like",
    "rand",
    "randn",
    "set_cache_enabled",
    "zeros",
    "zeros_like",
]

# DLPack device types, as the DLPack specification numbers them.
kDLCPU = 1
kDLCUDA = 2
kDLROCM = 10

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

_POOL = Pool()


# ---------------------------------------------------------------------------------------------
# Element types


def _resolve_dtype(dtype: Any) -> np.dtype:
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


@functools.lru_cache(maxsize=1)
def _torch_module() -> Any:
    """torch, or None when it is not installed (imported on first need, once)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _require_torch(what: str) -> Any:
    torch = _torch_module()
    if torch is None:
        raise SharedBufferError(f"{what} needs torch, which is not installed (pip install torch)")
    return torch


def _is_torch_dtype(dtype: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(dtype, torch.dtype)


def _element_type(dtype: Any) -> tuple[np.dtype, Any]:
    """``(numpy dtype, what .dtype reports)`` for a requested dtype (None: torch's default
    when torch is installed, else float32)."""
    if dtype is None:
        torch = _torch_module()
        dtype = np.float32 if torch is None else torch.get_default_dtype()
    try:
        resolved = _resolve_dtype(dtype)
    except TypeError as e:
        raise SharedBufferError(str(e)) from None
    return resolved, dtype if _is_torch_dtype(dtype) else resolved


def _torch_dtype(array: np.ndarray) -> Any:
    """The torch dtype of `array`'s elements, or None when torch.from_numpy reads them."""
    name = array.dtype.name
    return getattr(_require_torch("a torch view"), name) if name in _ML_TYPES else None


# ---------------------------------------------------------------------------------------------
# Shapes


def _dims(shape: Any) -> tuple[int, ...]:
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
    dims = []
    for d in items:
        try:
            dims.append(operator.index(d))
        except TypeError:
            hint = ""
            if isinstance(d, (str, type, np.dtype)) or _is_torch_dtype(d):
                hint = f"; pass the element type as a keyword: dtype={d!r}"
            raise SharedBufferError(f"shape {items} has a non-integer dimension{hint}") from None
    if any(d < 0 for d in dims):
        raise SharedBufferError(f"shape {tuple(dims)} has a negative dimension")
    return tuple(dims)


def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
    """``f(128, 768)`` or ``f((128, 768))``, as torch takes both."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return _dims(size[0])
    return _dims(size)


# ---------------------------------------------------------------------------------------------
# Runtime memory


def _runtime_memory_of(array: np.ndarray) -> devices_.DeviceKey | None:
    """The device whose runtime allocated `array`'s memory (numpy keeps the allocation at the
    end of its chain of bases), or None for host memory."""
    owner: Any = array
    while isinstance(owner, np.ndarray):
        owner = owner.base
    if isinstance(owner, native().SharedAllocation):
        return owner.runtime.upper(), 0
    return None


def _allocate(nbytes: int, key: devices_.DeviceKey) -> np.ndarray:
    """A flat uint8 array over `nbytes` of `key`'s runtime memory (from the pool when one of
    that size was given back)."""
    pool_key = (nbytes, key)
    pages = _POOL.take(pool_key)
    if pages is not None:
        return pages
    from triton_npu._host import facts

    runtime = key[0].lower()
    try:
        allocation = native().shared_alloc(nbytes, runtime, facts())
    except (RuntimeNotFoundError, DeviceError, RuntimeError) as e:
        raise SharedBufferError(
            f"cannot allocate {nbytes} bytes on {devices_.spec(key)}: {e}"
        ) from None
    return np.asarray(allocation)


class BufferObject:
    """The XRT buffer object of a buffer on ``xrt:0`` (upstream hands out a ``pyxrt`` bo):
    what a chain's ``bound_buffers`` takes to use the buffer in place of its own. ``map()`` is
    a writable memoryview of its bytes, ``size()`` their count. It keeps the memory alive."""

    __slots__ = ("_bytes",)

    def __init__(self, pages: np.ndarray) -> None:
        self._bytes = pages

    def map(self) -> memoryview:
        return memoryview(self._bytes)

    def size(self) -> int:
        return int(self._bytes.nbytes)

    def numpy(self) -> np.ndarray:
        """The bytes as a flat uint8 numpy array (what launches read)."""
        return self._bytes

    def __repr__(self) -> str:
        return f"BufferObject(xrt:0, {self.size()} bytes)"


# ---------------------------------------------------------------------------------------------
# The buffer


class SharedBuffer:
    """A C-contiguous block of typed memory that Triton passes to NPU kernels as a pointer.

    ``SharedBuffer(shape, dtype, device, share=())`` allocates on `device` (``"xrt:0"`` or
    ``"hsa:0"``) and maps into every device of `share`; the factories are the usual way.
    ``data_ptr()``, ``dtype``, ``shape`` and ``is_contiguous()`` are what Triton reads.
    """

    __slots__ = (
        "__weakref__",
        "_array",
        "_base",
        "_dtype",
        "_key",
        "_owner",
        "_owner_nbytes",
        "_ptr",
        "_torch_view",
    )

    def __init__(self, shape: Any, dtype: Any, device: Any, share: Any = ()) -> None:
        self._array: np.ndarray | None = None  # closed until everything below succeeded
        self._base: np.ndarray | None = None
        self._torch_view: weakref.ref | None = None
        dims = _dims(shape)
        np_dtype, reported = _element_type(dtype)
        count = math.prod(dims)
        if count == 0:
            raise SharedBufferError(
                f"shape {dims} holds no elements; there is nothing for a device to map"
            )
        nbytes = count * np_dtype.itemsize
        if nbytes >= 1 << 64:
            raise SharedBufferError(
                f"shape {dims} of {np_dtype} needs {nbytes} bytes, more than a device can map"
            )
        primary = devices_.parse(device)
        wanted = [primary, *(k for k in devices_.parse_all(share) if k != primary)]
        devices_.refuse_mix(wanted)
        for key in wanted:
            devices_.refuse_unreachable(key)
        base = _allocate(nbytes, primary)
        self._adopt(base[:nbytes].view(np_dtype).reshape(dims), reported, primary, base)

    @classmethod
    def _over(cls, array: np.ndarray) -> SharedBuffer:
        """A buffer over an existing host array (no runtime memory); see :func:`from_numpy`."""
        buf = cls.__new__(cls)
        buf._torch_view = None
        buf._adopt(array, array.dtype, _runtime_memory_of(array), None)
        return buf

    def _adopt(self, array: np.ndarray, reported: Any, key: Any, base: np.ndarray | None) -> None:
        self._array = array
        self._dtype = reported
        self._key = key
        self._base = base
        self._ptr = int(array.__array_interface__["data"][0])
        # The array that owns the memory (the end of the chain of views): numpy frees or
        # moves its memory only when it is resized, which changes its size; a buffer whose
        # owner changed size is dangling (see `_live`).
        owner = array
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        self._owner = owner
        self._owner_nbytes = owner.nbytes

    def _live(self) -> np.ndarray:
        """The array, after checking that the buffer is open and its memory still where the
        buffer was made."""
        array = self._array
        if array is None:
            raise SharedBufferError("buffer is closed")
        if self._owner.nbytes != self._owner_nbytes:
            raise NPUInputError(
                f"this SharedBuffer is dangling: the numpy array that owns its memory was "
                f"resized ({self._owner_nbytes} → {self._owner.nbytes} bytes, e.g. by "
                "resize(..., refcheck=False)), which moved or freed the memory the buffer "
                "points to; make a new SharedBuffer from the resized array"
            )
        return array

    # -- what Triton and launches read -------------------------------------------------------

    def data_ptr(self) -> int:
        """The address of the first element."""
        self._live()
        return self._ptr

    @property
    def dtype(self) -> Any:
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._live().shape

    @property
    def ndim(self) -> int:
        return self._live().ndim

    @property
    def nbytes(self) -> int:
        return self._live().nbytes

    @property
    def flags(self) -> Any:
        """The numpy flags of the memory; launches refuse an output that is not
        ``flags.writeable``."""
        return self._live().flags

    def is_contiguous(self) -> bool:
        return True

    def numel(self) -> int:
        return self._live().size

    def element_size(self) -> int:
        return self._live().itemsize

    def size(self, dim: int | None = None) -> Any:
        """The shape (torch's ``size()``), or one dimension of it."""
        shape = self.shape
        return shape if dim is None else shape[dim]

    # -- devices -------------------------------------------------------------------------------

    @property
    def runtime(self) -> str | None:
        """``"hsa"`` or ``"xrt"`` for runtime memory, ``None`` for host memory."""
        return None if self._key is None else self._key[0].lower()

    @property
    def device(self) -> str:
        """The device that owns the memory (``"xrt:0"``, ``"hsa:0"``; ``"cpu"`` for a
        :func:`from_numpy` buffer), as a spec the factories take back."""
        self._live()
        return "cpu" if self._key is None else devices_.spec(self._key)

    @property
    def devices(self) -> tuple[str, ...]:
        """Every device the buffer is mapped into, owner first; ``()`` once closed."""
        return () if self._array is None else (self.device,)

    def share_with(self, device: Any) -> SharedBuffer:
        """Maps the buffer into another device; returns ``self``. Sharing with a device it is
        on already does nothing; a device this package cannot map into raises."""
        self._live()
        key = devices_.parse(device)
        if key == self._key:
            return self
        if self._key is not None:
            devices_.refuse_mix([self._key, key])
        devices_.refuse_unreachable(key)
        raise SharedBufferError(
            f"{devices_.spec(key)} cannot map host memory that no runtime allocated; make "
            f"the buffer there with shared.empty(..., device={devices_.spec(key)!r})"
        )

    def is_shared_with(self, device: Any) -> bool:
        """Whether the buffer is mapped into `device` (its owner counts); a malformed spec or
        unknown kind raises rather than answering ``False``."""
        key = devices_.parse(device)
        return self._array is not None and key == self._key

    @property
    def host_ptr(self) -> int | None:
        """The memory's address in this process; ``None`` once closed."""
        return None if self._array is None else self._ptr

    def _require_kind(self, kind: str) -> None:
        self._live()
        if self._key is None or self._key[0] != kind:
            on = "nothing" if self._key is None else self._key[0]
            raise SharedBufferError(
                f"buffer is not shared with any {kind} device (shared with: {on})"
            )

    @property
    def bo(self) -> BufferObject:
        """The XRT buffer object (``xrt:0`` buffers): pass it in a chain's ``bound_buffers``.
        Under HSA a launch takes the buffer itself; its address there is :meth:`aie_ptr`."""
        self._require_kind("XRT")
        if self._base is None:
            raise SharedBufferError(
                "this buffer views part of another XRT buffer (made by from_numpy); .bo is a "
                "whole buffer object: use the buffer the memory was allocated as"
            )
        return BufferObject(self._base[: self._live().nbytes])

    def aie_ptr(self) -> int:
        """The AIE agent's address of an ``hsa:0`` buffer (the shared region is mapped at the
        same address for the CPU and the agent)."""
        self._require_kind("HSA")
        return self._ptr

    def device_ptr(self) -> int:
        """The iGPU's address of the memory: no buffer here is mapped into a GPU (this package
        has no GPU runtime), so this raises :class:`SharedBufferError`."""
        on = "nothing" if self._key is None else self._key[0]
        self._live()
        raise SharedBufferError(f"buffer is not shared with any HIP device (shared with: {on})")

    # -- views ---------------------------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """A numpy view of the same memory; it keeps the memory alive."""
        return self._live().view()

    def torch(self) -> Any:
        """The CPU torch tensor over the same memory (cached while someone holds it)."""
        cached = None if self._torch_view is None else self._torch_view()
        if cached is None:
            torch = _require_torch("a torch view")
            array = self._live()
            as_type = _torch_dtype(array)
            if as_type is None:
                cached = torch.from_numpy(array)
            else:
                carrier = np.dtype(f"u{array.itemsize}")
                cached = torch.from_numpy(array.view(carrier)).view(as_type)
            self._torch_view = weakref.ref(cached)
        return cached

    def _view(self) -> Any:
        """What tensor-like operations act on: the torch view, or numpy without torch."""
        return self._live() if _torch_module() is None else self.torch()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self._live()
        if copy:
            return array.astype(dtype or array.dtype, copy=True)
        if dtype is not None and np.dtype(dtype) != array.dtype:
            if copy is False:
                raise ValueError(
                    f"a {array.dtype} SharedBuffer cannot be viewed as {np.dtype(dtype)} "
                    "without a copy"
                )
            return array.astype(dtype)
        return array.view()

    def __dlpack_device__(self) -> tuple[int, int]:
        """Host memory: ``(kDLCPU, 0)`` (no buffer here is mapped into a GPU)."""
        self._live()
        return (kDLCPU, 0)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule over the memory, never a copy (torch's when torch is installed,
        numpy's otherwise). ``copy=True`` and a device other than the CPU raise BufferError."""
        self._live()
        if copy:
            raise BufferError("a SharedBuffer is exported without copying; copy=True refused")
        if dl_device is not None and tuple(dl_device) != (kDLCPU, 0):
            raise BufferError(
                f"a SharedBuffer is host memory (kDLCPU, 0); cannot export it to {dl_device}"
            )
        source = self._view()
        try:
            return source.__dlpack__(stream=stream, max_version=max_version)
        except BufferError as e:
            raise BufferError(
                f"{e} ({self._live().dtype} buffers export through torch; install torch)"
            ) from None

    # -- behaving like a tensor ----------------------------------------------------------------

    @classmethod
    def __torch_function__(
        cls, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        """torch functions take buffers wherever they take tensors (``out=buf`` included):
        each buffer is replaced by its torch view."""

        def unwrap(value: Any) -> Any:
            if isinstance(value, SharedBuffer):
                return value.torch()
            if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
                return type(value)(unwrap(v) for v in value)
            return value

        return func(*unwrap(tuple(args)), **{k: unwrap(v) for k, v in (kwargs or {}).items()})

    def __getattr__(self, name: str) -> Any:
        """Any other name a torch tensor has, from the torch view; in-place methods
        (``fill_``) return the buffer."""
        torch = None if name.startswith("_") else _torch_module()
        if torch is None or name not in _tensor_names():
            raise AttributeError(f"'SharedBuffer' object has no attribute {name!r}")
        attribute = getattr(self.torch(), name)
        if name.endswith("_") and callable(attribute):
            return _returning(self, attribute)
        return attribute

    def __getitem__(self, index: Any) -> Any:
        return self._view()[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        self._view()[index] = value

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d SharedBuffer")
        return shape[0]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._view())

    def __bool__(self) -> bool:
        return bool(self._view())

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        if self._array is None:
            return "SharedBuffer(closed)"
        dtype = self._dtype
        return (
            f"SharedBuffer(shape={self.shape}, dtype={dtype}, devices=[{', '.join(self.devices)}])"
        )

    # -- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        """Gives up the memory; idempotent. Runtime memory nothing else views goes to the pool
        for the next buffer of its size and device; memory still viewed stays with its views
        and is freed with the last of them."""
        if self._array is None:
            return
        nbytes = self._array.nbytes
        self._array = None
        self._torch_view = None
        self._owner = None  # for runtime memory, `base` itself
        base, self._base = self._base, None
        # Every view of the pages (numpy arrays, torch tensors, DLPack capsules, buffer
        # objects) holds `base`: the local name and getrefcount's argument are the only two
        # references when nothing else still reaches the memory.
        if base is not None and sys.getrefcount(base) == 2:
            _POOL.give_back((nbytes, self._key), base)

    def __enter__(self) -> SharedBuffer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter teardown: nothing useful to report
            pass


@functools.lru_cache(maxsize=1)
def _tensor_names() -> frozenset[str]:
    return frozenset(dir(_torch_module().Tensor))


def _returning(buffer: SharedBuffer, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def in_place(*args: Any, **kwargs: Any) -> SharedBuffer:
        method(*args, **kwargs)
        return buffer

    return in_place


# Operators: Python looks them up on the type, never through __getattr__.
_BINARY = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
    "and", "or", "xor", "lshift", "rshift",
)  # fmt: skip
_ONE_SIDED = ("neg", "pos", "abs", "invert", "lt", "le", "gt", "ge", "eq", "ne")


def _operator(name: str, in_place: bool = False) -> Callable[..., Any]:
    def apply(self: SharedBuffer, *args: Any) -> Any:
        method = getattr(self._view(), name, None)
        result = NotImplemented if method is None else method(*args)
        if result is NotImplemented or not in_place:
            return result
        return self

    apply.__name__ = name
    return apply


for _op in _BINARY:
    setattr(SharedBuffer, f"__{_op}__", _operator(f"__{_op}__"))
    setattr(SharedBuffer, f"__r{_op}__", _operator(f"__r{_op}__"))
    setattr(SharedBuffer, f"__i{_op}__", _operator(f"__i{_op}__", in_place=True))
for _op in _ONE_SIDED:
    setattr(SharedBuffer, f"__{_op}__", _operator(f"__{_op}__"))
del _op


# ---------------------------------------------------------------------------------------------
# Factories (upstream's signatures)


def empty(*size: Any, dtype: Any = None, device: Any, share: Any = ()) -> SharedBuffer:
    """An uninitialised buffer of `size` (``empty(2, 3)`` or ``empty((2, 3))``) on `device`."""
    return SharedBuffer(_size(size), dtype, device, share)


def zeros(*size: Any, dtype: Any = None, device: Any, share: Any = ()) -> SharedBuffer:
    """Like :func:`empty`, filled with zeros."""
    buf = empty(*size, dtype=dtype, device=device, share=share)
    buf.numpy()[...] = 0
    return buf


_MISSING: Any = object()


def _fill_dtype(value: Any) -> Any:
    """The dtype torch.full infers from a fill value (numpy's equivalent without torch)."""
    torch = _torch_module()
    if torch is not None:
        return torch.as_tensor(value).dtype
    if isinstance(value, (bool, np.bool_)):
        return np.bool_
    if isinstance(value, (int, np.integer)):
        return np.int64
    return np.float32


def full(
    *size: Any, fill_value: Any = _MISSING, dtype: Any = None, device: Any, share: Any = ()
) -> SharedBuffer:
    """A buffer filled with one value: ``full((2, 3), 7.0)`` or ``full(2, 3, fill_value=7.0)``.
    Without `dtype` the value decides it, as for ``torch.full`` (an int fills int64)."""
    if fill_value is _MISSING:
        if len(size) == 2 and isinstance(size[0], (tuple, list)):
            size, fill_value = (size[0],), size[1]
        else:
            raise SharedBufferError(
                "full() needs a fill value: full((2, 3), 7.0) or full(2, 3, fill_value=7.0)"
            )
    buf = empty(
        *size,
        dtype=_fill_dtype(fill_value) if dtype is None else dtype,
        device=device,
        share=share,
    )
    buf.numpy()[...] = fill_value
    return buf


def ones(*size: Any, dtype: Any = None, device: Any, share: Any = ()) -> SharedBuffer:
    """Like :func:`empty`, filled with ones (default dtype: the default float type)."""
    return full(*size, fill_value=1.0, dtype=dtype, device=device, share=share)


def _random(
    size: tuple[Any, ...], dtype: Any, device: Any, share: Any, normal: bool
) -> SharedBuffer:
    buf = empty(*size, dtype=dtype, device=device, share=share)
    if _torch_module() is not None:
        # torch's generator, so torch.manual_seed decides the values, as upstream.
        view = buf.torch()
        if normal:
            view.normal_()
        else:
            view.uniform_()
    else:
        array = buf.numpy()
        rng = np.random.default_rng()
        array[...] = rng.standard_normal(array.shape) if normal else rng.random(array.shape)
    return buf


def rand(*size: Any, dtype: Any = None, device: Any, share: Any = ()) -> SharedBuffer:
    """Uniform samples from ``[0, 1)``, like ``torch.rand`` (torch's generator when torch is
    installed, numpy's otherwise)."""
    return _random(size, dtype, device, share, normal=False)


def randn(*size: Any, dtype: Any = None, device: Any, share: Any = ()) -> SharedBuffer:
    """Standard-normal samples, like ``torch.randn``; see :func:`rand`."""
    return _random(size, dtype, device, share, normal=True)


def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    *,
    dtype: Any = None,
    device: Any,
    share: Any = (),
) -> SharedBuffer:
    """A 1-D buffer of evenly spaced values, like ``torch.arange``: ``arange(5)`` holds int64
    0..4, ``arange(5.0)`` the default float type, ``arange(2, 10, 3)`` steps by three."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise SharedBufferError("arange() step must not be zero")
    torch = _torch_module()
    if torch is not None:
        values: Any = torch.arange(start, end, step, dtype=dtype)
    else:
        integral = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        chosen = dtype if dtype is not None else (np.int64 if integral else np.float32)
        values = np.arange(start, end, step).astype(_element_type(chosen)[0])
    if math.prod(values.shape) == 0:
        raise SharedBufferError(
            f"arange({start}, {end}, {step}) is empty; there is nothing for a device to map"
        )
    return from_tensor(values, device=device, share=share)


def _like(other: Any, device: Any, share: Any) -> tuple[Any, Any]:
    if not hasattr(other, "shape") or not hasattr(other, "dtype"):
        raise SharedBufferError(
            f"expected a SharedBuffer, tensor or array, got {type(other).__name__}"
        )
    if isinstance(other, SharedBuffer) and other.runtime is not None:
        if device is None:
            device = other.device
        if share is None:
            share = other.devices[1:]
    elif device is None:
        raise SharedBufferError(
            f"{type(other).__name__} has no NPU device to inherit; pass device= "
            "(e.g. device='xrt:0')"
        )
    return device, () if share is None else share


def empty_like(
    other: Any, *, dtype: Any = None, device: Any = None, share: Any = None
) -> SharedBuffer:
    """A buffer shaped like `other` (a SharedBuffer, whose devices it inherits, or a tensor or
    array, which needs `device`); `dtype`, `device` and `share` override."""
    device, share = _like(other, device, share)
    chosen = other.dtype if dtype is None else dtype
    return empty(tuple(other.shape), dtype=chosen, device=device, share=share)


def zeros_like(
    other: Any, *, dtype: Any = None, device: Any = None, share: Any = None
) -> SharedBuffer:
    """:func:`empty_like`, filled with zeros."""
    return full_like(other, 0, dtype=dtype, device=device, share=share)


def ones_like(
    other: Any, *, dtype: Any = None, device: Any = None, share: Any = None
) -> SharedBuffer:
    """:func:`empty_like`, filled with ones."""
    return full_like(other, 1, dtype=dtype, device=device, share=share)


def full_like(
    other: Any, fill_value: Any, *, dtype: Any = None, device: Any = None, share: Any = None
) -> SharedBuffer:
    """:func:`empty_like`, filled with `fill_value`."""
    buf = empty_like(other, dtype=dtype, device=device, share=share)
    buf.numpy()[...] = fill_value
    return buf


def from_tensor(tensor: Any, *, dtype: Any = None, device: Any, share: Any = ()) -> SharedBuffer:
    """A new buffer holding a copy of `tensor` (a torch tensor on any device, or a numpy
    array), converted to `dtype` when given. A copy, as upstream: the buffer owns its memory;
    :func:`from_numpy` is the way to share an existing array's memory instead."""
    chosen = tensor.dtype if dtype is None else dtype
    buf = empty(tuple(tensor.shape), dtype=chosen, device=device, share=share)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(tensor, torch.Tensor):
        buf.torch().copy_(tensor)
    else:
        buf.numpy()[...] = np.asarray(tensor)
    return buf


def from_numpy(array: np.ndarray) -> SharedBuffer:
    """Shares `array`'s memory (no copy): kernels read and write the array itself, which the
    buffer keeps alive. Host memory, so launches stage it. The array must be C-contiguous,
    writable, in native byte order and of a type Triton can name."""
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
    _resolve_dtype(array.dtype)
    return SharedBuffer._over(array)


# ---------------------------------------------------------------------------------------------
# Other producers


def dlpack_device(obj: Any) -> tuple[int, int]:
    """``(device_type, device_id)`` of any DLPack producer (torch tensors without the protocol
    are read directly)."""
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is not None:
        kind, index = fn()
        return int(kind), int(index)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor) and obj.device.type == "cuda":
        return kDLROCM, obj.device.index or 0
    return kDLCPU, 0


def as_torch(obj: Any) -> Any:
    """A torch tensor over `obj` without copying: a tensor itself, or any DLPack producer."""
    torch = _require_torch("as_torch")
    if isinstance(obj, torch.Tensor):
        return obj
    if hasattr(obj, "__dlpack__"):
        return torch.from_dlpack(obj)
    raise SharedBufferError(f"{type(obj).__name__} is neither a torch tensor nor a DLPack producer")


def is_on_device(obj: Any, device: Any) -> bool:
    """Whether `obj` (any DLPack producer) lives on GPU `device` (``"hip:0"``, ``"cuda:1"``);
    an NPU device holds no framework tensor, so naming one raises."""
    kind, index = devices_.parse(device)
    if kind != "HIP":
        raise SharedBufferError(f"{device!r} cannot hold a framework tensor")
    found_kind, found_index = dlpack_device(obj)
    return found_kind in (kDLROCM, kDLCUDA) and found_index == index


# ---------------------------------------------------------------------------------------------
# Counters and the pool


def hsa_dispatch_counts() -> tuple[int, int]:
    """``(in_place, staged)``: buffer arguments of this process's HSA launches the runtime
    passed in place and copied through staging memory. XRT launches are not counted (use
    :func:`dispatch_counts`); a process that never dispatched through HSA reads ``(0, 0)``.
    Reading the counts does not open a runtime."""
    return tuple(native().dispatch_counts("hsa"))


def dispatch_counts() -> tuple[int, int]:
    """``(in_place, staged)`` over the launches of both runtimes."""
    return tuple(native().dispatch_counts())


def empty_cache() -> None:
    """Releases the memory the pool holds (not what live buffers hold)."""
    _POOL.clear()


def set_cache_enabled(enabled: bool) -> None:
    """Turns reuse of closed buffers' memory on (the default) or off; off also empties it."""
    _POOL.set_enabled(enabled)


def cache_stats() -> dict[str, int]:
    """``buffers`` and ``bytes`` the pool holds; ``hits`` (allocations it served) and
    ``misses`` (allocations that asked the runtime)."""
    return _POOL.stats()


# Emptied before interpreter teardown, while the runtimes can still free what it holds.
atexit.register(set_cache_enabled, False)
