//! A software HSA runtime with one AIE agent, for tests only (never shipped).
//!
//! Built as a cdylib and installed as `PREFIX/rocr/lib/libhsa-runtime64.so` by `install.sh`, it
//! is found by the driver's ROCr discovery through `AMD_NPU_ROCR_PATH` like a real ROCr. It
//! exports every function `hsa-sys` loads, with the C signatures of the HSA headers, and:
//!
//! * reports one CPU agent and one AIE agent named by `NPU_HARNESS_AGENT` (`aie2p` by default;
//!   4 columns for `aie2`, 8 for `aie2p`, or `NPU_HARNESS_COLUMNS`; `none` for a ROCr without
//!   an AIE agent), with ROCr's three pools and one 64-slot queue;
//! * enforces the API contract — variables defined before load, freeze before symbol lookup,
//!   hsaco sections checked by its own reader, packet header/opcode/count and kernarg layout,
//!   every address inside a pool allocation — printing `npu-harness-hsa: <rule>` on stderr and
//!   returning the HSA error status when a rule is broken;
//! * executes each packet by running the harness program the kernel carries (the PdiInsts
//!   instruction stream or the FullElf control code) over the buffers the kernarg block names;
//! * injects `NPU_HARNESS_FAULT=queue_error|hang|signal_negative[:N]` into the N-th packet
//!   (default the first), so the packet after it shows recovery;
//! * runs packets on a worker thread when the doorbell is rung, or inside the doorbell store
//!   itself with `NPU_HARNESS_DOORBELL=sync` (ROCr's real behaviour; a hang then blocks the
//!   store for `NPU_HARNESS_HANG_MS` and ends in a queue error, like the driver's timeout).
//!
//! No export unwinds into C: each body runs under `catch_unwind`.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::os::fd::FromRawFd;
use std::os::unix::fs::FileExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

use hsa_sys::*;

mod code;
mod hsaco;
mod memory;
mod queue;
mod signal;
mod state;
mod status;

use memory::Pool;
use state::{STATS, breach};

const AIE_AGENT: u64 = 0xA1E0_0010;
const CPU_AGENT: u64 = 0xC0C0_0010;

/// Runs `f`, turning a panic into `on_panic` after reporting it.
fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        state::device_error("internal error (a panic) in the software HSA agent");
        on_panic
    })
}

/// Runs `f` after `hsa_init`, else returns `NOT_INITIALIZED`.
fn initialised(f: impl FnOnce(&state::AgentConfig) -> hsa_status_t) -> hsa_status_t {
    guard(HSA_STATUS_ERROR, || match state::config() {
        Ok(config) => f(&config),
        Err(status) => status,
    })
}

fn is_aie(agent: hsa_agent_t) -> bool {
    agent.handle == AIE_AGENT
}

/// # Safety
/// `s` must be null or a NUL-terminated string.
unsafe fn c_str<'a>(s: *const c_char) -> Option<&'a str> {
    if s.is_null() {
        return None;
    }
    // SAFETY: the caller passes a NUL-terminated string.
    unsafe { CStr::from_ptr(s) }.to_str().ok()
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_init() -> hsa_status_t {
    guard(HSA_STATUS_ERROR, state::init)
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_shut_down() -> hsa_status_t {
    guard(HSA_STATUS_ERROR, state::shut_down)
}

/// # Safety
/// `status_string` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_status_string(
    status: hsa_status_t,
    status_string: *mut *const c_char,
) -> hsa_status_t {
    guard(HSA_STATUS_ERROR, || {
        if status_string.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        match status::text(status) {
            // SAFETY: checked non-null; the text is static and NUL-terminated.
            Some(text) => unsafe { *status_string = text.as_ptr().cast() },
            None => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
        }
        HSA_STATUS_SUCCESS
    })
}

/// # Safety
/// `value` must be valid for a write of the attribute's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_system_get_info(
    attribute: hsa_system_info_t,
    value: *mut c_void,
) -> hsa_status_t {
    initialised(|_| {
        if value.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY (all writes): the caller provides storage of the attribute's type.
        unsafe {
            match attribute {
                HSA_SYSTEM_INFO_VERSION_MAJOR | HSA_SYSTEM_INFO_VERSION_MINOR => {
                    value.cast::<u16>().write_unaligned(1)
                }
                HSA_SYSTEM_INFO_TIMESTAMP => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64);
                    value.cast::<u64>().write_unaligned(now)
                }
                HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY => value
                    .cast::<u64>()
                    .write_unaligned(signal::TIMESTAMP_FREQUENCY),
                HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT => value.cast::<u64>().write_unaligned(u64::MAX),
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            }
        }
        HSA_STATUS_SUCCESS
    })
}

type AgentCallback = unsafe extern "C" fn(hsa_agent_t, *mut c_void) -> hsa_status_t;

/// # Safety
/// `callback` must be safe to call with `data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_iterate_agents(
    callback: Option<AgentCallback>,
    data: *mut c_void,
) -> hsa_status_t {
    initialised(|config| {
        let Some(callback) = callback else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        let agents: &[u64] = if config.name == "none" {
            &[CPU_AGENT]
        } else {
            &[CPU_AGENT, AIE_AGENT]
        };
        for &handle in agents {
            // SAFETY: the caller's callback with the caller's data.
            let status = unsafe { callback(hsa_agent_t { handle }, data) };
            if status != HSA_STATUS_SUCCESS {
                return status;
            }
        }
        HSA_STATUS_SUCCESS
    })
}

/// # Safety
/// `value` must be valid for a write of the attribute's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_agent_get_info(
    agent: hsa_agent_t,
    attribute: hsa_agent_info_t,
    value: *mut c_void,
) -> hsa_status_t {
    initialised(|config| {
        if value.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        let name_into = |name: &str| {
            let mut buf = [0u8; 64];
            buf[..name.len().min(63)].copy_from_slice(&name.as_bytes()[..name.len().min(63)]);
            // SAFETY: HSA names are char[64].
            unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), value.cast::<u8>(), 64) };
        };
        let u32_into = |v: u32| {
            // SAFETY: the attribute's type is a 32-bit value.
            unsafe { value.cast::<u32>().write_unaligned(v) }
        };
        match agent.handle {
            CPU_AGENT => match attribute {
                HSA_AGENT_INFO_NAME => name_into("Harness CPU"),
                HSA_AGENT_INFO_VENDOR_NAME => name_into("CPU"),
                HSA_AGENT_INFO_DEVICE => u32_into(HSA_DEVICE_TYPE_CPU),
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            },
            AIE_AGENT => match attribute {
                HSA_AGENT_INFO_NAME => name_into(&config.name),
                HSA_AGENT_INFO_VENDOR_NAME => name_into("AMD"),
                HSA_AGENT_INFO_DEVICE => u32_into(HSA_DEVICE_TYPE_AIE),
                HSA_AGENT_INFO_QUEUES_MAX => u32_into(1),
                HSA_AGENT_INFO_QUEUE_MIN_SIZE | HSA_AGENT_INFO_QUEUE_MAX_SIZE => {
                    u32_into(queue::QUEUE_SIZE)
                }
                HSA_AGENT_INFO_QUEUE_TYPE => u32_into(HSA_QUEUE_TYPE_SINGLE),
                HSA_AGENT_INFO_PROFILE => u32_into(HSA_PROFILE_BASE),
                HSA_AGENT_INFO_NODE => u32_into(1),
                a if a == HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT => u32_into(config.columns),
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            },
            _ => return HSA_STATUS_ERROR_INVALID_AGENT,
        }
        HSA_STATUS_SUCCESS
    })
}

type PoolCallback = unsafe extern "C" fn(hsa_amd_memory_pool_t, *mut c_void) -> hsa_status_t;

/// # Safety
/// `callback` must be safe to call with `data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_amd_agent_iterate_memory_pools(
    agent: hsa_agent_t,
    callback: Option<PoolCallback>,
    data: *mut c_void,
) -> hsa_status_t {
    initialised(|_| {
        let Some(callback) = callback else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        match agent.handle {
            CPU_AGENT => HSA_STATUS_SUCCESS,
            AIE_AGENT => {
                for pool in Pool::ALL {
                    let handle = hsa_amd_memory_pool_t {
                        handle: pool.handle(),
                    };
                    // SAFETY: the caller's callback with the caller's data.
                    let status = unsafe { callback(handle, data) };
                    if status != HSA_STATUS_SUCCESS {
                        return status;
                    }
                }
                HSA_STATUS_SUCCESS
            }
            _ => HSA_STATUS_ERROR_INVALID_AGENT,
        }
    })
}

/// # Safety
/// `value` must be valid for a write of the attribute's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_amd_memory_pool_get_info(
    memory_pool: hsa_amd_memory_pool_t,
    attribute: hsa_amd_memory_pool_info_t,
    value: *mut c_void,
) -> hsa_status_t {
    initialised(|_| {
        let Some(pool) = Pool::from_handle(memory_pool.handle) else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        if value.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: the caller's storage for the attribute.
        unsafe { pool.info(attribute, value.cast()) }
    })
}

/// # Safety
/// `ptr` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_amd_memory_pool_allocate(
    memory_pool: hsa_amd_memory_pool_t,
    size: usize,
    flags: u32,
    ptr: *mut *mut c_void,
) -> hsa_status_t {
    initialised(|_| {
        let Some(pool) = Pool::from_handle(memory_pool.handle) else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        if ptr.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        match memory::allocate(pool, size, flags) {
            Ok(p) => {
                // SAFETY: checked non-null.
                unsafe { *ptr = p.cast() };
                HSA_STATUS_SUCCESS
            }
            Err(status) => status,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_amd_memory_pool_free(ptr: *mut c_void) -> hsa_status_t {
    initialised(|_| memory::free(ptr.cast()))
}

/// # Safety
/// `file` must be an open file descriptor (it is read, not closed); `reader` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_code_object_reader_create_from_file(
    file: hsa_file_t,
    code_object_reader: *mut hsa_code_object_reader_t,
) -> hsa_status_t {
    initialised(|_| {
        if code_object_reader.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        if file < 0 {
            return HSA_STATUS_ERROR_INVALID_FILE;
        }
        // SAFETY: the caller owns the descriptor; ManuallyDrop keeps it open.
        let f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(file as c_int) });
        let mut bytes = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            match f.read_at(&mut chunk, bytes.len() as u64) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return HSA_STATUS_ERROR_INVALID_FILE,
            }
        }
        let handle = code::create_reader(bytes);
        // SAFETY: checked non-null.
        unsafe { (*code_object_reader).handle = handle };
        HSA_STATUS_SUCCESS
    })
}

/// # Safety
/// `code_object` must be valid for reads of `size` bytes; `reader` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_code_object_reader_create_from_memory(
    code_object: *const c_void,
    size: usize,
    code_object_reader: *mut hsa_code_object_reader_t,
) -> hsa_status_t {
    initialised(|_| {
        if code_object.is_null() || size == 0 || code_object_reader.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: the caller's buffer of `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(code_object.cast::<u8>(), size) }.to_vec();
        let handle = code::create_reader(bytes);
        // SAFETY: checked non-null.
        unsafe { (*code_object_reader).handle = handle };
        HSA_STATUS_SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_code_object_reader_destroy(
    code_object_reader: hsa_code_object_reader_t,
) -> hsa_status_t {
    initialised(|_| code::destroy_reader(code_object_reader.handle))
}

/// # Safety
/// `executable` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_executable_create_alt(
    profile: hsa_profile_t,
    default_float_rounding_mode: hsa_default_float_rounding_mode_t,
    _options: *const c_char,
    executable: *mut hsa_executable_t,
) -> hsa_status_t {
    initialised(|_| {
        if executable.is_null()
            || profile > HSA_PROFILE_FULL
            || default_float_rounding_mode > HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR
        {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: checked non-null.
        unsafe { (*executable).handle = code::create_executable() };
        HSA_STATUS_SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_executable_destroy(executable: hsa_executable_t) -> hsa_status_t {
    initialised(|_| code::destroy_executable(executable.handle))
}

/// # Safety
/// `variable_name` must be a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_executable_agent_global_variable_define(
    executable: hsa_executable_t,
    agent: hsa_agent_t,
    variable_name: *const c_char,
    address: *mut c_void,
) -> hsa_status_t {
    initialised(|_| {
        if !is_aie(agent) {
            return HSA_STATUS_ERROR_INVALID_AGENT;
        }
        // SAFETY: the caller passes a C string.
        let Some(name) = (unsafe { c_str(variable_name) }) else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        code::define_variable(executable.handle, name, address as usize)
    })
}

/// # Safety
/// `loaded_code_object` must be null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_executable_load_agent_code_object(
    executable: hsa_executable_t,
    agent: hsa_agent_t,
    code_object_reader: hsa_code_object_reader_t,
    _options: *const c_char,
    loaded_code_object: *mut hsa_loaded_code_object_t,
) -> hsa_status_t {
    initialised(|config| {
        if !is_aie(agent) {
            breach("hsa_executable_load_agent_code_object: AIE code loads on the AIE agent");
            return HSA_STATUS_ERROR_INVALID_AGENT;
        }
        let status = code::load(
            executable.handle,
            code_object_reader.handle,
            &config.name,
            config.columns,
        );
        if status == HSA_STATUS_SUCCESS && !loaded_code_object.is_null() {
            // SAFETY: checked non-null.
            unsafe { (*loaded_code_object).handle = state::next_handle() };
        }
        status
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_executable_freeze(
    executable: hsa_executable_t,
    _options: *const c_char,
) -> hsa_status_t {
    initialised(|_| code::freeze(executable.handle))
}

/// # Safety
/// `symbol_name` must be a NUL-terminated string, `agent` null or valid, `symbol` valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_executable_get_symbol_by_name(
    executable: hsa_executable_t,
    symbol_name: *const c_char,
    agent: *const hsa_agent_t,
    symbol: *mut hsa_executable_symbol_t,
) -> hsa_status_t {
    initialised(|_| {
        // SAFETY: the caller passes a C string.
        let Some(name) = (unsafe { c_str(symbol_name) }) else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        if symbol.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: null or a valid agent.
        if agent.is_null() || !is_aie(unsafe { *agent }) {
            // AIE kernels are agent symbols: without the AIE agent there is nothing to find.
            return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
        }
        match code::symbol_by_name(executable.handle, name) {
            Ok(handle) => {
                // SAFETY: checked non-null.
                unsafe { (*symbol).handle = handle };
                HSA_STATUS_SUCCESS
            }
            Err(status) => status,
        }
    })
}

/// # Safety
/// `value` must be valid for a write of the attribute's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_executable_symbol_get_info(
    executable_symbol: hsa_executable_symbol_t,
    attribute: hsa_executable_symbol_info_t,
    value: *mut c_void,
) -> hsa_status_t {
    initialised(|_| {
        if value.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: the caller's storage for the attribute.
        unsafe { code::symbol_info(executable_symbol.handle, attribute, value.cast(), AIE_AGENT) }
    })
}

/// # Safety
/// `queue` must be valid for a write; `callback` safe to call with `data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_queue_create(
    agent: hsa_agent_t,
    size: u32,
    type_: hsa_queue_type32_t,
    callback: Option<queue::ErrorCallback>,
    data: *mut c_void,
    _private_segment_size: u32,
    _group_segment_size: u32,
    queue: *mut *mut hsa_queue_t,
) -> hsa_status_t {
    guard(HSA_STATUS_ERROR, || {
        let config = match state::config() {
            Ok(c) => c,
            Err(status) => return status,
        };
        if queue.is_null() {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        if !is_aie(agent) {
            return HSA_STATUS_ERROR_INVALID_AGENT;
        }
        match queue::create(config, size, type_, callback, data) {
            Ok(q) => {
                // SAFETY: checked non-null.
                unsafe { *queue = q };
                HSA_STATUS_SUCCESS
            }
            Err(status) => status,
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_queue_destroy(queue: *mut hsa_queue_t) -> hsa_status_t {
    initialised(|_| queue::destroy(queue))
}

fn with_queue<R: Copy>(
    queue: *const hsa_queue_t,
    call: &str,
    fallback: R,
    f: impl FnOnce(&queue::Queue) -> R,
) -> R {
    guard(fallback, || match queue::get(queue) {
        Some(q) => f(&q),
        None => {
            breach(&format!(
                "{call}: {queue:p} is not a live queue of this runtime"
            ));
            fallback
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_queue_load_write_index_relaxed(queue: *const hsa_queue_t) -> u64 {
    with_queue(queue, "hsa_queue_load_write_index_relaxed", 0, |q| {
        queue::write_index(q).load(Ordering::Relaxed)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_queue_store_write_index_screlease(queue: *const hsa_queue_t, value: u64) {
    with_queue(queue, "hsa_queue_store_write_index_screlease", (), |q| {
        queue::write_index(q).store(value, Ordering::Release)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_queue_load_read_index_scacquire(queue: *const hsa_queue_t) -> u64 {
    with_queue(queue, "hsa_queue_load_read_index_scacquire", 0, |q| {
        queue::read_index(q).load(Ordering::Acquire)
    })
}

/// # Safety
/// `consumers` must be null or valid for `num_consumers` reads; `signal` valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hsa_signal_create(
    initial_value: hsa_signal_value_t,
    num_consumers: u32,
    consumers: *const hsa_agent_t,
    signal: *mut hsa_signal_t,
) -> hsa_status_t {
    initialised(|_| {
        if signal.is_null() || (num_consumers > 0 && consumers.is_null()) {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: checked non-null.
        unsafe { (*signal).handle = signal::create(initial_value) };
        HSA_STATUS_SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_signal_destroy(signal: hsa_signal_t) -> hsa_status_t {
    initialised(|_| {
        if signal::destroy(signal.handle) {
            HSA_STATUS_SUCCESS
        } else {
            HSA_STATUS_ERROR_INVALID_SIGNAL
        }
    })
}

fn with_signal<R: Copy>(
    signal: hsa_signal_t,
    call: &str,
    fallback: R,
    f: impl FnOnce(&signal::Signal) -> R,
) -> R {
    guard(fallback, || match signal::get(signal.handle) {
        Some(s) => f(&s),
        None => {
            breach(&format!(
                "{call}: {:#x} is not a live signal",
                signal.handle
            ));
            fallback
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_signal_store_screlease(signal: hsa_signal_t, value: hsa_signal_value_t) {
    with_signal(signal, "hsa_signal_store_screlease", (), |s| s.store(value))
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_signal_load_scacquire(signal: hsa_signal_t) -> hsa_signal_value_t {
    with_signal(signal, "hsa_signal_load_scacquire", i64::MIN, |s| s.load())
}

#[unsafe(no_mangle)]
pub extern "C" fn hsa_signal_wait_scacquire(
    signal: hsa_signal_t,
    condition: hsa_signal_condition_t,
    compare_value: hsa_signal_value_t,
    timeout_hint: u64,
    _wait_state_hint: hsa_wait_state_t,
) -> hsa_signal_value_t {
    with_signal(signal, "hsa_signal_wait_scacquire", i64::MIN, |s| {
        s.wait(condition, compare_value, timeout_hint)
    })
}

/// What tests can learn about the agent's state (not part of HSA).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct NpuHarnessHsaStats {
    pub init_refcount: u64,
    pub live_allocations: u64,
    pub live_bytes: u64,
    pub dev_heap_bytes: u64,
    pub live_signals: u64,
    pub live_queues: u64,
    pub live_executables: u64,
    pub packets_completed: u64,
    pub packets_failed: u64,
    pub breaches: u64,
    pub leaked_at_shutdown: u64,
    pub initialisations: u64,
    /// Pool allocations made since the process started (appended last: readers index the
    /// fields in order).
    pub allocations_made: u64,
}

/// Fills `out` (test-only export). Returns 0, or -1 for a null pointer.
///
/// # Safety
/// `out` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_harness_hsa_stats(out: *mut NpuHarnessHsaStats) -> c_int {
    guard(-1, || {
        if out.is_null() {
            return -1;
        }
        let (live_allocations, live_bytes, dev_heap_bytes) = memory::usage();
        let stats = NpuHarnessHsaStats {
            init_refcount: state::refcount(),
            live_allocations,
            live_bytes,
            dev_heap_bytes,
            live_signals: signal::live(),
            live_queues: queue::live(),
            live_executables: code::live_executables(),
            packets_completed: STATS.packets_completed.load(Ordering::Relaxed),
            packets_failed: STATS.packets_failed.load(Ordering::Relaxed),
            breaches: STATS.breaches.load(Ordering::Relaxed),
            leaked_at_shutdown: STATS.leaked_at_shutdown.load(Ordering::Relaxed),
            initialisations: STATS.initialisations.load(Ordering::Relaxed),
            allocations_made: memory::allocations_made(),
        };
        // SAFETY: checked non-null.
        unsafe { out.write(stats) };
        0
    })
}

/// Copies the last recorded error (NUL-terminated, truncated) into `buf`; returns its full
/// length in bytes (test-only export).
///
/// # Safety
/// `buf` must be null or valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn npu_harness_hsa_last_error(buf: *mut c_char, len: usize) -> usize {
    guard(0, || {
        let message = state::last_error();
        if !buf.is_null() && len > 0 {
            let n = message.len().min(len - 1);
            // SAFETY: the caller's buffer of `len` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(message.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        message.len()
    })
}

/// Compile-time proof that every export has the signature `hsa-sys` loads it with.
#[allow(dead_code)]
fn exports_match_hsa_sys(api: &HsaApi) {
    macro_rules! same {
        ($($f:ident),* $(,)?) => { $( let _ = [api.$f, $f]; )* };
    }
    same!(
        hsa_init,
        hsa_shut_down,
        hsa_status_string,
        hsa_system_get_info,
        hsa_iterate_agents,
        hsa_agent_get_info,
        hsa_amd_agent_iterate_memory_pools,
        hsa_amd_memory_pool_get_info,
        hsa_amd_memory_pool_allocate,
        hsa_amd_memory_pool_free,
        hsa_code_object_reader_create_from_file,
        hsa_code_object_reader_create_from_memory,
        hsa_code_object_reader_destroy,
        hsa_executable_create_alt,
        hsa_executable_destroy,
        hsa_executable_agent_global_variable_define,
        hsa_executable_load_agent_code_object,
        hsa_executable_freeze,
        hsa_executable_get_symbol_by_name,
        hsa_executable_symbol_get_info,
        hsa_queue_create,
        hsa_queue_destroy,
        hsa_queue_load_write_index_relaxed,
        hsa_queue_store_write_index_screlease,
        hsa_queue_load_read_index_scacquire,
        hsa_signal_create,
        hsa_signal_destroy,
        hsa_signal_store_screlease,
        hsa_signal_load_scacquire,
        hsa_signal_wait_scacquire,
    );
}
