"""Prebuilt designs from Python (`triton_npu.prebuilt`, issue 15 item 10): a full-ELF hsaco
with a `scratch-pad-ctrl` relocation, loaded with its external variable, the variable changed
with a plain store before each dispatch. The design is `tests/fixtures/prebuilt/`
(`out = a + scratch-pad-ctrl` over 256 f32), built by the HSA agent's test builders."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import REPO, harness_env

FIXTURE = REPO / "tests" / "fixtures" / "prebuilt" / "scratchpad_add.hsaco"


def run(body: str, env: dict, tmp_path: Path) -> dict:
    script = tmp_path / "prebuilt_script.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            import numpy as np
            from triton_npu import prebuilt, shared, errors
            FIXTURE = sys.argv[1]
            N = 256
            """
        )
        + textwrap.dedent(body)
    )
    proc = subprocess.run(
        [sys.executable, str(script), str(FIXTURE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_plain_store_before_each_dispatch_is_what_each_dispatch_reads(tmp_path: Path):
    result = run(
        """
        k = prebuilt.load(FIXTURE, "main:sequence", {"scratch-pad-ctrl": 4 * N})
        out = {"name": k.name, "runtime": k.runtime, "variables": k.variables}
        params = k.variable("scratch-pad-ctrl").view(np.float32)
        out["variable_shape"] = list(params.shape)
        a = shared.zeros(N, device=f"{k.runtime}:0"); a.numpy()[:] = np.arange(N, dtype=np.float32)
        results = []
        for step in range(5):
            value = 1000.0 * step + 0.5
            params[:] = value  # a plain store; no flush, no call into the runtime
            y = np.zeros(N, np.float32)
            k(a, shared.from_numpy(y))
            assert np.array_equal(y, np.arange(N, dtype=np.float32) + value), (step, y[:4])
            results.append(float(y[0]))
        out["first_elements"] = results

        # from bytes, too; a missing variable is a clear error
        k2 = prebuilt.load(open(FIXTURE, "rb").read(), "main:sequence", {"scratch-pad-ctrl": 4 * N})
        try:
            k2.variable("nope")
        except KeyError as e:
            out["missing"] = str(e)
        try:
            prebuilt.load(FIXTURE, "main:sequence", {})
        except errors.NPUError as e:
            out["undefined"] = type(e).__name__ + ": " + str(e)
        k.release()
        try:
            k(a, a)
        except ValueError as e:
            out["released"] = str(e)
        # the variable view keeps the design loaded
        params[:] = 1.0
        print(json.dumps(out))
        """,
        harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME="hsa", AMD_TRITON_NPU_TARGET="npu2"),
        tmp_path,
    )
    assert result["name"] == "main:sequence"
    assert result["runtime"] == "hsa"
    assert result["variables"] == {"scratch-pad-ctrl": 1024}
    assert result["variable_shape"] == [256]
    assert result["first_elements"] == [0.5, 1000.5, 2000.5, 3000.5, 4000.5]
    assert "no external variable 'nope'" in result["missing"] or "nope" in result["missing"]
    assert "external variable" in result["undefined"], result["undefined"]
    assert "released" in result["released"]


def test_under_xrt_a_prebuilt_hsaco_is_a_clear_error(tmp_path: Path):
    result = run(
        """
        try:
            prebuilt.load(FIXTURE, "main:sequence", {"scratch-pad-ctrl": 4 * N})
        except errors.NPUError as e:
            print(json.dumps({"error": type(e).__name__, "message": str(e)}))
        """,
        harness_env(tmp_path, AMD_TRITON_NPU_RUNTIME="xrt", AMD_TRITON_NPU_TARGET="npu2"),
        tmp_path,
    )
    assert "AMD_TRITON_NPU_RUNTIME" in result["message"] or "hsaco" in result["message"], result
