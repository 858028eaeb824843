"""``driver_scope(kind)``: run a block with the NPU (or the GPU) driver active, then put back
exactly what was active before (upstream's ``driver_scope`` module).

Heterogeneous scripts (an iGPU and the NPU in one process) launch some kernels on each::

    from triton.backends.amd_triton_npu.driver_scope import driver_scope

    with driver_scope("npu"):
        add_kernel[grid](x, y, out, n, BLOCK=1024)   # on the NPU
    matmul_kernel[grid](...)                         # on whatever was active before

``kind`` is ``"npu"`` or ``"gpu"``. When a driver of that kind is already active, the scope
changes nothing. Otherwise it selects a new ``NPUDriver()`` (``npu_config.runtime``) for
``"npu"``, or Triton's AMD GPU driver for ``"gpu"`` (made once per process), and restores
``triton.runtime.driver``'s previous selection when the block ends — also when that was no
selection at all, and also when the block raises. Selections are per thread (see
``triton_npu._active_driver``), so a scope in one thread leaves other threads alone.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["driver_scope"]

KINDS = ("npu", "gpu")

_gpu_driver: Any = None
_gpu_lock = threading.Lock()


def _gpu() -> Any:
    """Triton's AMD GPU driver, made once per process."""
    global _gpu_driver
    with _gpu_lock:
        if _gpu_driver is None:
            from triton.backends import backends

            amd = backends.get("amd")
            if amd is None:
                raise RuntimeError(
                    "driver_scope('gpu') needs Triton's AMD GPU backend, which this triton "
                    f"does not have (backends: {', '.join(sorted(backends)) or 'none'})"
                )
            _gpu_driver = amd.driver()
        return _gpu_driver


def _is_kind(driver: Any, kind: str) -> bool:
    if driver is None:
        return False
    if kind == "npu":
        from triton_npu.backend.driver import NPUDriver

        return isinstance(driver, NPUDriver)
    from triton.backends import backends

    amd = backends.get("amd")
    return amd is not None and isinstance(driver, amd.driver)


@contextlib.contextmanager
def driver_scope(kind: str) -> Iterator[Any]:
    """Makes a driver of ``kind`` (``"npu"`` or ``"gpu"``) active for the block; yields it."""
    if kind not in KINDS:
        raise ValueError(f"driver_scope kind must be one of {', '.join(KINDS)}; got {kind!r}")
    from triton.runtime.driver import driver as config

    from triton_npu._active_driver import make_active_driver_per_context

    make_active_driver_per_context()
    # `_active` (what this thread selected, or None), not `active`: reading `active` would
    # create and select the default driver.
    previous = config._active
    if _is_kind(previous, kind):
        yield previous
        return
    if kind == "npu":
        from triton_npu.backend.driver import NPUDriver

        chosen = NPUDriver()
    else:
        chosen = _gpu()
    config.set_active(chosen)
    try:
        yield chosen
    finally:
        config._active = previous
