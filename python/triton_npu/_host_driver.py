"""What the NPU driver and the CPU driver share: one device, no streams, kernel arguments in
host memory (CPU torch tensors). Abstract (``is_active`` and ``get_benchmarker`` are each
driver's own), so Triton's backend discovery never counts it as a driver."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

_CPP_TYPES = {
    "i1": "int8_t",
    "i8": "int8_t",
    "i16": "int16_t",
    "i32": "int32_t",
    "i64": "int64_t",
    "u1": "uint8_t",
    "u8": "uint8_t",
    "u16": "uint16_t",
    "u32": "uint32_t",
    "u64": "uint64_t",
    "fp16": "float",
    "bf16": "float",
    "fp32": "float",
    "f32": "float",
    "fp64": "double",
}


class HostMemoryDriver(DriverBase):
    """A driver whose one device (``DEVICE``) reads kernel arguments from host memory."""

    #: The device's name, which is also the target's backend name.
    DEVICE = ""
    #: What the driver is called in messages.
    WHAT = ""

    def get_current_target(self) -> GPUTarget:
        return GPUTarget(self.DEVICE, 0, 0)

    def get_device_capability(self) -> tuple:
        return (self.DEVICE, 0)

    def get_current_device(self) -> str:
        return self.DEVICE

    def set_current_device(self, device: Any) -> None:
        if device != self.DEVICE:
            raise ValueError(f"the {self.WHAT} has one device, {self.DEVICE!r}; got {device!r}")

    def get_current_stream(self, device: Any = None) -> None:
        return None

    def get_active_torch_device(self) -> Any:
        import torch

        # Kernel arguments are host tensors (the NPU reads host memory).
        return torch.device("cpu")

    def map_python_to_cpp_type(self, ty: str) -> str:
        if ty.startswith("*"):
            return "void*"
        try:
            return _CPP_TYPES[ty]
        except KeyError:
            raise ValueError(f"the {self.WHAT} has no C type for {ty!r}") from None

    def assemble_tensormap_to_arg(self, tensormaps_info: Any, args: Any) -> Any:
        return args

    def time_ms(self, fn: Callable[[], Any]) -> float:
        """Runs ``fn`` once and returns how long it took, in ms, by this driver's clock."""
        raise NotImplementedError

    def do_bench(
        self,
        fn: Callable[[], Any],
        warmup: int = 25,
        rep: int = 100,
        grad_to_none: Sequence[Any] | None = None,
        quantiles: Sequence[float] | None = None,
        return_mode: str = "mean",
    ) -> Any:
        """Times ``fn`` in ms by :meth:`time_ms` (upstream's ``NPUDriver.do_bench``): runs it
        for about ``warmup`` ms, then for about ``rep`` ms (at least 5 times); tensors in
        ``grad_to_none`` get ``.grad = None`` before each call; returns ``quantiles`` if
        given, else the times summarised by ``return_mode`` (min, max, mean, median or all),
        as ``triton.testing.do_bench`` does."""
        if return_mode not in ("min", "max", "mean", "median", "all"):
            raise ValueError(
                f"return_mode must be min, max, mean, median or all; got {return_mode!r}"
            )

        def one() -> float:
            for tensor in grad_to_none or ():
                tensor.grad = None
            return self.time_ms(fn)

        estimate_ms = max(one(), 1e-3)  # the first call also compiles and loads
        for _ in range(max(1, int(warmup / estimate_ms))):
            one()
        times = [one() for _ in range(max(5, int(rep / estimate_ms)))]
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

    def get_benchmarker(self) -> Any:
        return self.do_bench
