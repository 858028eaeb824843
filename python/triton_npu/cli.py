"""The ``triton-npu`` console script: runs the Rust command line in this process."""

from __future__ import annotations

import os
import site
import sys


def _python_facts() -> dict:
    facts: dict = {"executable": sys.executable, "version": sys.version.split()[0]}
    try:
        import triton

        facts["triton_version"] = triton.__version__
        facts["triton_dir"] = os.path.dirname(triton.__file__)
    except Exception as e:  # noqa: BLE001 - any import failure is a fact to report
        facts["triton_error"] = f"{type(e).__name__}: {e}"
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user:
        dirs.append(user)
    facts["site_packages"] = dirs
    return facts


def main(argv: list[str] | None = None) -> int:
    from triton_npu._loader import native

    args = ["triton-npu", *(sys.argv[1:] if argv is None else argv)]
    return native().cli_main(args, _python_facts())


if __name__ == "__main__":
    sys.exit(main())
