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

:func:`from_numpy` (ours) wraps an existing array without copying: launches stage host
memory, while an array viewing a shared buffer's memory is still that memory (``device``
says which).
:func:`hsa_dispatch_counts` tells how HSA launches passed their buffers, ``(in_place,
staged)``; :func:`dispatch_counts` the same over both runtimes.

Element types: ``bool``, ``int8/16/32/64``, ``uint8/16/32/64``, ``float16/32/64``, given as
torch dtypes, numpy dtypes or names; with the ``ml-dtypes`` package also ``bfloat16`` and the
float8 types. ``dtype`` reports a torch dtype when one was asked for (or torch's default when
none was and torch is installed), else a numpy dtype.
"""

from __future__ import annotations

import atexit
import math
import sys
from typing import Any

import numpy as np

from triton_npu import _shared_devices as devices_
from triton_npu._loader import native
from triton_npu._shared_buffer import BufferObject, SharedBuffer, kDLCPU, kDLCUDA, kDLROCM
from triton_npu._shared_devices import SharedBufferError
from triton_npu._shared_dtypes import (
    element_type,
    require_torch,
    resolve_dtype,
    size_of,
    torch_module,
)
from triton_npu._shared_pool import POOL

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


# ---------------------------------------------------------------------------------------------
# Factories (upstream's signatures)


def empty(*size: Any, dtype: Any = None, device: Any, share: Any = ()) -> SharedBuffer:
    """An uninitialised buffer of `size` (``empty(2, 3)`` or ``empty((2, 3))``) on `device`."""
    return SharedBuffer(size_of(size), dtype, device, share)


def zeros(*size: Any, dtype: Any = None, device: Any, share: Any = ()) -> SharedBuffer:
    """Like :func:`empty`, filled with zeros."""
    buf = empty(*size, dtype=dtype, device=device, share=share)
    buf.numpy()[...] = 0
    return buf


_MISSING: Any = object()


def _fill_dtype(value: Any) -> Any:
    """The dtype torch.full infers from a fill value (numpy's equivalent without torch)."""
    torch = torch_module()
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
    if torch_module() is not None:
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
    torch = torch_module()
    if torch is not None:
        values: Any = torch.arange(start, end, step, dtype=dtype)
    else:
        integral = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        chosen = dtype if dtype is not None else (np.int64 if integral else np.float32)
        values = np.arange(start, end, step).astype(element_type(chosen)[0])
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
    resolve_dtype(array.dtype)
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
    torch = require_torch("as_torch")
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
    POOL.clear()


def set_cache_enabled(enabled: bool) -> None:
    """Turns reuse of closed buffers' memory on (the default) or off; off also empties it."""
    POOL.set_enabled(enabled)


def cache_stats() -> dict[str, int]:
    """``buffers`` and ``bytes`` the pool holds; ``hits`` (allocations it served) and
    ``misses`` (allocations that asked the runtime)."""
    return POOL.stats()


# Emptied before interpreter teardown, while the runtimes can still free what it holds.
atexit.register(set_cache_enabled, False)
