"""The compiler half of the backend: TTIR, then Linalg through ``triton-shared-opt``.

Everything NPU-specific (lowering to AIR, aircc, packing) happens at first launch in the
driver, because it depends on the launch grid. Nothing here imports the native module at
import time: ``import triton`` imports this module, and must never fail because of us.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from typing import Any

from triton._C.libtriton import ir, passes
from triton.backends.compiler import BaseBackend, GPUTarget, Language

from triton_npu.errors import CompileError, ToolchainNotFoundError

# Bump when the text this backend produces for the same input changes: Triton's cache key
# includes `hash()`, and the plugin's own sources are not part of it.
CODEGEN_VERSION = "1"

TRITON_SHARED_OPT = "triton-shared-opt"


class TritonSharedOptNotFound(ToolchainNotFoundError):
    """``triton-shared-opt`` is needed for the ``ttsharedir`` stage and was not found."""


@dataclasses.dataclass(frozen=True)
class NPUOptions:
    num_warps: int = 0
    num_ctas: int = 0
    num_stages: int = 1
    warp_size: int = 32
    backend_name: str = "npu"
    arch: str | None = None
    debug: bool = False
    sanitize_overflow: bool = False
    instrumentation_mode: str = ""
    fpsan_homomorphic_casts: bool = False
    enable_fp_fusion: bool = False
    launch_cooperative_grid: bool = False
    extern_libs: tuple = ()
    supported_fp8_dtypes: tuple = ()
    deprecated_fp8_dot_operand_dtypes: tuple = ()
    default_dot_input_precision: str = "ieee"
    allowed_dot_input_precisions: tuple = ("ieee",)
    max_num_imprecise_acc_default: int = 0

    def hash(self) -> str:
        text = "_".join(f"{f.name}-{getattr(self, f.name)}" for f in dataclasses.fields(self))
        return hashlib.sha256(text.encode()).hexdigest()


def _triton_dir() -> str:
    import triton

    return os.path.dirname(triton.__file__)


def find_triton_shared_opt() -> str:
    """The path of ``triton-shared-opt``; raises ``TritonSharedOptNotFound`` naming every
    place looked (``TRITON_SHARED_OPT_PATH``, ``PATH``, next to the triton package)."""
    from triton_npu._loader import native

    found = native().find_triton_shared_opt(_triton_dir())
    if found["path"] is None:
        raise TritonSharedOptNotFound(found["error"])
    return found["path"]


@functools.cache
def _toolchain_fingerprint() -> str:
    """Versions of the tools this backend runs, for Triton's cache key. Missing tools are
    part of the fingerprint too (so installing one invalidates stale entries)."""
    try:
        from triton_npu._loader import native

        return native().toolchain_fingerprint(_triton_dir())
    except Exception as e:  # noqa: BLE001 - hash() must not fail; the stage reports errors
        return f"unavailable:{type(e).__name__}"


def _open_runtime_ahead() -> None:
    """Has the active NPU driver start opening its runtime (see
    ``NPUDriver.open_runtime_ahead``); nothing when the active driver is not ours."""
    try:
        from triton.runtime import driver

        from triton_npu.backend.driver import NPUDriver

        active = driver.active
    except Exception:  # noqa: BLE001 - only an optimisation: the launch opens the runtime
        return
    if isinstance(active, NPUDriver):
        active.open_runtime_ahead()


class NPUBackend(BaseBackend):
    binary_ext = "ttsharedir"

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "npu"

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)

    def hash(self) -> str:
        from triton_npu import __version__

        # Triton asks for this at the start of every compile: the process is about to launch
        # an NPU kernel, so its runtime can start opening now, alongside the compile. (Not when
        # the driver is created: a process may create it and then fork workers, and the NPU
        # runtimes cannot be shared across fork.)
        _open_runtime_ahead()
        return f"triton-npu-{__version__}-codegen{CODEGEN_VERSION}-{_toolchain_fingerprint()}"

    def parse_options(self, opts: dict) -> NPUOptions:
        names = {f.name for f in dataclasses.fields(NPUOptions)}
        args: dict[str, Any] = {k: v for k, v in opts.items() if k in names and v is not None}
        args["arch"] = str(self.target.arch)
        for key in ("extern_libs", "supported_fp8_dtypes", "allowed_dot_input_precisions"):
            if key in args and not isinstance(args[key], tuple):
                value = args[key]
                args[key] = tuple(value.items()) if isinstance(value, dict) else tuple(value)
        return NPUOptions(**args)

    def pack_metadata(self, metadata: Any) -> tuple:
        # Upstream's layout: the driver reads the kernel name as element 6.
        return (
            metadata.num_warps,
            metadata.num_ctas,
            metadata.shared,
            1,
            1,
            1,
            metadata.name,
        )

    def get_codegen_implementation(self, options: NPUOptions) -> dict:
        return {"min_dot_size": lambda lhs_type, rhs_type: (1, 1, 1)}

    def get_module_map(self) -> dict:
        return {}

    def load_dialects(self, ctx: Any) -> None:
        return None

    @staticmethod
    def make_ttir(mod: Any, metadata: dict, options: NPUOptions) -> Any:
        pm = ir.pass_manager(mod.context)
        pm.enable_debug()
        passes.common.add_inliner(pm)
        passes.ttir.add_rewrite_tensor_descriptor_to_pointer(pm)
        passes.common.add_canonicalizer(pm)
        passes.ttir.add_combine(pm)
        passes.ttir.add_reorder_broadcast(pm)
        passes.common.add_cse(pm)
        passes.ttir.add_triton_licm(pm)
        passes.common.add_symbol_dce(pm)
        passes.ttir.add_loop_unroll(pm)
        passes.common.add_cse(pm)
        pm.run(mod, "make_ttir")
        return mod

    @staticmethod
    def make_ttsharedir(mod: Any, metadata: dict, options: NPUOptions) -> bytes:
        tool = find_triton_shared_opt()
        from triton_npu._loader import native

        try:
            kernel = mod.get_entry_func_name()
        except Exception:  # noqa: BLE001 - only names the work directory and progress line
            kernel = "kernel"
        # Runs like every compile tool: timeout, process group, Ctrl-C (KeyboardInterrupt).
        text = native().triton_to_linalg(tool, str(mod), kernel)
        try:
            metadata["name"] = native().kernel_name(text.decode("utf-8", "replace"))
        except ValueError as e:
            raise CompileError(f"cannot name the kernel in triton-shared-opt's output: {e}") from e
        metadata["shared"] = 0
        return text

    def add_stages(self, stages: dict, options: NPUOptions, language: Language) -> None:
        if language != Language.TRITON:
            raise NotImplementedError("the NPU backend compiles @triton.jit kernels only")
        stages["ttir"] = lambda src, metadata: self.make_ttir(src, metadata, options)
        stages["ttsharedir"] = lambda src, metadata: self.make_ttsharedir(src, metadata, options)
