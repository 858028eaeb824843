"""What the NPU driver and the CPU driver share: one device, no streams, kernel arguments in
host memory (CPU torch tensors). Abstract (``is_active`` and ``get_benchmarker`` are each
driver's own), so Triton's backend discovery never counts it as a driver."""

from __future__ import annotations

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
