"""Trial: bad launch inputs.

Launches a kernel with each of a list of bad inputs in one process (wrong types, None, wrong
argument counts, empty, non-contiguous, read-only outputs, outputs in memory mapped read-only,
dangling SharedBuffers, bad grids, wrong dtypes' sizes...). PASS when every one raises a
Python exception (no crash, no hang) and a good launch afterwards still computes right.
Usage: bad_inputs.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from common import harness_env, last_json, python, report, script, work_dir

BODY = """
import ctypes, mmap, tempfile, warnings
import numpy as np
from triton_npu import shared

x, y, out = torch.randn(N), torch.randn(N), torch.zeros(N)
add_kernel[(4,)](x, y, out, N, BLOCK=1024)

def ro_numpy():
    a = np.zeros(N, np.float32); b = shared.from_numpy(a); a.flags.writeable = False
    return b

def mapped_tensor():
    f = tempfile.TemporaryFile(); f.write(bytes(4 * N)); f.flush()
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.frombuffer(m, dtype=torch.float32)

def claimed_writable():
    f = tempfile.TemporaryFile(); f.write(bytes(4 * N)); f.flush()
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    address = np.frombuffer(m, np.float32).__array_interface__["data"][0]
    claimed = np.ctypeslib.as_array((ctypes.c_float * N).from_address(address))
    return shared.from_numpy(claimed), m

def dangling():
    a = np.zeros(N, np.float32); b = shared.from_numpy(a); a.resize(8 * N, refcheck=False)
    return b

keep = []
def mapped_claimed():
    b, m = claimed_writable(); keep.append(m); return b

def launch(a=None, b=None, c=None, grid=(4,), block=1024):
    a = x if a is None else a
    b = y if b is None else b
    c = out if c is None else c
    add_kernel[grid](a, b, c, N, BLOCK=block)

class FakeTensor:
    dtype = torch.float32
    def data_ptr(self):
        return 0

CASES = {
    "none_output": lambda: add_kernel[(4,)](x, y, None, N, BLOCK=1024),
    "int_output": lambda: launch(c=7),
    "string_input": lambda: launch(a="x"),
    "list_input": lambda: launch(a=[1.0] * N),
    "numpy_plain": lambda: launch(a=np.zeros(N, np.float32)),
    "too_few_args": lambda: add_kernel[(4,)](x, y, N, BLOCK=1024),
    "too_many_args": lambda: add_kernel[(4,)](x, y, out, out, N, BLOCK=1024),
    "missing_constexpr": lambda: add_kernel[(4,)](x, y, out, N),
    "empty_output": lambda: launch(c=torch.zeros(0)),
    "non_contiguous": lambda: launch(a=torch.randn(2 * N)[::2]),
    "transposed": lambda: launch(a=torch.randn(64, 64).t()),
    "read_only_numpy_output": lambda: launch(c=ro_numpy()),
    "mapped_read_only_tensor_output": lambda: launch(c=mapped_tensor()),
    "mapped_claimed_writable_output": lambda: launch(c=mapped_claimed()),
    "dangling_output": lambda: launch(c=dangling()),
    "dangling_input": lambda: launch(a=dangling()),
    "negative_grid": lambda: launch(grid=(-1,)),
    "huge_grid": lambda: launch(grid=(2**40,)),
    "float_grid": lambda: launch(grid=(4.5,)),
    "bad_block": lambda: launch(block=1000),
    "short_output": lambda: launch(c=torch.zeros(16)),
    "short_input": lambda: launch(a=torch.zeros(16)),
    "null_data_ptr": lambda: launch(a=FakeTensor()),
}
raised = {}
accepted = []
for name, case in CASES.items():
    try:
        case()
    except Exception as e:
        raised[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    else:
        accepted.append(name)
good = add(1024)
print(json.dumps({"cases": len(CASES), "raised": raised, "accepted": accepted, "good_after": good}))
"""


def main() -> bool:
    start = time.monotonic()
    with work_dir("bad-inputs") as w:
        work = Path(w)
        p = python(script(work, BODY), harness_env(work))
        out, err = p.communicate(timeout=900)
        result = last_json(out)
    if p.returncode != 0 or result is None:
        return report(
            "bad_inputs",
            False,
            f"the process died (status {p.returncode}): {err.strip()[-400:]}",
            time.monotonic() - start,
        )
    # Inputs the launcher cannot check (an address it is given) may pass: listed, not failed,
    # unless they are memory-safety cases the driver must catch.
    must_raise = set(result["raised"]) | set(result["accepted"])
    # A buffer shorter than the kernel's accesses cannot be told from a legal one without the
    # kernel's bounds (the NPU copies in/out the bytes the tensor has): listed, not failed.
    must_raise -= {"short_output", "short_input"}
    missed = sorted(must_raise & set(result["accepted"]))
    ok = not missed and result["good_after"]
    numbers = (
        f"{result['cases']} bad inputs: {len(result['raised'])} raised, accepted "
        f"{result['accepted'] or 'none'}, process survived, good launch after: "
        f"{result['good_after']}" + (f"; must have raised: {missed}" if missed else "")
    )
    for name, why in sorted(result["raised"].items()):
        print(f"  {name}: {why}")
    return report("bad_inputs", ok, numbers, time.monotonic() - start)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
