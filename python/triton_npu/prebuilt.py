"""Prebuilt NPU designs: an hsaco someone else built, run from Python.

Engines such as mlir-air's LLM decode bring their own full ELF, packed into an hsaco, whose
control code relocates against an external variable (``scratch-pad-ctrl``) holding parameters
such as the context length. :func:`load` loads such a design on the process's runtime with the
external variables it needs (name → bytes), :meth:`PrebuiltKernel.variable` gives each one as
a writable numpy view of its device-heap memory, and :meth:`PrebuiltKernel.__call__`
dispatches the kernel over tensors, numpy arrays or shared buffers as often as needed::

    import numpy as np
    from triton_npu import prebuilt, shared

    k = prebuilt.load("decode.hsaco", "main:sequence", {"scratch-pad-ctrl": 8})
    params = k.variable("scratch-pad-ctrl").view(np.uint32)
    x, y = shared.zeros(4096, device="hsa:0"), shared.empty(4096, device="hsa:0")
    for context_length in range(1, 6):
        params[0] = context_length  # a plain store: ROCr flushes the variable on each dispatch
        k(x, y)
    k.release()

The variable views keep the design loaded while they live. Under XRT, which does not run
hsaco designs, :func:`load` raises an error that says so.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from triton_npu._loader import native
from triton_npu.config import resolve_runtime


class PrebuiltKernel:
    """A loaded prebuilt kernel (see the module documentation)."""

    def __init__(self, native_kernel: Any):
        self._kernel = native_kernel

    @property
    def name(self) -> str:
        """The kernel's name in the code object, e.g. ``main:sequence``."""
        return self._kernel.name

    @property
    def runtime(self) -> str:
        """The runtime it runs on: ``hsa`` or ``xrt``."""
        return self._kernel.runtime

    @property
    def variables(self) -> dict[str, int]:
        """The external variables it was loaded with, name → bytes."""
        return dict(self._kernel.variables)

    def variable(self, name: str) -> np.ndarray:
        """The device memory of external variable `name` as a writable ``uint8`` array (use
        ``.view(dtype)`` for typed access). Stores into it are what the next dispatch reads."""
        return np.asarray(self._kernel.variable(name))

    def __call__(self, *buffers: Any) -> None:
        """Runs the kernel once over `buffers` (in its argument order) and waits for it."""
        self._kernel.dispatch(*buffers)

    def release(self) -> None:
        """Unloads the kernel once no variable view is left; calling it afterwards raises."""
        self._kernel.release()

    def __repr__(self) -> str:
        return repr(self._kernel)


def load(
    source: bytes | str | os.PathLike,
    kernel: str,
    variables: dict[str, int] | None = None,
    runtime: str | None = None,
) -> PrebuiltKernel:
    """Loads `kernel` from an hsaco (its bytes, or a path) on `runtime` (default
    ``npu_config.runtime``), first defining each external variable (name → size in bytes) in
    the device heap. Raises ``LoadRefusedError`` (or another ``triton_npu.errors`` class) with
    the runtime's reason when the design cannot be loaded."""
    if not isinstance(source, bytes | bytearray | memoryview):
        source = os.fspath(source)
    elif not isinstance(source, bytes):
        source = bytes(source)
    pairs = [(str(n), int(s)) for n, s in (variables or {}).items()]
    from triton_npu._host import facts

    return PrebuiltKernel(
        native().prebuilt_load(source, kernel, pairs, resolve_runtime(runtime), facts())
    )
