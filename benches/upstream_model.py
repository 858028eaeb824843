"""Builds and loads the benchmark's model of upstream's generated C++ launcher
(benches/upstream_launcher/), so `make bench` can time it next to ours against the same no-op
device libraries.

Upstream (amd/Triton-XDNA) generates one CPython extension module per kernel signature and
compiles it with g++ when a kernel is first launched: under HSA a thin module (hsa_launcher.py
and include/npu_dispatch_common.h at 7c7c41819413e63602fcdeedde831c860b8d6d61) over a shared
runtime library (include/HsaRuntime/HsaRuntime.cpp, same commit); under XRT on npu2 the ELF
launcher with a persistent session (driver.py at 5ef1c00da1bb6c1fc363545466915fe5fa940500).
The model is our own C++ that makes the same calls per launch; the comments at the top of
launcher.cpp and hsa_runtime.cpp say what it follows and where it departs. It is built with
upstream's flags (the module: `-std=c++23 -shared -fPIC -Wall`, no optimisation flag; the HSA
runtime: `-O2 -pthread`, DT_RPATH to the ROCr found), against Debian's HSA headers and the
AIE extension header in the ROCr prefix (HSA) or Debian's libxrt-dev headers (XRT), and linked
to the no-op device libraries the benchmark builds from benches/noop/ (noop_libs.py) and lays
out as installed runtimes. Without `-lpythonX.Y` (upstream links it; an
extension module gets Python's symbols from the interpreter, and linking a second libpython
into a process whose Python is static would break it).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = REPO / "benches" / "upstream_launcher"
DEBIAN = REPO / "third_party" / "debian"
FOLLOWS = {
    "hsa": "amd/Triton-XDNA@7c7c418 hsa_launcher.py + include/npu_dispatch_common.h + "
    "include/HsaRuntime/HsaRuntime.cpp (packet in the kernel-object form of PR #158)",
    "xrt": "amd/Triton-XDNA@5ef1c00 driver.py _generate_elf_launcher (npu2, persistent session)",
}


def compiler_name() -> str:
    return os.environ.get("CXX", "g++")


def compiler() -> str | None:
    return shutil.which(compiler_name())


def python_include() -> Path:
    return Path(sysconfig.get_paths()["include"])


def headers(runtime: str) -> Path:
    """The runtime's API headers: Debian's packages, fetched the way crates/hsa-sys and the
    harness's XRT stand-in get them (third_party/fetch-debian-headers.sh)."""
    package = "libhsa-runtime-dev" if runtime == "hsa" else "libxrt-dev"
    include = DEBIAN / package / "usr" / "include"
    marker = include / ("hsa/hsa.h" if runtime == "hsa" else "xrt/xrt_bo.h")
    if not marker.is_file():
        subprocess.run(
            [str(REPO / "third_party" / "fetch-debian-headers.sh"), package],
            check=True,
            capture_output=True,
            text=True,
        )
    return include


def missing(runtime: str) -> str | None:
    """Why the model cannot be built here, or None."""
    if compiler() is None:
        return f"no C++ compiler ({compiler_name()} not found; CXX names another)"
    if not (python_include() / "Python.h").is_file():
        return f"no Python headers ({python_include()}/Python.h)"
    try:
        headers(runtime)
    except subprocess.CalledProcessError as e:
        return f"{runtime} headers could not be fetched: {e.stderr.strip()[-300:]}"
    return None


def _compile(args: list[str], output: Path) -> Path:
    output.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([compiler(), *args, "-o", str(output)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building {output.name} failed:\n{proc.stderr[-4000:]}")
    return output


def _hsa_runtime(rocr: Path, out: Path) -> Path:
    """The model of upstream's libtriton_npu_hsa.so, linked to the ROCr under `rocr`."""
    lib = out / "libmodel_triton_npu_hsa.so"
    if lib.exists():
        return lib
    rocr_lib = rocr / "lib"
    args = ["-std=c++23", "-shared", "-fPIC", "-O2", "-pthread", str(SOURCES / "hsa_runtime.cpp")]
    args += [f"-I{SOURCES}", f"-I{rocr / 'include'}", f"-I{headers('hsa')}"]
    args += [f"-L{rocr_lib}", f"-Wl,-rpath,{rocr_lib}", "-Wl,--disable-new-dtags"]
    return _compile([*args, "-lhsa-runtime64"], lib)


def build(runtime: str, tensors: int, trailing: int, device: Path, out: Path) -> Path:
    """The launcher module for a kernel with `tensors` pointer arguments followed by `trailing`
    constexpr ones. `device` is the ROCr prefix (hsa) or XRT prefix (xrt) to link against."""
    module = out / f"{runtime}_{tensors}_{trailing}" / "__npu_dispatch.so"
    if module.exists():
        return module
    args = ["-std=c++23", str(SOURCES / "launcher.cpp"), f"-I{python_include()}", f"-I{SOURCES}"]
    args += ["-shared", "-fPIC", "-Wall", f"-DMODEL_TENSORS={tensors}"]
    args += [f"-DMODEL_TRAILING={trailing}"]
    if runtime == "hsa":
        rt = _hsa_runtime(device, out)
        args += ["-DMODEL_HSA", f"-L{rt.parent}", f"-Wl,-rpath,{rt.parent}"]
        args += ["-lmodel_triton_npu_hsa", "-lstdc++"]
    else:
        lib = device / "lib"
        # Upstream finds libxrt_coreutil through the system's library path (/opt/xilinx/xrt);
        # the no-op prefix is not on it, hence the rpath.
        args += ["-DMODEL_XRT", f"-isystem{headers('xrt')}", f"-L{lib}", f"-Wl,-rpath,{lib}"]
        args += ["-l:libxrt_coreutil.so.2", "-luuid", "-lrt", "-lstdc++"]
    return _compile(args, module)


def load(path: Path):
    """Loads a built module as upstream's driver does (by file, under its fixed name)."""
    spec = importlib.util.spec_from_file_location("__npu_dispatch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def artifacts(runtime: str, cache_dir: str) -> tuple[str, str]:
    """What upstream's set_paths gets for a kernel in our cache entry: the hsaco (hsa) or ELF
    (xrt) and the kernel's name in it."""
    entry = Path(cache_dir)
    name = (entry / "elf_kernel_name.txt").read_text().strip()
    artifact = entry / ("kernel.hsaco" if runtime == "hsa" else "aie.elf")
    return str(artifact), name
