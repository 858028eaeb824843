"""Facts about this Python installation that the Rust core cannot learn by itself."""

from __future__ import annotations

import functools
import importlib.util
import os
import site
import sys


def _site_packages() -> list[str]:
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user:
        dirs.append(user)
    return dirs


def _triton_facts(import_triton: bool) -> dict:
    """Where triton is and its version. Without ``import_triton`` (and when no one imported it
    yet), it is located without running it: importing triton takes ~200 ms, which commands
    such as ``triton-npu hsaco dump`` must not pay. With it, an import failure is reported."""
    if import_triton or "triton" in sys.modules:
        try:
            import triton

            return {
                "triton_version": triton.__version__,
                "triton_dir": [os.path.dirname(triton.__file__)],
            }
        except Exception as e:  # noqa: BLE001 - any import failure is a fact to report
            return {"triton_dir": [], "triton_error": f"{type(e).__name__}: {e}"}
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError) as e:
        return {"triton_dir": [], "triton_error": f"{type(e).__name__}: {e}"}
    if spec is None or not spec.submodule_search_locations:
        return {"triton_dir": [], "triton_error": "ModuleNotFoundError: No module named 'triton'"}
    # The version is left out: only doctor reports it, and doctor imports triton.
    return {"triton_dir": [list(spec.submodule_search_locations)[0]]}


@functools.cache
def facts(import_triton: bool = False) -> dict:
    """Where pip installs tools and runtimes, the triton package, the directories that may
    hold our XRT shim, and the interpreter. Never raises: a broken triton is a fact too."""
    package = os.path.dirname(os.path.abspath(__file__))
    return {
        "executable": sys.executable,
        "version": sys.version.split()[0],
        "site_packages": _site_packages(),
        "shim_dirs": [os.path.join(package, "lib"), package],
        **_triton_facts(import_triton),
    }
