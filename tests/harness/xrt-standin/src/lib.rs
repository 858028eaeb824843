//! A software XRT behind triton-npu's XRT shim ABI (conformance harness only; never shipped).
//!
//! This cdylib exports exactly the functions of `crates/xrt-sys/shim/triton_npu_xrt.h`, so the
//! runtime loads it the way it loads the real shim: `AMD_TRITON_NPU_XRT_SHIM` names it
//! (`install.sh` lays it out as `PREFIX/xrt/lib/libtriton_npu_xrt.so`). It needs nothing from
//! XRT, so the loader does not look for `libxrt_coreutil.so.2`.
//!
//! It enforces XRT's call order and the NPU flows' rules (device before xclbin registration,
//! registration before a context, a context before a kernel, buffers in the kernel argument's
//! memory group, every argument set and every buffer synced before a run, a run started
//! before it is waited on, and started again or given new arguments only after a wait saw it
//! finish, children released before parents) and executes runs the way the
//! software HSA agent does: the harness program comes from the instruction buffer (npu1: the
//! `insts.bin` contents, run with opcode 3) or from the instance's `.ctrltext` in the full ELF
//! (npu2), and runs over the buffers' device memory. Faults and the device name come from the
//! environment (see [`faults`]). `npu_harness_xrt_stats` reports counters (e.g. hardware
//! contexts created) so tests can check session reuse. No panic crosses the C ABI.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use xrt_sys::bindings::{self as b, TritonNpuXrt};

mod elf;
pub mod faults;
mod world;
mod xclbin;

pub use world::Stats;
use world::{Failure, Outcome, WaitStep, World};

static WORLD: LazyLock<Mutex<World>> = LazyLock::new(|| Mutex::new(World::default()));

fn world() -> MutexGuard<'static, World> {
    WORLD.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Copies `text` into a caller buffer, cut to fit; true when it fitted.
fn put(buf: *mut c_char, len: usize, text: &str) -> bool {
    if buf.is_null() || len == 0 {
        return true;
    }
    let n = text.len().min(len - 1);
    // SAFETY: the caller gave a buffer of `len` bytes; at most `len` are written.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast(), buf, n);
        *buf.add(n) = 0;
    }
    n == text.len()
}

/// Runs an entry point: its outcome becomes a status and a message; a panic becomes
/// TRITON_NPU_XRT_E_UNKNOWN instead of unwinding into the caller.
fn guard(err: *mut c_char, errlen: usize, body: impl FnOnce() -> Outcome<()>) -> c_int {
    put(err, errlen, "");
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => b::TRITON_NPU_XRT_OK as c_int,
        Ok(Err(failure)) => {
            put(err, errlen, &failure.message);
            failure.status as c_int
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            put(err, errlen, &format!("npu-harness-xrt panicked: {what}"));
            b::TRITON_NPU_XRT_E_UNKNOWN as c_int
        }
    }
}

fn store<T>(out: *mut T, value: T, what: &str) -> Outcome<()> {
    if out.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL out pointer from the caller.
    unsafe { out.write(value) };
    Ok(())
}

fn as_handle<T>(ptr: *mut T) -> usize {
    ptr as usize
}

fn to_handle_ptr<T>(handle: usize) -> *mut T {
    std::ptr::without_provenance_mut(handle)
}

fn string(ptr: *const c_char, what: &str) -> Outcome<String> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL, NUL-terminated by the ABI's contract.
    Ok(unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned())
}

fn result_text(buf: *mut c_char, len: usize, text: &str) -> Outcome<()> {
    if buf.is_null() || len == 0 {
        return Err(Failure::invalid("output buffer is NULL or empty"));
    }
    if put(buf, len, text) {
        Ok(())
    } else {
        Err(Failure {
            status: b::TRITON_NPU_XRT_E_TRUNCATED,
            message: "output buffer too small; the text was cut".into(),
        })
    }
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub extern "C" fn triton_npu_xrt_abi_version() -> u32 {
    b::TRITON_NPU_XRT_ABI_VERSION
}

#[unsafe(no_mangle)]
pub extern "C" fn triton_npu_xrt_state_name(state: i32) -> *const c_char {
    let name: &'static CStr = match state as u32 {
        b::TRITON_NPU_XRT_STATE_NEW => c"ERT_CMD_STATE_NEW",
        b::TRITON_NPU_XRT_STATE_QUEUED => c"ERT_CMD_STATE_QUEUED",
        b::TRITON_NPU_XRT_STATE_RUNNING => c"ERT_CMD_STATE_RUNNING",
        b::TRITON_NPU_XRT_STATE_COMPLETED => c"ERT_CMD_STATE_COMPLETED",
        b::TRITON_NPU_XRT_STATE_ERROR => c"ERT_CMD_STATE_ERROR",
        b::TRITON_NPU_XRT_STATE_ABORT => c"ERT_CMD_STATE_ABORT",
        b::TRITON_NPU_XRT_STATE_SUBMITTED => c"ERT_CMD_STATE_SUBMITTED",
        b::TRITON_NPU_XRT_STATE_TIMEOUT => c"ERT_CMD_STATE_TIMEOUT",
        b::TRITON_NPU_XRT_STATE_NORESPONSE => c"ERT_CMD_STATE_NORESPONSE",
        b::TRITON_NPU_XRT_STATE_SKERROR => c"ERT_CMD_STATE_SKERROR",
        b::TRITON_NPU_XRT_STATE_SKCRASHED => c"ERT_CMD_STATE_SKCRASHED",
        _ => c"ERT_CMD_STATE_UNKNOWN",
    };
    name.as_ptr()
}

/// The version the stand-in reports: the XRT it imitates, marked as a stand-in.
pub const VERSION: &str = "2.25.0 (npu-harness-xrt software stand-in)";

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_version(
    buf: *mut c_char,
    buflen: usize,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || result_text(buf, buflen, VERSION))
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_device_open(
    index: u32,
    out: *mut *mut b::triton_npu_xrt_device,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        if out.is_null() {
            return Err(Failure::invalid("device_open: out is NULL"));
        }
        let h = world().device_open(index)?;
        store(out, to_handle_ptr(h), "device_open: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_device_name(
    device: *mut b::triton_npu_xrt_device,
    buf: *mut c_char,
    buflen: usize,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        let name = world().device_name(as_handle(device))?;
        result_text(buf, buflen, &name)
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_device_close(
    device: *mut b::triton_npu_xrt_device,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || world().device_close(as_handle(device)))
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_xclbin_register(
    device: *mut b::triton_npu_xrt_device,
    path: *const c_char,
    out: *mut *mut b::triton_npu_xrt_xclbin,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        let path = string(path, "xclbin_register: path")?;
        if out.is_null() {
            return Err(Failure::invalid("xclbin_register: out is NULL"));
        }
        let h = world().xclbin_register(as_handle(device), &path)?;
        store(out, to_handle_ptr(h), "xclbin_register: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_xclbin_find_kernel(
    xclbin: *mut b::triton_npu_xrt_xclbin,
    prefix: *const c_char,
    name: *mut c_char,
    namelen: usize,
    num_args: *mut u32,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        let prefix = string(prefix, "xclbin_find_kernel: prefix")?;
        if num_args.is_null() {
            return Err(Failure::invalid("xclbin_find_kernel: num_args is NULL"));
        }
        let (found, args) = world().xclbin_find_kernel(as_handle(xclbin), &prefix)?;
        store(num_args, args, "xclbin_find_kernel: num_args")?;
        result_text(name, namelen, &found)
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_xclbin_free(
    xclbin: *mut b::triton_npu_xrt_xclbin,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || world().xclbin_free(as_handle(xclbin)))
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_elf_open(
    path: *const c_char,
    out: *mut *mut b::triton_npu_xrt_elf,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        let path = string(path, "elf_open: path")?;
        if out.is_null() {
            return Err(Failure::invalid("elf_open: out is NULL"));
        }
        let h = world().elf_open(&path)?;
        store(out, to_handle_ptr(h), "elf_open: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_elf_free(
    elf: *mut b::triton_npu_xrt_elf,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || world().elf_free(as_handle(elf)))
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_context_from_xclbin(
    device: *mut b::triton_npu_xrt_device,
    xclbin: *mut b::triton_npu_xrt_xclbin,
    out: *mut *mut b::triton_npu_xrt_context,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        if out.is_null() {
            return Err(Failure::invalid("context_from_xclbin: out is NULL"));
        }
        let h = world().context_from_xclbin(as_handle(device), as_handle(xclbin))?;
        store(out, to_handle_ptr(h), "context_from_xclbin: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_context_from_elf(
    device: *mut b::triton_npu_xrt_device,
    elf: *mut b::triton_npu_xrt_elf,
    out: *mut *mut b::triton_npu_xrt_context,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        if out.is_null() {
            return Err(Failure::invalid("context_from_elf: out is NULL"));
        }
        let h = world().context_from_elf(as_handle(device), as_handle(elf))?;
        store(out, to_handle_ptr(h), "context_from_elf: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_context_free(
    context: *mut b::triton_npu_xrt_context,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || world().context_free(as_handle(context)))
}

fn open_kernel(
    context: *mut b::triton_npu_xrt_context,
    name: *const c_char,
    out: *mut *mut b::triton_npu_xrt_kernel,
    ext: bool,
) -> Outcome<()> {
    let name = string(name, "kernel_open: name")?;
    if out.is_null() {
        return Err(Failure::invalid("kernel_open: out is NULL"));
    }
    let h = world().kernel_open(as_handle(context), &name, ext)?;
    store(out, to_handle_ptr(h), "kernel_open: out")
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_kernel_open(
    context: *mut b::triton_npu_xrt_context,
    name: *const c_char,
    out: *mut *mut b::triton_npu_xrt_kernel,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || open_kernel(context, name, out, false))
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_ext_kernel_open(
    context: *mut b::triton_npu_xrt_context,
    name: *const c_char,
    out: *mut *mut b::triton_npu_xrt_kernel,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || open_kernel(context, name, out, true))
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_kernel_group_id(
    kernel: *mut b::triton_npu_xrt_kernel,
    argno: i32,
    out: *mut i32,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        let group = world().kernel_group_id(as_handle(kernel), argno)?;
        store(out, group, "kernel_group_id: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_kernel_free(
    kernel: *mut b::triton_npu_xrt_kernel,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || world().kernel_free(as_handle(kernel)))
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_bo_alloc(
    device: *mut b::triton_npu_xrt_device,
    size: usize,
    flags: u32,
    group: i32,
    out: *mut *mut b::triton_npu_xrt_bo,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        if out.is_null() {
            return Err(Failure::invalid("bo_alloc: out is NULL"));
        }
        let h = world().bo_alloc(as_handle(device), size, flags, group)?;
        store(out, to_handle_ptr(h), "bo_alloc: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_ext_bo_alloc(
    device: *mut b::triton_npu_xrt_device,
    size: usize,
    out: *mut *mut b::triton_npu_xrt_bo,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        if out.is_null() {
            return Err(Failure::invalid("ext_bo_alloc: out is NULL"));
        }
        let h = world().ext_bo_alloc(as_handle(device), size)?;
        store(out, to_handle_ptr(h), "ext_bo_alloc: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_bo_map(
    bo: *mut b::triton_npu_xrt_bo,
    out: *mut *mut c_void,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        let ptr = world().bo_map(as_handle(bo))?;
        store(out, ptr.cast(), "bo_map: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_bo_sync(
    bo: *mut b::triton_npu_xrt_bo,
    direction: i32,
    size: usize,
    offset: usize,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        world().bo_sync(as_handle(bo), direction, size, offset)
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_bo_free(
    bo: *mut b::triton_npu_xrt_bo,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || world().bo_free(as_handle(bo)))
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_run_create(
    kernel: *mut b::triton_npu_xrt_kernel,
    out: *mut *mut b::triton_npu_xrt_run,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        if out.is_null() {
            return Err(Failure::invalid("run_create: out is NULL"));
        }
        let h = world().run_create(as_handle(kernel))?;
        store(out, to_handle_ptr(h), "run_create: out")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_run_set_arg_bo(
    run: *mut b::triton_npu_xrt_run,
    index: i32,
    bo: *mut b::triton_npu_xrt_bo,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        world().run_set_arg_bo(as_handle(run), index, as_handle(bo))
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_run_set_arg_scalar(
    run: *mut b::triton_npu_xrt_run,
    index: i32,
    value: *const c_void,
    size: usize,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        if value.is_null() {
            return Err(Failure::invalid("run_set_arg_scalar: value is NULL"));
        }
        // SAFETY: the caller passes `size` readable bytes at `value`.
        let bytes = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) }.to_vec();
        world().run_set_arg_scalar(as_handle(run), index, bytes)
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_run_start(
    run: *mut b::triton_npu_xrt_run,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || world().run_start(as_handle(run)))
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_run_wait(
    run: *mut b::triton_npu_xrt_run,
    timeout_ms: u32,
    state: *mut i32,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        if state.is_null() {
            return Err(Failure::invalid("run_wait: state is NULL"));
        }
        let handle = as_handle(run);
        let timeout = (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms.into()));
        // The lock is never held while sleeping: another thread may abort the run meanwhile.
        let step = world().wait_step(handle, timeout)?;
        let (end_state, message) = match step {
            WaitStep::Finished { state, message } => (state, message),
            WaitStep::Sleep(Some(limit)) => {
                std::thread::sleep(limit);
                match world().wait_step(handle, None)? {
                    WaitStep::Finished { state, message } => (state, message),
                    WaitStep::Sleep(_) => (b::TRITON_NPU_XRT_STATE_TIMEOUT as i32, String::new()),
                }
            }
            WaitStep::Sleep(None) => loop {
                std::thread::sleep(Duration::from_millis(20));
                if let WaitStep::Finished { state, message } = world().wait_step(handle, None)? {
                    break (state, message);
                }
            },
        };
        store(state, end_state, "run_wait: state")?;
        let ok = [
            b::TRITON_NPU_XRT_STATE_COMPLETED,
            b::TRITON_NPU_XRT_STATE_TIMEOUT,
        ];
        if ok.contains(&(end_state as u32)) {
            return Ok(());
        }
        Err(Failure {
            status: b::TRITON_NPU_XRT_E_COMMAND,
            message,
        })
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_run_state(
    run: *mut b::triton_npu_xrt_run,
    state: *mut i32,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        let s = world().run_state(as_handle(run))?;
        store(state, s, "run_state: state")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_run_abort(
    run: *mut b::triton_npu_xrt_run,
    state: *mut i32,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || {
        if state.is_null() {
            return Err(Failure::invalid("run_abort: state is NULL"));
        }
        let s = world().run_abort(as_handle(run))?;
        store(state, s, "run_abort: state")
    })
}

/// # Safety
/// Part of the shim ABI; see `triton_npu_xrt.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn triton_npu_xrt_run_free(
    run: *mut b::triton_npu_xrt_run,
    err: *mut c_char,
    errlen: usize,
) -> c_int {
    guard(err, errlen, || world().run_free(as_handle(run)))
}

/// The stand-in's counters (not part of the shim ABI): what tests assert session reuse with.
///
/// # Safety
/// `out` must point to a writable [`Stats`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_harness_xrt_stats(out: *mut Stats) -> c_int {
    guard(std::ptr::null_mut(), 0, || {
        let stats = world().stats;
        store(out, stats, "npu_harness_xrt_stats: out")
    })
}

/// Never called: it only compiles if every export above has exactly the type that bindgen
/// derived from the shim header, so the stand-in cannot drift from the real shim's ABI.
#[allow(dead_code)]
fn exports_match_the_shim_header(api: &mut TritonNpuXrt) {
    api.triton_npu_xrt_abi_version = triton_npu_xrt_abi_version;
    api.triton_npu_xrt_state_name = triton_npu_xrt_state_name;
    api.triton_npu_xrt_version = triton_npu_xrt_version;
    api.triton_npu_xrt_device_open = triton_npu_xrt_device_open;
    api.triton_npu_xrt_device_name = triton_npu_xrt_device_name;
    api.triton_npu_xrt_device_close = triton_npu_xrt_device_close;
    api.triton_npu_xrt_xclbin_register = triton_npu_xrt_xclbin_register;
    api.triton_npu_xrt_xclbin_find_kernel = triton_npu_xrt_xclbin_find_kernel;
    api.triton_npu_xrt_xclbin_free = triton_npu_xrt_xclbin_free;
    api.triton_npu_xrt_elf_open = triton_npu_xrt_elf_open;
    api.triton_npu_xrt_elf_free = triton_npu_xrt_elf_free;
    api.triton_npu_xrt_context_from_xclbin = triton_npu_xrt_context_from_xclbin;
    api.triton_npu_xrt_context_from_elf = triton_npu_xrt_context_from_elf;
    api.triton_npu_xrt_context_free = triton_npu_xrt_context_free;
    api.triton_npu_xrt_kernel_open = triton_npu_xrt_kernel_open;
    api.triton_npu_xrt_ext_kernel_open = triton_npu_xrt_ext_kernel_open;
    api.triton_npu_xrt_kernel_group_id = triton_npu_xrt_kernel_group_id;
    api.triton_npu_xrt_kernel_free = triton_npu_xrt_kernel_free;
    api.triton_npu_xrt_bo_alloc = triton_npu_xrt_bo_alloc;
    api.triton_npu_xrt_ext_bo_alloc = triton_npu_xrt_ext_bo_alloc;
    api.triton_npu_xrt_bo_map = triton_npu_xrt_bo_map;
    api.triton_npu_xrt_bo_sync = triton_npu_xrt_bo_sync;
    api.triton_npu_xrt_bo_free = triton_npu_xrt_bo_free;
    api.triton_npu_xrt_run_create = triton_npu_xrt_run_create;
    api.triton_npu_xrt_run_set_arg_bo = triton_npu_xrt_run_set_arg_bo;
    api.triton_npu_xrt_run_set_arg_scalar = triton_npu_xrt_run_set_arg_scalar;
    api.triton_npu_xrt_run_start = triton_npu_xrt_run_start;
    api.triton_npu_xrt_run_wait = triton_npu_xrt_run_wait;
    api.triton_npu_xrt_run_state = triton_npu_xrt_run_state;
    api.triton_npu_xrt_run_abort = triton_npu_xrt_run_abort;
    api.triton_npu_xrt_run_free = triton_npu_xrt_run_free;
}
