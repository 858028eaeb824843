"""The driver half of the backend: selection, device facts and the launcher.

Importing this module must stay cheap and must never fail (Triton imports it at
``import triton``): the native module is loaded on first use, not here.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from triton_npu.config import resolve_runtime

logger = logging.getLogger(__name__)

BACKEND_NAME = "amd_triton_npu"

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


class NPUUtils:
    """Device facts and binary loading, as Triton asks for them."""

    _instance: NPUUtils | None = None

    def __new__(cls) -> NPUUtils:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @staticmethod
    def get_device_properties(device: Any) -> dict:
        return {
            "max_shared_mem": 2**20,
            "multiprocessor_count": None,
            "sm_clock_rate": None,
            "mem_clock_rate": None,
            "mem_bus_width": None,
        }

    @staticmethod
    def load_binary(name: str, kernel: bytes, shared: int, device: Any) -> tuple:
        # The "function" Triton hands back at every launch is the ttsharedir text itself:
        # everything NPU-specific happens at first launch, when the grid is known. The module
        # handle must not be None: Triton rebuilds the launcher whenever it is (and with
        # launch hooks set, that is every launch).
        return (name, kernel, None, None, sys.maxsize)

    @staticmethod
    def unload_module(module: Any) -> None:
        return None


class NPUDriver(DriverBase):
    """Selects the NPU backend: ``triton.runtime.driver.set_active(NPUDriver("hsa"))``."""

    def __init__(self, runtime: str | None = None) -> None:
        self.runtime = resolve_runtime(runtime)
        # As upstream: from now on `set_active` selects a driver for the calling thread only.
        from triton_npu._active_driver import make_active_driver_per_context

        make_active_driver_per_context()
        self.utils = NPUUtils()
        self.binary_ext = "ttsharedir"
        from triton_npu.backend.launcher import make_launcher_cls

        self.launcher_cls = make_launcher_cls(self.runtime)

    @staticmethod
    def is_active() -> bool:
        # Upstream's driver is never active by itself (scripts call set_active); we also
        # honour Triton's own selector so that TRITON_DEFAULT_BACKEND needs nothing else.
        return os.environ.get("TRITON_DEFAULT_BACKEND") == BACKEND_NAME

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("npu", 0, 0)

    def get_device_capability(self) -> tuple:
        return ("npu", 0)

    def get_current_device(self) -> str:
        return "npu"

    def set_current_device(self, device: Any) -> None:
        if device != "npu":
            raise ValueError(f"the NPU driver has one device, 'npu'; got {device!r}")

    def get_current_stream(self, device: Any = None) -> None:
        return None

    def get_active_torch_device(self) -> Any:
        import torch

        # Kernel arguments are host tensors: the NPU reads host memory.
        return torch.device("cpu")

    def map_python_to_cpp_type(self, ty: str) -> str:
        if ty.startswith("*"):
            return "void*"
        try:
            return _CPP_TYPES[ty]
        except KeyError:
            raise ValueError(f"the NPU backend has no C type for {ty!r}") from None

    def assemble_tensormap_to_arg(self, tensormaps_info: Any, args: Any) -> Any:
        return args

    def get_benchmarker(self) -> Any:
        from triton_npu.backend.launcher import do_bench

        return do_bench


def get_npu_cache_dir(compiled_kernel: Any) -> str | None:
    """The cache directory holding a launched kernel's artifacts (``kernel.hsaco``,
    ``aie.elf`` …); ``None`` before its first launch."""
    run = getattr(compiled_kernel, "_run", None)
    if run is None:
        return None
    from triton_npu._loader import native

    if not isinstance(run, native().NPULauncher):
        raise TypeError(
            f"{type(compiled_kernel).__name__} was not compiled for the NPU "
            f"(its launcher is {type(run).__name__})"
        )
    return run.npu_cache_dir


def detect_npu_version(runtime: str | None = None) -> str:
    """``"npu1"`` or ``"npu2"``: ``npu_config.target`` (``AMD_TRITON_NPU_TARGET``) if set,
    else the NPU found by upstream's probes in order (the HSA agent under ``hsa``, the XRT
    device, ``xrt-smi examine``). ``runtime`` defaults to ``npu_config.runtime``. Raises
    ``RuntimeError`` naming every probe and what it saw when no supported NPU is found: the
    generation is never guessed. Remembered per process and runtime."""
    from triton_npu._host import facts
    from triton_npu._loader import native

    chosen = None if runtime is None else resolve_runtime(runtime)
    return native().detect_npu_version(chosen, facts())


def get_npu_device_info(runtime: str | None = None) -> list[dict]:
    """The NPU devices found, as upstream returns them: a list of dicts with ``"bdf"`` and
    ``"name"`` (here also ``"target"``, ``"arch"``, ``"runtime"``, ``"columns"`` when the
    runtime reports them, and ``"probe"``: which probe found it; ``"bdf"`` is ``None`` when
    the probe does not report one). An empty list when there is none; the log then says what
    each probe saw. Asks the device on every call."""
    from triton_npu._host import facts
    from triton_npu._loader import native

    chosen = None if runtime is None else resolve_runtime(runtime)
    info = dict(native().npu_device_info(chosen, facts()))
    error = info.pop("error")
    if info["name"] is None:
        logger.warning("%s", error)
        return []
    return [{"bdf": None, **info}]


def __getattr__(name: str) -> Any:
    # Upstream's driver module exports the launcher class. Ours is native, and importing this
    # module must not load the native module (Triton imports it at `import triton`).
    if name == "NPULauncher":
        from triton_npu._loader import native

        return native().NPULauncher
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
