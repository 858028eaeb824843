"""Chains (``triton_npu.multilaunch``): several @triton.jit kernels stitched into one module,
compiled once and dispatched together, on the conformance harness under both runtimes.

Cases that dispatch run in their own process (one HSA runtime per process, configured from
the environment at first use, as in production).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import harness_env

PRELUDE = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import torch
    import triton
    import triton.language as tl
    from triton_npu import NPUDriver
    from triton_npu.multilaunch import MultiLaunchBuilder, MultiLaunchRunner, NPUChain

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=m), mask=m)

    @triton.jit
    def mul_kernel(x_ptr, y_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(out_ptr + offs, x * tl.load(y_ptr + offs, mask=m), mask=m)

    @triton.jit
    def relu_kernel(x_ptr, out_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)

    RUNTIME = sys.argv[1]
    N = 4096
    GRID = (N // 1024,)

    def add_mul_chain(name="add_mul"):
        # tmp = x + y; out = tmp * y   (x=0, y=1, tmp=2, out=3)
        t = torch.empty(N)
        chain = NPUChain(name, runtime=RUNTIME)
        chain.add(add_kernel, GRID, {0: 0, 1: 1, 2: 2}, args=(t, t, t, N),
                  constexprs={"BLOCK": 1024})
        chain.add(mul_kernel, GRID, {0: 2, 1: 1, 2: 3}, args=(t, t, t, N),
                  constexprs={"BLOCK": 1024})
        return chain

    def rand(seed):
        return np.random.default_rng(seed).standard_normal(N).astype(np.float32)
    """
)


def run_chain_script(body: str, runtime: str, env: dict, timeout: float = 600) -> dict:
    # Triton reads a @jit function's source, so the script must be a file.
    work = Path(env["AMD_TRITON_NPU_CACHE_DIR"]).parent
    work.mkdir(parents=True, exist_ok=True)
    script = work / f"chain_{len(list(work.glob('chain_*.py')))}.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    proc = subprocess.run(
        [sys.executable, str(script), runtime],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tool_runs(log: Path, tool: str) -> list[list[str]]:
    if not log.is_file():
        return []
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    return [
        r["argv"]
        for r in runs
        if r["tool"] == tool and "argv" in r and r["argv"][1:] != ["--version"]
    ]


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_two_kernel_chain_compiles_once_and_computes(runtime: str, tmp_path: Path):
    log = tmp_path / "tools.jsonl"
    result = run_chain_script(
        """
        driver = NPUDriver(RUNTIME)
        triton.runtime.driver.set_active(driver)
        chain = add_mul_chain()
        x, y = rand(1), rand(2)
        tmp = np.full(N, 7.0, np.float32)          # a placeholder: never written, never read
        out = np.zeros(N, np.float32)
        res = chain.run([x, y, tmp, out], intermediate_indices={2}, output_indices={3})
        assert sorted(res) == [3], sorted(res)
        np.testing.assert_allclose(res[3], (x + y) * y, rtol=1e-6)
        assert np.all(tmp == 7.0), "an intermediate was copied back"
        assert np.all(out == 0.0), "the caller's output array is not written; a new one is returned"
        first = dict(chain.last_dispatch)
        # The capture restored the caller's active driver exactly.
        assert triton.runtime.driver._active is driver

        # Second run, new x, same buffer set: the loaded chain is reused.
        x2 = rand(3)
        res2 = chain.run([x2, y, tmp, out], intermediate_indices={2}, output_indices={3})
        np.testing.assert_allclose(res2[3], (x2 + y) * y, rtol=1e-6)

        # y static: written on the first run of a bo_key only, so a changed host y is ignored.
        res3 = chain.run([x, y, tmp, out], bo_key="static", static_indices={1},
                         intermediate_indices={2})
        res4 = chain.run([x, y * 0 + 1, tmp, out], bo_key="static", static_indices={1},
                         intermediate_indices={2})
        np.testing.assert_allclose(res4[3], res3[3])
        np.testing.assert_allclose(res3[3], (x + y) * y, rtol=1e-6)

        # torch tensors in, torch tensors out.
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        res5 = chain.run([tx, ty, torch.empty(N), torch.empty(N)], bo_key="torch",
                         intermediate_indices={2})
        assert isinstance(res5[3], torch.Tensor)
        torch.testing.assert_close(res5[3], (tx + ty) * ty)

        # A second chain object with the same ops finds the compiled chain in the cache.
        again = add_mul_chain()
        res6 = again.run([x, y, tmp, out], intermediate_indices={2})
        np.testing.assert_allclose(res6[3], (x + y) * y, rtol=1e-6)
        module = open(os.path.join(chain.cache_dir, "multilaunch.mlir")).read()
        print(json.dumps({
            "first": first,
            "files": sorted(os.listdir(chain.cache_dir)),
            "same_entry": again.cache_dir == chain.cache_dir,
            "launches": module.count("air.launch ("),
        }))
        """,
        runtime,
        harness_env(tmp_path, NPU_HARNESS_LOG=str(log)),
    )
    # One dispatch over the combined buffers, all passed in place: nothing staged, so no
    # intermediate travels through host memory.
    assert result["first"]["in_place"] == 4 and result["first"]["staged"] == 0, result
    files = set(result["files"])
    assert {"aie.elf", "elf_kernel_name.txt", "multilaunch.mlir"} <= files, files
    assert ("kernel.hsaco" in files) == (runtime == "hsa"), files
    assert result["same_entry"] and result["launches"] == 2, result
    # Compiled once: one aircc for the whole chain (a full ELF), both ops lowered once each.
    airccs = tool_runs(log, "aircc")
    assert len(airccs) == 1, airccs
    assert (
        "--output-format" in airccs[0]
        and airccs[0][airccs[0].index("--output-format") + 1] == "elf"
    )
    assert "--device" in airccs[0] and airccs[0][airccs[0].index("--device") + 1] == "npu2"
    launches = [a for a in tool_runs(log, "air-opt") if any("loop-bounds" in x for x in a)]
    assert len(launches) == 2, launches


def test_a_warm_cache_runs_no_tool_in_a_new_process(tmp_path: Path):
    log = tmp_path / "tools.jsonl"
    env = harness_env(tmp_path, NPU_HARNESS_LOG=str(log))
    body = """
        before = triton.runtime.driver._active     # no driver selected by this script
        x, y = rand(1), rand(2)
        res = add_mul_chain().run([x, y, np.empty(N, np.float32), np.empty(N, np.float32)],
                                  intermediate_indices={2})
        np.testing.assert_allclose(res[3], (x + y) * y, rtol=1e-6)
        assert triton.runtime.driver._active is before, triton.runtime.driver._active
        print(json.dumps({}))
        """
    run_chain_script(body, "hsa", env)
    assert len(tool_runs(log, "aircc")) == 1
    cold = len(log.read_text().splitlines())
    run_chain_script(body, "hsa", env)
    warm = log.read_text().splitlines()[cold:]
    assert warm == [], f"a warm cache ran tools: {warm}"


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_bound_buffers_are_used_in_place(runtime: str, tmp_path: Path):
    result = run_chain_script(
        """
        from triton_npu import shared
        DEV = f"{RUNTIME}:0"
        chain = add_mul_chain()
        x, y = rand(1), rand(2)
        out = shared.zeros(N, dtype="float32", device=DEV)  # device-shared memory
        res = chain.run([x, y, np.empty(N, np.float32), None], intermediate_indices={2},
                        bound_buffers={3: out})
        assert res[3] is out
        np.testing.assert_allclose(out.numpy(), (x + y) * y, rtol=1e-6)
        shared_run = dict(chain.last_dispatch)
        plain = np.zeros(N, np.float32)                  # ordinary memory: staged by the runtime
        res = chain.run([x, y, np.empty(N, np.float32), None], bo_key="plain",
                        intermediate_indices={2}, bound_buffers={3: plain})
        np.testing.assert_allclose(plain, (x + y) * y, rtol=1e-6)
        plain_run = dict(chain.last_dispatch)
        # upstream's zero-copy call: every operand bound, by its buffer object under XRT (the
        # buffer itself under HSA), the host views passed as the inputs
        a, b = shared.from_tensor(x, device=DEV), shared.from_tensor(y, device=DEV)
        c = shared.empty(N, dtype="float32", device=DEV)
        handle = (lambda s: s.bo) if RUNTIME == "xrt" else (lambda s: s)
        chain.run([a.numpy(), b.numpy(), np.empty(N, np.float32), c.numpy()], bo_key="zero",
                  intermediate_indices={2}, output_indices={3},
                  bound_buffers={0: handle(a), 1: handle(b), 3: handle(c)})
        np.testing.assert_allclose(c.numpy(), (x + y) * y, rtol=1e-6)
        print(json.dumps({"shared": shared_run, "plain": plain_run,
                          "zero": chain.last_dispatch}))
        """,
        runtime,
        harness_env(tmp_path),
    )
    # Runtime-shared memory is passed in place like the chain's own buffers; ordinary memory
    # is staged by the runtime (and written back, being an output).
    assert (result["shared"]["in_place"], result["shared"]["staged"]) == (4, 0), result
    assert (result["plain"]["in_place"], result["plain"]["staged"]) == (3, 1), result
    assert (result["zero"]["in_place"], result["zero"]["staged"]) == (4, 0), result


def test_buffer_sets_is_answered_while_a_run_is_on_the_device(tmp_path: Path):
    # A run that logs from inside its dispatch (here: the timeout warning of a hung XRT run)
    # needs the GIL for Python's logging. Another thread asking for `buffer_sets` meanwhile
    # must neither hold the GIL while it waits for a Rust lock nor find the buffer sets locked
    # for the whole dispatch: either one deadlocked the process. It runs in a child with a
    # bounded wait, so a deadlock fails the test instead of hanging it.
    try:
        result = run_chain_script(
            """
            import ctypes, logging, threading, time
            t = torch.empty(N)
            capture = NPUChain("capture", runtime=RUNTIME)._capture
            builder = MultiLaunchBuilder("gil")
            builder.add_op(capture(add_kernel, GRID + (1, 1), (t, t, t, N), {"BLOCK": 1024}),
                           GRID, {0: 0, 1: 1, 2: 2})
            builder.add_op(capture(mul_kernel, GRID + (1, 1), (t, t, t, N), {"BLOCK": 1024}),
                           GRID, {0: 2, 1: 1, 2: 3})
            runner = MultiLaunchRunner(*builder.compile(), runtime=RUNTIME)
            x, y = rand(1), rand(2)
            ins = [x, y, np.empty(N, np.float32), np.empty(N, np.float32)]
            runner.run(ins, bo_key="k", intermediate_indices={2})

            xrt = ctypes.CDLL(os.environ["NPU_HARNESS_XRT_DEVICE_LIB"])
            def counter(index):                      # 7: runs started, 9: runs aborted
                stats = (ctypes.c_uint64 * 64)()     # room for any later counters
                assert xrt.npu_harness_xrt_stats(ctypes.byref(stats)) == 0
                return stats[index]

            logged = []
            class Keep(logging.Handler):
                def emit(self, record):
                    logged.append(record.getMessage())
            logging.getLogger("triton_npu").addHandler(Keep())

            os.environ["NPU_HARNESS_FAULT"] = "hang"  # runs never complete; the wait times out
            started, aborted = counter(7), counter(9)
            seen = {}
            def dispatch():
                out = np.empty(N, np.float32)
                try:
                    runner._native.run([a.view(np.uint8) for a in ins], "k", [], [2],
                                       [(3, out.view(np.uint8))], [], timeout=5.0)
                    seen["run"] = "completed"
                except Exception as e:
                    seen["run"] = type(e).__name__ + ": " + str(e)
            def ask():
                while counter(7) == started:              # the hung run is on the device
                    time.sleep(0.01)
                seen["buffer_sets"] = runner.buffer_sets
                # Answered before the dispatch gave up on the run (it aborts it on timeout),
                # not after waiting for the dispatch to end.
                seen["aborted_before_answer"] = counter(9) - aborted
            worker = threading.Thread(target=dispatch)
            asker = threading.Thread(target=ask)
            worker.start()
            asker.start()
            asker.join(60)
            worker.join(60)
            seen["stuck"] = worker.is_alive() or asker.is_alive()
            seen["logged"] = [m for m in logged if "timed out" in m]
            print(json.dumps(seen))
            """,
            "xrt",
            harness_env(tmp_path),
            timeout=180,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("deadlock: a chain run and buffer_sets in another thread never finished")
    assert result["buffer_sets"] == 1 and result["aborted_before_answer"] == 0, result
    assert not result["stuck"], result
    assert "did not complete within 5 s" in result["run"], result
    # The run logged through Python from inside its dispatch: the GIL was really needed there.
    assert result["logged"], result


def test_compile_only_builds_the_chain_without_a_runtime(tmp_path: Path):
    # Upstream's hsaco packing check, for a chain: no NPU, no ROCr, only the toolchain.
    empty = tmp_path / "no-rocr"
    empty.mkdir()
    result = run_chain_script(
        """
        chain = add_mul_chain()
        out = np.zeros(N, np.float32)
        res = chain.run([rand(1), rand(2), np.empty(N, np.float32), out])
        assert res == {} and np.all(out == 0)
        print(json.dumps({"files": sorted(os.listdir(chain.cache_dir))}))
        """,
        "hsa",
        harness_env(tmp_path, AMD_TRITON_NPU_COMPILE_ONLY="1", AMD_NPU_ROCR_PATH=str(empty)),
    )
    assert {"aie.elf", "kernel.hsaco", "multilaunch.mlir"} <= set(result["files"]), result


def test_raw_ttsharedir_ops_and_the_builder_and_runner_api(tmp_path: Path):
    result = run_chain_script(
        """
        t = torch.empty(N)
        # The ttsharedir text of each kernel, as a model that builds MLIR itself would pass it.
        capture = NPUChain("capture", runtime=RUNTIME)._capture
        add_src = capture(add_kernel, GRID + (1, 1), (t, t, t, N), {"BLOCK": 1024})
        relu_src = capture(relu_kernel, GRID + (1, 1), (t, t, N), {"BLOCK": 1024})
        assert isinstance(add_src, (str, bytes))
        chain = NPUChain("raw", runtime=RUNTIME)
        chain.add(add_src, GRID, {0: 0, 1: 1, 2: 2}, args=())
        chain.add(relu_src.encode() if isinstance(relu_src, str) else relu_src, GRID,
                  {0: 2, 1: 3}, args=())
        x, y = rand(1), rand(2)
        res = chain.run([x, y, np.empty(N, np.float32), np.empty(N, np.float32)],
                        intermediate_indices={2})
        np.testing.assert_allclose(res[3], np.maximum(x + y, 0), rtol=1e-6)

        # The same through upstream's lower-level API.
        builder = MultiLaunchBuilder("raw_api")
        builder.add_op(add_src, GRID, {0: 0, 1: 1, 2: 2})
        builder.add_op(relu_src, GRID, {0: 2, 1: 3})
        assert builder.combined_arg_types() == ["memref<*xf32>"] * 4
        text = builder.build_module_text()
        elf_path, kernel_name = builder.compile()
        runner = MultiLaunchRunner(elf_path, kernel_name, runtime=RUNTIME)
        out = runner.run([x, y, np.empty(N, np.float32), np.empty(N, np.float32)],
                         bo_key="k", intermediate_indices={2})
        np.testing.assert_allclose(out[3], np.maximum(x + y, 0), rtol=1e-6)
        runner.unload()
        try:
            runner.run([x, y, x, x], bo_key="k")
            closed = None
        except RuntimeError as e:
            closed = str(e)
        stored = open(os.path.join(os.path.dirname(elf_path), "multilaunch.mlir")).read()
        print(json.dumps({"kernel": kernel_name, "same_text": stored == text,
                          "launches": text.count("air.launch ("), "closed": closed}))
        """,
        "xrt",
        harness_env(tmp_path),
    )
    assert result["kernel"] == "main:sequence" and result["same_text"], result
    assert result["launches"] == 2, result
    assert "is closed" in result["closed"], result


def test_bad_runs_are_value_errors(tmp_path: Path):
    result = run_chain_script(
        """
        chain = add_mul_chain()
        x = rand(1)
        f32 = lambda n=N: np.zeros(n, np.float32)
        chain.run([x, x, f32(), f32()])
        errors = {}
        for name, call in {
            "resized": lambda: chain.run([x[:1024], x[:1024], f32(1024), f32(1024)]),
            "count": lambda: chain.run([x, x, f32()]),
            "index": lambda: chain.run([x, x, f32(), f32()], output_indices={7}),
            "unbound_none": lambda: chain.run([x, x, None, f32()]),
        }.items():
            try:
                call()
                errors[name] = None
            except ValueError as e:
                errors[name] = str(e)
        print(json.dumps(errors))
        """,
        "hsa",
        harness_env(tmp_path),
    )
    assert "use a distinct bo_key" in result["resized"], result
    assert "takes 4 combined buffers" in result["count"], result
    assert "out of range" in result["index"], result
    assert "no input and is not bound" in result["unbound_none"], result


def test_least_recently_run_chains_are_closed_beyond_max_open(tmp_path: Path):
    result = run_chain_script(
        """
        NPUChain.max_open = 1
        a, b = add_mul_chain("a"), add_mul_chain("b")
        x, y = rand(1), rand(2)
        ins = [x, y, np.empty(N, np.float32), np.empty(N, np.float32)]
        a.run(ins, intermediate_indices={2})
        b.run(ins, intermediate_indices={2})
        a_closed = a._runner is None
        res = a.run(ins, intermediate_indices={2})      # reopens from its compiled ELF
        np.testing.assert_allclose(res[3], (x + y) * y, rtol=1e-6)
        print(json.dumps({"a_closed": a_closed, "b_closed": b._runner is None,
                          "open": len(NPUChain._open)}))
        """,
        "xrt",
        harness_env(tmp_path),
    )
    assert result == {"a_closed": True, "b_closed": True, "open": 1}, result


# --- In-process: the builder's checks need no device and run no tool. -------------------------

KERNEL = """#map = affine_map<(d0) -> (d0)>
module {{
  func.func @{name}(%arg0: memref<*x{t}> {{tt.divisibility = 16 : i32}}, %arg1: memref<*x{t}>, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32) {{
    return
  }}
}}
"""


def test_arg_map_type_conflicts_are_value_errors():
    from triton_npu.multilaunch import MultiLaunchBuilder

    b = MultiLaunchBuilder("conflict")
    b.add_op(KERNEL.format(name="relu", t="f32"), (4,), {0: 0, 1: 1})
    with pytest.raises(ValueError, match="conflicting element types for combined index 1"):
        b.add_op(KERNEL.format(name="cast", t="bf16").encode(), (4,), {0: 1, 1: 2})
    with pytest.raises(ValueError, match=r"does not map buffer parameter\(s\) 1"):
        b.add_op(KERNEL.format(name="relu", t="f32"), (4,), {0: 1})
    b.add_op(KERNEL.format(name="relu", t="f32"), (4, 1), {0: 1, 1: 2})
    assert b.combined_arg_types() == ["memref<*xf32>"] * 3
    gap = MultiLaunchBuilder("gap")
    gap.add_op(KERNEL.format(name="relu", t="f32"), 2, {0: 0, 1: 2})
    with pytest.raises(ValueError, match="combined index 1 is used by no op"):
        gap.combined_arg_types()
    with pytest.raises(ValueError, match="MLIR identifier"):
        MultiLaunchBuilder("not a name")


# The harness device of each runtime that an npu1 (AIE2, Phoenix) machine has.
NPU1_DEVICE = {
    "hsa": {"NPU_HARNESS_AGENT": "aie2"},
    "xrt": {"NPU_HARNESS_XRT_DEVICE": "NPU Phoenix"},
}


@pytest.mark.parametrize("runtime", ["hsa", "xrt"])
def test_on_npu1_a_chain_runs_op_by_op_over_one_set_of_buffers(runtime: str, tmp_path: Path):
    log = tmp_path / "tools.jsonl"
    result = run_chain_script(
        """
        triton.runtime.driver.set_active(NPUDriver(RUNTIME))
        chain = add_mul_chain()
        x, y = rand(1), rand(2)
        tmp = np.full(N, 7.0, np.float32)
        res = chain.run([x, y, tmp, np.zeros(N, np.float32)], intermediate_indices={2})
        np.testing.assert_allclose(res[3], (x + y) * y, rtol=1e-6)
        assert np.all(tmp == 7.0), "an intermediate was copied back"
        first = dict(chain.last_dispatch)
        # A second run on the same buffer set: the hand-off buffer is reused on the device.
        x2 = rand(3)
        res2 = chain.run([x2, y, tmp, np.zeros(N, np.float32)], intermediate_indices={2})
        np.testing.assert_allclose(res2[3], (x2 + y) * y, rtol=1e-6)

        # Upstream's builder and runner: compile("xclbin") gives each op's files, in order,
        # and the runner takes them back.
        builder = chain._builder
        bins, insts = builder.compile("xclbin")
        runner = MultiLaunchRunner(bins, insts, runtime=RUNTIME)
        out = runner.run([x, y, tmp, np.zeros(N, np.float32)], bo_key="files",
                         intermediate_indices={2})
        np.testing.assert_allclose(out[3], (x + y) * y, rtol=1e-6)
        try:
            MultiLaunchRunner(list(reversed(bins)), list(reversed(insts)), runtime=RUNTIME)
            swapped = "accepted"
        except ValueError as e:
            swapped = str(e)
        try:
            builder.compile("elf")
            elf = "accepted"
        except Exception as e:
            elf = f"{type(e).__name__}: {e}"
        runner.close()
        print(json.dumps({
            "first": first, "bins": bins, "insts": insts, "swapped": swapped, "elf": elf,
            "files": sorted(os.listdir(chain.cache_dir)),
        }))
        """,
        runtime,
        harness_env(
            tmp_path,
            NPU_HARNESS_LOG=str(log),
            AMD_TRITON_NPU_TARGET="npu1",
            **NPU1_DEVICE[runtime],
        ),
    )
    # Two dispatches (one per op) over the four buffers, in place.
    assert result["first"]["in_place"] == 6 and result["first"]["staged"] == 0, result
    assert [Path(b).parent.name for b in result["bins"]] == ["op0", "op1"], result
    assert all(b.endswith("/aie.xclbin") for b in result["bins"]), result
    assert all(i.endswith("/insts.bin") for i in result["insts"]), result
    assert "not the files of the chain" in result["swapped"], result
    assert "npu1" in result["elf"] and "elf" in result["elf"], result
    files = set(result["files"])
    assert {"op0", "op1", "chain.json"} <= files and "multilaunch.mlir" not in files, files
    # Each op compiled on its own: two aircc runs for xclbins on npu1, none on a warm cache.
    airccs = tool_runs(log, "aircc")
    assert len(airccs) == 2, airccs
    for argv in airccs:
        assert argv[argv.index("--output-format") + 1] == "xclbin", argv
        assert argv[argv.index("--device") + 1] == "npu1", argv


def test_a_pdi_chain_is_refused_by_both_runtimes_before_any_tool_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from triton_npu.config import config_context
    from triton_npu.multilaunch import MultiLaunchBuilder

    monkeypatch.setenv("AMD_TRITON_NPU_CACHE_DIR", str(tmp_path / "cache"))
    b = MultiLaunchBuilder("as_pdi")
    b.add_op(KERNEL.format(name="relu", t="f32"), (4,), {0: 0, 1: 1})
    for runtime in ("xrt", "hsa"):
        with config_context(target="npu2", runtime=runtime):
            with pytest.raises(Exception, match="pdi"):
                b.compile("pdi")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("aie.pdi"))
