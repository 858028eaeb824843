"""Launch inputs the NPU cannot take are refused before dispatch, naming the argument.

Memory a tensor's ``data_ptr()`` points at that is not mapped (or not readable) would crash the
process at the first read; it is refused, as inputs and as outputs, for objects that own their
memory and for bare pointer objects.

A kernel's outputs are written back into the caller's memory after the device ran: memory that
is read-only (a NumPy array with ``writeable=False``, memory mapped read-only behind an object
that claims to be writable) would crash the process at that point, and a ``SharedBuffer`` whose
array was resized points at freed memory. Each case runs @triton.jit kernels in its own process
(the runtime is one per process), on both runtimes; the process must survive every case.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import harness_env

# The kernel and imports every script here starts with.
HEADER = textwrap.dedent(
    """
    import ctypes, json, mmap, sys, warnings
    import numpy as np
    import torch
    import triton
    import triton.language as tl
    from triton_npu import NPUDriver, shared
    from triton_npu.errors import NPUInputError
    from triton_npu.multilaunch import NPUChain

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    N = 4096
    """
)

# Launches add_kernel under the runtime of argv[1]; attempt() records what happened.
LAUNCHES = HEADER + textwrap.dedent(
    """
    triton.runtime.driver.set_active(NPUDriver(sys.argv[1]))
    results = {}

    def attempt(name, x, y, out):
        try:
            add_kernel[(N // 1024,)](x, y, out, N, BLOCK=1024)
        except Exception as e:
            results[name] = {"error": type(e).__name__, "input_error": isinstance(e, NPUInputError),
                             "message": str(e)}
        else:
            results[name] = {"error": None}
    """
)

SCRIPT = LAUNCHES + textwrap.dedent(
    """

    x = torch.arange(N, dtype=torch.float32)
    y = torch.full((N,), 2.0)

    # A NumPy output marked read-only after its SharedBuffer was made.
    out_array = np.zeros(N, np.float32)
    out = shared.from_numpy(out_array)
    out_array.flags.writeable = False
    attempt("numpy_read_only_output", x, y, out)
    results["numpy_read_only_output"]["untouched"] = bool((out_array == 0).all())

    # Read-only inputs are fine: the kernel only reads them.
    xs = np.arange(N, dtype=np.float32)
    x_ro = shared.from_numpy(xs)
    xs.flags.writeable = False
    good = shared.zeros(N, device=f"{sys.argv[1]}:0")
    attempt("numpy_read_only_input", x_ro, y, good)
    results["numpy_read_only_input"]["right"] = bool((good.numpy() == xs + 2.0).all())

    # A file mapped read-only: torch.frombuffer accepts it (with a warning) as a writable
    # tensor; NumPy marks it read-only.
    path = sys.argv[2]
    with open(path, "wb") as f:
        f.write(np.full(N, 5.0, np.float32).tobytes())
    fd = open(path, "rb")
    mapped = mmap.mmap(fd.fileno(), 0, access=mmap.ACCESS_READ)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mapped_tensor = torch.frombuffer(mapped, dtype=torch.float32)
    attempt("mmap_read_only_tensor_output", x, y, mapped_tensor)
    results["mmap_read_only_tensor_output"]["untouched"] = bool((mapped_tensor == 5.0).all())
    attempt("mmap_read_only_numpy_output", x, y, shared.SharedBuffer._over(np.frombuffer(mapped, np.float32)))
    # An array that claims to be writable over the same read-only pages.
    address = np.frombuffer(mapped, np.float32).__array_interface__["data"][0]
    claimed = np.ctypeslib.as_array((ctypes.c_float * N).from_address(address))
    attempt("mmap_claimed_writable_output", x, y, shared.from_numpy(claimed))
    # As an input, read-only mapped memory is fine.
    out2 = torch.zeros(N)
    attempt("mmap_read_only_input", mapped_tensor, y, out2)
    results["mmap_read_only_input"]["right"] = bool(torch.equal(out2, mapped_tensor + y))

    # A SharedBuffer whose array was resized (its memory moved or freed), directly and through
    # a view of the array.
    owner = np.zeros(N, np.float32)
    dangling = shared.from_numpy(owner)
    owner.resize(16 * N, refcheck=False)
    attempt("dangling_shared_buffer", x, y, dangling)
    base = np.zeros(N, np.float32)
    view_buffer = shared.from_numpy(base[:])
    base.resize(16 * N, refcheck=False)
    attempt("dangling_view", x, y, view_buffer)
    attempt("dangling_input", view_buffer, y, torch.zeros(N))

    # After all that, a good launch still computes.
    out3 = torch.zeros(N)
    attempt("good_after", x, y, out3)
    results["good_after"]["right"] = bool(torch.equal(out3, x + y))
    print(json.dumps(results))
    """
)


def run(runtime: str, tmp_path: Path, source: str = SCRIPT, name: str = "inputs.py") -> dict:
    script = tmp_path / name  # Triton reads a @jit function's source: a file
    script.write_text(source)
    proc = subprocess.run(
        [sys.executable, str(script), runtime, str(tmp_path / "mapped.bin")],
        capture_output=True,
        text=True,
        env=harness_env(tmp_path),
        timeout=600,
    )
    assert proc.returncode == 0, (
        f"the process died (status {proc.returncode})\nstdout:\n{proc.stdout}\n"
        f"stderr:\n{proc.stderr[-4000:]}"
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def refused(result: dict, *words: str) -> None:
    assert result["error"] == "NPUInputError" and result["input_error"], result
    for word in words:
        assert word in result["message"], (word, result["message"])


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_read_only_outputs_and_dangling_buffers_are_refused(runtime: str, tmp_path: Path):
    r = run(runtime, tmp_path)
    # Declared read-only: named, nothing written.
    refused(r["numpy_read_only_output"], "argument 2 (out_ptr) of add_kernel", "read-only")
    assert r["numpy_read_only_output"]["untouched"]
    refused(r["mmap_read_only_numpy_output"], "out_ptr", "read-only")
    # Claimed writable, mapped read-only: found by probing the pages, not by a crash.
    refused(r["mmap_read_only_tensor_output"], "out_ptr", "mapped read-only")
    assert r["mmap_read_only_tensor_output"]["untouched"]
    refused(r["mmap_claimed_writable_output"], "out_ptr", "mapped read-only")
    # Only outputs must be writable.
    assert r["numpy_read_only_input"] == {"error": None, "right": True}
    assert r["mmap_read_only_input"] == {"error": None, "right": True}
    # Dangling SharedBuffers, as outputs and as inputs.
    for case in ("dangling_shared_buffer", "dangling_view", "dangling_input"):
        refused(r[case], "dangling", "resized")
    assert r["good_after"] == {"error": None, "right": True}


CHAIN = HEADER + textwrap.dedent(
    """
    t = torch.empty(N)
    chain = NPUChain("add_add", runtime=sys.argv[1])
    chain.add(add_kernel, (4,), {0: 0, 1: 1, 2: 2}, args=(t, t, t, N), constexprs={"BLOCK": 1024})
    chain.add(add_kernel, (4,), {0: 2, 1: 1, 2: 3}, args=(t, t, t, N), constexprs={"BLOCK": 1024})
    x = np.ones(N, np.float32)
    with open(sys.argv[2], "wb") as f:
        f.write(bytes(4 * N))
    file = open(sys.argv[2], "rb")
    mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    address = np.frombuffer(mapped, np.float32).__array_interface__["data"][0]
    claimed = np.ctypeslib.as_array((ctypes.c_float * N).from_address(address))
    results = {}
    try:
        # Bound in place of the runner's own buffer: the device's result is written into it.
        chain.run([x, x, np.zeros(N, np.float32), None], bo_key="bound", bound_buffers={3: claimed})
        results["bound_read_only"] = {"error": None}
    except Exception as e:
        results["bound_read_only"] = {"error": type(e).__name__, "message": str(e)}
    out = chain.run([x, x, np.zeros(N, np.float32), np.zeros(N, np.float32)])[3]
    results["good"] = {"right": bool((out == 3.0).all())}
    print(json.dumps(results))
    """
)


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_a_chain_output_in_read_only_memory_is_refused(runtime: str, tmp_path: Path):
    r = run(runtime, tmp_path, CHAIN, "chain.py")
    bad = r["bound_read_only"]
    assert bad["error"] == "NPUInputError", r
    assert "argument 3" in bad["message"] and "mapped read-only" in bad["message"], r
    assert r["good"] == {"right": True}, r


UNMAPPED = LAUNCHES + textwrap.dedent(
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    PROT_NONE, PROT_RW, MAP_PRIVATE_ANON = 0, 3, 0x22
    size = 4 * N

    def mapping(prot):
        address = libc.mmap(None, size, prot, MAP_PRIVATE_ANON, -1, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        return address

    def tensor_at(address):
        # Makes the tensor without touching its memory.
        return torch.from_numpy(np.ctypeslib.as_array((ctypes.c_float * N).from_address(address)))

    class Pointer:
        # What a ctypes-made pointer handed to a launch looks like: only its word.
        def __init__(self, address):
            self.address, self.dtype, self.shape = address, torch.float32, (N,)
        def data_ptr(self):
            return self.address

    x = torch.arange(N, dtype=torch.float32)
    y = torch.full((N,), 2.0)
    out = torch.zeros(N)
    # The same tensors launched before and after: a probe remembered for them stays right.
    attempt("good_before", x, y, out)

    # A tensor over memory that was unmapped after the tensor was made.
    gone = mapping(PROT_RW)
    unmapped = tensor_at(gone)
    assert libc.munmap(gone, size) == 0
    attempt("unmapped_first_input", unmapped, y, out)
    attempt("unmapped_second_input", x, unmapped, out)
    attempt("unmapped_output", x, y, unmapped)
    attempt("unmapped_pointer_object", Pointer(gone), y, out)
    # Mapped, but not readable.
    guarded = mapping(PROT_NONE)
    attempt("inaccessible_input", x, tensor_at(guarded), out)

    # A tensor that was sound at its first launch and whose memory then went: a new object
    # over the same address is probed again.
    moving = mapping(PROT_RW)
    sound = tensor_at(moving)
    sound.fill_(1.0)
    attempt("sound_first", sound, y, out)
    results["sound_first"]["right"] = bool(torch.equal(out, sound + y))
    del sound
    assert libc.munmap(moving, size) == 0
    attempt("same_address_after_unmap", tensor_at(moving), y, out)

    out.zero_()
    attempt("good_after", x, y, out)
    results["good_after"]["right"] = bool(torch.equal(out, x + y))
    print(json.dumps(results))
    """
)


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_inputs_in_unmapped_memory_are_refused_not_a_crash(runtime: str, tmp_path: Path):
    r = run(runtime, tmp_path, UNMAPPED, "unmapped.py")
    assert r["good_before"] == {"error": None}, r
    refused(r["unmapped_first_input"], "argument 0 (x_ptr) of add_kernel", "not mapped")
    refused(r["unmapped_second_input"], "argument 1 (y_ptr) of add_kernel", "not mapped")
    refused(r["unmapped_output"], "argument 2 (out_ptr) of add_kernel", "not mapped")
    refused(r["unmapped_pointer_object"], "argument 0 (x_ptr)", "not mapped")
    refused(r["inaccessible_input"], "argument 1 (y_ptr)", "cannot be read")
    assert r["sound_first"] == {"error": None, "right": True}, r
    refused(r["same_address_after_unmap"], "argument 0 (x_ptr)", "not mapped")
    assert r["good_after"] == {"error": None, "right": True}, r
