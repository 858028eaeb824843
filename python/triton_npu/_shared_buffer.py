"""The :class:`SharedBuffer` of :mod:`triton_npu.shared` and the runtime memory under it.

A buffer is a typed numpy view of memory an NPU runtime allocated (or, from ``from_numpy``,
of a host array); its torch view, DLPack export, tensor surface and lifetime are here, the
factories in :mod:`triton_npu.shared`.
"""

from __future__ import annotations

import functools
import math
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from triton_npu import _shared_devices as devices_
from triton_npu._loader import native
from triton_npu._shared_devices import SharedBufferError
from triton_npu._shared_dtypes import (
    element_type,
    require_torch,
    shape_of,
    torch_dtype,
    torch_module,
)
from triton_npu._shared_pool import POOL
from triton_npu.errors import DeviceError, NPUInputError, RuntimeNotFoundError

# DLPack device types, as the DLPack specification numbers them.
kDLCPU = 1
kDLCUDA = 2
kDLROCM = 10


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
    pages = POOL.take(pool_key)
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
        dims = shape_of(shape)
        np_dtype, reported = element_type(dtype)
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
            torch = require_torch("a torch view")
            array = self._live()
            as_type = torch_dtype(array)
            if as_type is None:
                cached = torch.from_numpy(array)
            else:
                carrier = np.dtype(f"u{array.itemsize}")
                cached = torch.from_numpy(array.view(carrier)).view(as_type)
            self._torch_view = weakref.ref(cached)
        return cached

    def _view(self) -> Any:
        """What tensor-like operations act on: the torch view, or numpy without torch."""
        return self._live() if torch_module() is None else self.torch()

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
        torch = None if name.startswith("_") else torch_module()
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
            POOL.give_back((nbytes, self._key), base)

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
    return frozenset(dir(torch_module().Tensor))


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
