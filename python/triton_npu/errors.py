"""The exceptions triton-npu raises.

Every failure of the backend is an :class:`NPUError` (a ``RuntimeError``, as upstream's were),
so ``except RuntimeError`` written for amd/Triton-XDNA keeps working. The native core decides
the class from the *kind* of the Rust error, never from its text; each exception keeps the
message that says what failed and what to do. Catch the narrow classes to react to one
failure (``HardwareContextsExhaustedError``: close idle contexts and retry;
``ToolchainNotFoundError``: install the AIE toolchain) and :class:`NPUError` for the rest.

Classes that also mean a standard condition derive from the standard class as well:
configuration mistakes and unusable arguments are ValueErrors, timeouts are TimeoutErrors,
cache failures are OSErrors and cache paths refused for safety are PermissionErrors.

This module imports nothing else from the package, so it is safe to import anywhere.
"""

from __future__ import annotations

__all__ = [
    "NPUError",
    "NPUConfigError",
    "NPUInputError",
    "ToolchainNotFoundError",
    "CompileError",
    "RuntimeNotFoundError",
    "DeviceError",
    "DeviceNotFoundError",
    "UnsupportedNPUDeviceError",
    "HardwareContextsExhaustedError",
    "LaunchError",
    "NPUTimeoutError",
    "NPUCacheError",
    "CachePermissionError",
    "NPUResourceError",
    "NPUInterruptedError",
    "KIND_CLASSES",
]


class NPUError(RuntimeError):
    """Base class of every error triton-npu raises."""


class NPUConfigError(NPUError, ValueError):
    """A setting or environment variable has a value the backend cannot use."""


class NPUInputError(NPUError, ValueError):
    """Arguments the backend cannot use (a launch's buffers, a chain's inputs)."""


class ToolchainNotFoundError(NPUError):
    """A tool of the AIE toolchain (air-opt, aircc, Peano, triton-shared-opt…) or the
    transform script a compile needs is missing; the message lists every place looked."""


class CompileError(NPUError):
    """A toolchain step ran and failed, or produced something unusable; the message carries
    the command line, the end of the tool's output and where the full log is."""


class RuntimeNotFoundError(NPUError):
    """The runtime (ROCr's ``libhsa-runtime64`` with AIE support, or XRT) cannot be found or
    loaded; the message lists every place looked and why each was refused."""


class DeviceError(NPUError):
    """No usable NPU: none was found, or the one found is not supported."""


class DeviceNotFoundError(DeviceError):
    """No NPU device was found (and no target was configured)."""


class UnsupportedNPUDeviceError(DeviceError):
    """The device reports a generation this backend does not know (upstream's name)."""


class HardwareContextsExhaustedError(NPUError):
    """Every hardware context of the NPU is in use (by this or other processes)."""


class LaunchError(NPUError):
    """Loading or running a kernel on the NPU failed."""


class NPUTimeoutError(NPUError, TimeoutError):
    """A wait (a toolchain step, a dispatch) ran out of time."""


class NPUCacheError(NPUError, OSError):
    """The kernel cache cannot be used (a file-system problem, as ``OSError``)."""


class CachePermissionError(NPUCacheError, PermissionError):
    """A cache path belongs to someone else or can be written by others: refused, because the
    cache decides what code runs on the NPU."""


class NPUResourceError(NPUError, OSError):
    """A limit of the process or the system was reached (open files, processes, memory); the
    message names the limit, its value and what to raise."""


class NPUInterruptedError(NPUError, InterruptedError):
    """A wait was interrupted (Ctrl-C, SIGTERM) and what it waited for was stopped. Ctrl-C in
    Python's main thread raises ``KeyboardInterrupt`` itself; this is for the other causes."""


# The native core raises these by kind name (`ErrorKind` in crate npu-driver); one table, so
# a new kind is one line here and one in the Rust enum.
KIND_CLASSES: dict[str, type[NPUError]] = {
    "config": NPUConfigError,
    "invalid_input": NPUInputError,
    "toolchain_missing": ToolchainNotFoundError,
    "compile_failed": CompileError,
    "runtime_missing": RuntimeNotFoundError,
    "device_not_found": DeviceNotFoundError,
    "unsupported_device": UnsupportedNPUDeviceError,
    "hardware_contexts_exhausted": HardwareContextsExhaustedError,
    "launch_failed": LaunchError,
    "timeout": NPUTimeoutError,
    "cache": NPUCacheError,
    "cache_permission": CachePermissionError,
    "resources_exhausted": NPUResourceError,
    "interrupted": NPUInterruptedError,
}
