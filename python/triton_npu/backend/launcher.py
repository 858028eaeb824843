"""The launcher Triton calls at every kernel launch, and the benchmark timer.

The launcher is native (``triton_npu._native.NPULauncher``): built once per compiled kernel
from its signature, it compiles nothing at run time; see crates/npu-python/src/launcher.rs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from triton_npu._loader import native


def make_launcher_cls(runtime: str) -> Callable[..., Any]:
    """``launcher_cls(src, metadata)`` for Triton, with the runtime bound. The native module is
    loaded when Triton builds the first launcher, not when the driver is created."""
    from triton_npu._host import facts

    def launcher_cls(src: Any, metadata: Any) -> Any:
        return native().NPULauncher(src, metadata, runtime=runtime, host=facts())

    return launcher_cls


def device_ms(fn: Callable[[], Any]) -> float:
    """Runs ``fn`` once; the device time, in ms, of the NPU dispatches it made (as the runtime
    measured it, under both runtimes)."""
    before = native().last_dispatch()[0]
    fn()
    count, seconds = native().last_dispatch()
    if count == before:
        raise RuntimeError(
            "the benchmarked function dispatched no NPU kernel (compile-only mode, an "
            "empty grid, or no launch in it), so there is no device time to measure"
        )
    return seconds * 1e3
