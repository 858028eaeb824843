"""Builds the no-op device libraries `make bench` times host overhead against (benches/noop/):
a ROCr (`libhsa-runtime64.so.1`) and an XRT (`libxrt_coreutil.so.2`) that do nothing but what
a launch needs to complete — no checks, locks, threads or system calls on the launch path, a
packet or run completing as soon as it is submitted, real host memory behind every buffer —
laid out as installed runtimes are, so a process selects them as a user selects an installed
ROCr or XRT:

    <out>/rocr/lib/libhsa-runtime64.so.1 (+ libhsa-runtime64.so)   AMD_NPU_ROCR_PATH=<out>/rocr
    <out>/rocr/include/hsa/hsa_ext_amd_aie.h    the AIE extension header discovery requires
    <out>/xrt/lib/libxrt_coreutil.so.2                              XILINX_XRT=<out>/xrt

Compiled with gcc/g++ (CC/CXX name others) `-O2 -shared -fPIC` against Debian's HSA and XRT
headers (fetched as upstream_model.py fetches them), and rebuilt only when a source, the
compiler or the flags change.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import upstream_model

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO / "benches" / "noop"
# The AIE extension header: ROCr discovery requires it in the prefix, and the model of
# upstream's HSA runtime includes it from there. The harness's own (tests only, our file).
AIE_HEADER = REPO / "tests" / "harness" / "hsa-agent" / "include" / "hsa" / "hsa_ext_amd_aie.h"
HSA_SONAME = "libhsa-runtime64.so.1"
XRT_SONAME = "libxrt_coreutil.so.2"


class NoCompiler(RuntimeError):
    """No C or C++ compiler to build the no-op libraries with."""


def compilers() -> tuple[str, str]:
    return os.environ.get("CC", "gcc"), upstream_model.compiler_name()


def missing() -> str | None:
    """Why the libraries cannot be built here (no compiler), or None."""
    absent = [name for name in compilers() if shutil.which(name) is None]
    if absent:
        return (
            f"no C/C++ compiler for the no-op device libraries ({' and '.join(absent)} not "
            "found; CC and CXX name others)"
        )
    return None


def _command(compiler: str, flags: list[str], source: Path, output: Path) -> list[str]:
    return [compiler, *flags, str(source), "-o", str(output)]


def _build_one(command: list[str], inputs: list[Path], output: Path, libs: list[str]) -> None:
    """Compiles `output` unless it was built from these inputs with this command; the new file
    replaces the old by rename, so a process that has the old one loaded keeps it."""
    digest = hashlib.sha256(json.dumps(command + libs).encode())
    for path in inputs:
        digest.update(path.read_bytes())
    stamp = output.with_name(f".{output.name}.sha256")
    if output.is_file() and stamp.is_file() and stamp.read_text() == digest.hexdigest():
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.tmp")
    command = [*command[:-1], str(partial), *libs]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building {output.name} failed:\n{proc.stderr[-4000:]}")
    partial.replace(output)
    stamp.write_text(digest.hexdigest())


def _hsa(out: Path, cc: str) -> Path:
    rocr = out / "rocr"
    include = rocr / "include" / "hsa"
    include.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(AIE_HEADER, include / AIE_HEADER.name)
    source = SOURCES / "noop_hsa.c"
    flags = ["-std=gnu11", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror"]
    flags += ["-fvisibility=hidden", f"-Wl,-soname,{HSA_SONAME}"]
    flags += [f"-I{upstream_model.headers('hsa')}", f"-I{rocr / 'include'}"]
    library = rocr / "lib" / HSA_SONAME
    _build_one(_command(cc, flags, source, library), [source, AIE_HEADER], library, [])
    link = rocr / "lib" / "libhsa-runtime64.so"
    if not link.is_symlink():
        link.unlink(missing_ok=True)
        link.symlink_to(HSA_SONAME)
    return rocr


def _xrt(out: Path, cxx: str) -> Path:
    xrt = out / "xrt"
    source = SOURCES / "noop_xrt.cpp"
    flags = ["-std=c++17", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror"]
    flags += [f"-isystem{upstream_model.headers('xrt')}", f"-Wl,-soname,{XRT_SONAME}"]
    library = xrt / "lib" / XRT_SONAME
    # xrt::uuid's inline members call libuuid.
    _build_one(_command(cxx, flags, source, library), [source], library, ["-luuid"])
    return xrt


def build(out_dir: Path | str) -> dict:
    """Builds (when needed) and lays out both no-op runtimes under `out_dir`; returns their
    prefixes and library files: `rocr`, `hsa_library`, `xrt`, `xrt_library`. Raises
    NoCompiler when there is no C/C++ compiler."""
    reason = missing()
    if reason is not None:
        raise NoCompiler(reason)
    out = Path(out_dir).resolve()
    cc, cxx = (shutil.which(name) for name in compilers())
    rocr = _hsa(out, cc)
    xrt = _xrt(out, cxx)
    return {
        "rocr": rocr,
        "hsa_library": rocr / "lib" / HSA_SONAME,
        "xrt": xrt,
        "xrt_library": xrt / "lib" / XRT_SONAME,
    }
