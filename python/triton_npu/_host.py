"""Facts about this Python installation that the Rust core cannot learn by itself."""

from __future__ import annotations

import functools
import os
import site
import sys


def _site_packages() -> list[str]:
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user:
        dirs.append(user)
    return dirs


@functools.cache
def facts() -> dict:
    """Where pip installs tools and runtimes, the triton package, the directories that may
    hold our XRT shim, and the interpreter. Never raises: a broken triton is a fact too."""
    package = os.path.dirname(os.path.abspath(__file__))
    out: dict = {
        "executable": sys.executable,
        "version": sys.version.split()[0],
        "site_packages": _site_packages(),
        "shim_dirs": [os.path.join(package, "lib"), package],
        "triton_dir": [],
    }
    try:
        import triton

        out["triton_version"] = triton.__version__
        out["triton_dir"] = [os.path.dirname(triton.__file__)]
    except Exception as e:  # noqa: BLE001 - any import failure is a fact to report
        out["triton_error"] = f"{type(e).__name__}: {e}"
    return out
