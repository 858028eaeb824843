"""The driver half of the backend: selection, device facts and the launcher.

Importing this module must stay cheap and must never fail (Triton imports it at
``import triton``): the native module is loaded on first use, not here.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from triton_npu._host_driver import HostMemoryDriver

# Upstream's driver module exposes these names too: scripts import them from it.
from triton_npu.config import npu_config, resolve_runtime  # noqa: F401
from triton_npu.errors import UnsupportedNPUDeviceError  # noqa: F401

logger = logging.getLogger(__name__)

BACKEND_NAME = "amd_triton_npu"

#: The block size cap this backend lifts Triton's Python-side check to, as upstream does:
#: a whole-tile load and ``tl.dot`` become one ``linalg.matmul`` that the transform script
#: tiles on the device, so a block is not a register tile (256 x 8192 = 2**21, with headroom).
MAX_TENSOR_NUMEL = 1 << 22


def _lift_tensor_numel_limit() -> None:
    """Raises ``triton._utils.TRITON_MAX_TENSOR_NUMEL`` (read by ``validate_block_shape`` at
    every call) and the ``triton.language`` constant that reports it to ``MAX_TENSOR_NUMEL``;
    never lowers them. Triton's C++ verifier keeps its own limit (upstream patches its
    triton for that): see ``NPUBackend`` for the error a larger block gets."""
    import triton._utils as utils

    current = getattr(utils, "TRITON_MAX_TENSOR_NUMEL", None)
    if isinstance(current, int) and current < MAX_TENSOR_NUMEL:
        utils.TRITON_MAX_TENSOR_NUMEL = MAX_TENSOR_NUMEL
        language = sys.modules.get("triton.language")
        if getattr(language, "TRITON_MAX_TENSOR_NUMEL", None) == current:
            language.TRITON_MAX_TENSOR_NUMEL = MAX_TENSOR_NUMEL  # type: ignore[union-attr]


_lift_tensor_numel_limit()

#: Callables that release NPU hardware contexts held outside this backend (another
#: framework's sessions, a ``MultiLaunchRunner`` the application keeps): when the NPU has no
#: hardware context left, :func:`release_external_contexts` calls them before the backend
#: closes its own idle chains and retries. Append to it; upstream's name.
context_releasers: list[Callable[[], Any]] = []


def release_external_contexts() -> int:
    """Calls every callable in :data:`context_releasers`, in order; returns how many ran
    without raising. One that raises is logged and skipped: releasing is best effort."""
    released = 0
    for release in list(context_releasers):
        try:
            release()
        except Exception:
            logger.warning("a context releaser (%r) failed", release, exc_info=True)
        else:
            released += 1
    return released


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


class NPUDriver(HostMemoryDriver):
    """Selects the NPU backend: ``triton.runtime.driver.set_active(NPUDriver("hsa"))``."""

    DEVICE = "npu"
    WHAT = "NPU driver"

    def __init__(self, runtime: str | None = None) -> None:
        self.runtime = resolve_runtime(runtime)
        # As upstream: from now on `set_active` selects a driver for the calling thread only.
        from triton_npu._active_driver import make_active_driver_per_context

        make_active_driver_per_context()
        self.utils = NPUUtils()
        self.binary_ext = "ttsharedir"
        from triton_npu.backend.launcher import make_launcher_cls

        self.launcher_cls = make_launcher_cls(self.runtime)
        self._opening = False

    def open_runtime_ahead(self) -> None:
        """Starts opening this driver's runtime (loading ROCr or XRT, initialising it, the
        queue) on a helper thread, so that it overlaps the compile before the first launch.
        Called when a kernel compiles for it; once per driver, nothing under ``compile_only``,
        never an error (the launch opens the runtime and reports why it cannot)."""
        if self._opening:
            return
        self._opening = True
        from triton_npu._host import facts
        from triton_npu._loader import native

        native().open_runtime_in_background(self.runtime, facts())

    @staticmethod
    def is_active() -> bool:
        # Upstream's driver is never active by itself (scripts call set_active); we also
        # honour Triton's own selector so that TRITON_DEFAULT_BACKEND needs nothing else.
        return os.environ.get("TRITON_DEFAULT_BACKEND") == BACKEND_NAME

    def time_ms(self, fn: Callable[[], Any]) -> float:
        """The device time of the NPU dispatches ``fn`` makes, as the runtime measured it
        (``do_bench`` times by it, under both runtimes; upstream's read a ``data.txt`` its
        XRT launcher wrote)."""
        from triton_npu.backend.launcher import device_ms

        return device_ms(fn)


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


def get_output_format(runtime: str | None = None) -> str:
    """``"elf"``, ``"xclbin"`` or ``"pdi"``: the format kernels are built in under ``runtime``
    (default ``npu_config.runtime``), as ``NPULauncher.output_format`` reports it:
    ``npu_config.output_format`` if set (an ``elf`` on npu1, or a format the runtime cannot
    load, is an error), else ``elf`` on npu2 and ``xclbin`` on npu1."""
    from triton_npu._host import facts
    from triton_npu._loader import native

    chosen = None if runtime is None else resolve_runtime(runtime)
    return native().output_format(chosen, facts())


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
    # Upstream's driver module exports these names. Ours are native, and importing this
    # module must not load the native module (Triton imports it at `import triton`).
    if name == "NPULauncher":
        from triton_npu._loader import native

        return native().NPULauncher
    if name == "_last_dispatched_module":
        # Upstream's module variable, read at every access: the kernel of the process's last
        # launch, whose ``launch(gridX, gridY, gridZ, kernel_metadata, launch_metadata,
        # enter_hook, exit_hook, *args)`` dispatches it again without Triton's JIT (upstream's
        # LLM examples keep one per shape as a fast path); ``None`` before the first launch.
        from triton_npu._loader import native

        return native().last_dispatched_module()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
