"""The launcher Triton calls at every kernel launch, and the benchmarker.

The launcher is native (``triton_npu._native.NPULauncher``): built once per compiled kernel
from its signature, it compiles nothing at run time; see crates/npu-python/src/launcher.rs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from triton_npu._loader import native


def make_launcher_cls(runtime: str) -> Callable[..., Any]:
    """``launcher_cls(src, metadata)`` for Triton, with the runtime bound. The native module is
    loaded when Triton builds the first launcher, not when the driver is created."""
    from triton_npu._host import facts

    def launcher_cls(src: Any, metadata: Any) -> Any:
        return native().NPULauncher(src, metadata, runtime=runtime, host=facts())

    return launcher_cls


def do_bench(
    fn: Callable[[], Any],
    warmup: int = 25,
    rep: int = 100,
    quantiles: Sequence[float] | None = None,
    return_mode: str = "mean",
    grad_to_none: Sequence[Any] | None = None,
    **_: Any,
) -> Any:
    """Times ``fn`` (one kernel launch) by the device time the runtime measured for each
    dispatch, under both runtimes. ``warmup`` and ``rep`` are milliseconds of device time,
    as in ``triton.testing.do_bench``; ``grad_to_none`` tensors get ``.grad = None`` before
    each timed call (so a backward pass in ``fn`` does not accumulate)."""
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"return_mode must be min, max, mean, median or all; got {return_mode!r}")

    def timed() -> float:
        for tensor in grad_to_none or ():
            tensor.grad = None
        before = native().last_dispatch()[0]
        fn()
        count, seconds = native().last_dispatch()
        if count == before:
            raise RuntimeError(
                "the benchmarked function dispatched no NPU kernel (compile-only mode, an "
                "empty grid, or no launch in it), so there is no device time to measure"
            )
        return seconds * 1e3

    estimate_ms = max(timed(), 1e-3)  # the first call also compiles and loads
    for _ in range(max(1, int(warmup / estimate_ms))):
        timed()
    times = [timed() for _ in range(max(5, int(rep / estimate_ms)))]
    if quantiles is not None:
        ordered = sorted(times)
        picked = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
        return picked[0] if len(picked) == 1 else picked
    if return_mode == "all":
        return times
    return {
        "min": min,
        "max": max,
        "mean": statistics.fmean,
        "median": statistics.median,
    }[return_mode](times)
