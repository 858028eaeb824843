//! Process-wide state of the software runtime: the reference count of `hsa_init`, the agent's
//! configuration (read from the environment at the first `hsa_init`), the last error and the
//! counters tests read through `npu_harness_hsa_stats`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hsa_sys::*;

/// The fault `NPU_HARNESS_FAULT` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Call the queue's error callback, set the completion signal negative, suspend the queue.
    QueueError,
    /// Never complete the packet.
    Hang,
    /// Complete the packet with a negative completion signal.
    SignalNegative,
}

/// A fault and the (1-based) packet it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub packet: u64,
}

/// What the agent looks like, fixed at the first `hsa_init`.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `aie2` or `aie2p` (`NPU_HARNESS_AGENT`); `none` reports no AIE agent at all.
    pub name: String,
    /// Columns the agent reports (`NPU_HARNESS_COLUMNS`, default 4 for aie2, 8 for aie2p).
    pub columns: u32,
    pub fault: Option<Fault>,
    /// `NPU_HARNESS_DOORBELL=sync`: run packets inside the doorbell store, as ROCr's XDNA
    /// driver does, instead of on the queue's worker thread.
    pub sync_doorbell: bool,
    /// How long an injected hang lasts with a synchronous doorbell before it ends in a queue
    /// error, like the kernel driver's own timeout (`NPU_HARNESS_HANG_MS`, default 1000).
    pub sync_hang: std::time::Duration,
    /// `NPU_HARNESS_NOOP_DEVICE=1`: a packet that passes every check completes at once,
    /// without running its program (benchmarks measure the host's part of a launch with it).
    pub noop_device: bool,
}

impl AgentConfig {
    fn from_env() -> Result<AgentConfig, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let name = var("NPU_HARNESS_AGENT").unwrap_or_else(|| "aie2p".to_owned());
        let default_columns = match name.as_str() {
            "aie2" => 4,
            "aie2p" => 8,
            // A ROCr that initialises but has no AIE agent (e.g. a GPU-only ROCm).
            "none" => 0,
            other => {
                return Err(format!(
                    "NPU_HARNESS_AGENT={other:?} is not an AIE agent name; use aie2, aie2p or \
                     none"
                ));
            }
        };
        let columns = match var("NPU_HARNESS_COLUMNS") {
            None => default_columns,
            Some(v) => v
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|c| *c >= 1)
                .ok_or_else(|| {
                    format!("NPU_HARNESS_COLUMNS={v:?} is not a column count (a whole number ≥ 1)")
                })?,
        };
        let columns = if name == "none" { 0 } else { columns };
        let fault = match var("NPU_HARNESS_FAULT") {
            None => None,
            Some(v) => Some(parse_fault(v.trim())?),
        };
        let sync_doorbell = match var("NPU_HARNESS_DOORBELL").as_deref().map(str::trim) {
            None | Some("async") => false,
            Some("sync") => true,
            Some(other) => {
                return Err(format!(
                    "NPU_HARNESS_DOORBELL={other:?} is not a doorbell mode; use sync or async"
                ));
            }
        };
        let sync_hang = match var("NPU_HARNESS_HANG_MS") {
            None => 1000,
            Some(v) => v.trim().parse::<u64>().map_err(|_| {
                format!("NPU_HARNESS_HANG_MS={v:?} is not a number of milliseconds")
            })?,
        };
        let noop_device = match var("NPU_HARNESS_NOOP_DEVICE").as_deref().map(str::trim) {
            None | Some("0") => false,
            Some("1") => true,
            Some(other) => {
                return Err(format!("NPU_HARNESS_NOOP_DEVICE={other:?} is not 0 or 1"));
            }
        };
        Ok(AgentConfig {
            name,
            columns,
            fault,
            sync_doorbell,
            noop_device,
            sync_hang: std::time::Duration::from_millis(sync_hang),
        })
    }
}

/// `kind` or `kind:N` (fault the N-th packet, default the first).
fn parse_fault(value: &str) -> Result<Fault, String> {
    let (kind, packet) = match value.split_once(':') {
        Some((k, n)) => (k, n.parse::<u64>().ok().filter(|n| *n >= 1)),
        None => (value, Some(1)),
    };
    let kind = match kind {
        "queue_error" => Some(FaultKind::QueueError),
        "hang" => Some(FaultKind::Hang),
        "signal_negative" => Some(FaultKind::SignalNegative),
        _ => None,
    };
    match (kind, packet) {
        (Some(kind), Some(packet)) => Ok(Fault { kind, packet }),
        _ => Err(format!(
            "NPU_HARNESS_FAULT={value:?} is not a fault; use queue_error, hang or \
             signal_negative, optionally with :N for the N-th packet"
        )),
    }
}

struct Init {
    refcount: u64,
    config: Option<Arc<AgentConfig>>,
}

static INIT: Mutex<Init> = Mutex::new(Init {
    refcount: 0,
    config: None,
});

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `hsa_init`: reads the configuration the first time; reference-counted.
pub fn init() -> hsa_status_t {
    let mut init = lock(&INIT);
    if init.refcount == 0 {
        match AgentConfig::from_env() {
            Ok(config) => {
                init.config = Some(Arc::new(config));
                STATS.initialisations.fetch_add(1, Ordering::Relaxed);
            }
            Err(message) => {
                breach(&message);
                return HSA_STATUS_ERROR_INVALID_ARGUMENT;
            }
        }
    }
    init.refcount += 1;
    HSA_STATUS_SUCCESS
}

/// `hsa_shut_down`: the last one releases everything and reports what was never released.
pub fn shut_down() -> hsa_status_t {
    let mut init = lock(&INIT);
    if init.refcount == 0 {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    }
    init.refcount -= 1;
    if init.refcount == 0 {
        init.config = None;
        drop(init);
        let leaks = crate::queue::destroy_all()
            + crate::code::destroy_all()
            + crate::signal::destroy_all()
            + crate::memory::free_all();
        if leaks > 0 {
            STATS.leaked_at_shutdown.fetch_add(leaks, Ordering::Relaxed);
            breach(&format!(
                "hsa_shut_down: {leaks} queues, executables, signals or allocations were never \
                 released"
            ));
        }
    }
    HSA_STATUS_SUCCESS
}

/// The configuration, or `NOT_INITIALIZED` before `hsa_init`.
pub fn config() -> Result<Arc<AgentConfig>, hsa_status_t> {
    lock(&INIT)
        .config
        .clone()
        .ok_or(HSA_STATUS_ERROR_NOT_INITIALIZED)
}

pub fn refcount() -> u64 {
    lock(&INIT).refcount
}

/// Counters for tests.
pub struct Stats {
    /// `hsa_init` calls that initialised the runtime (reference count 0 → 1): what a real ROCr
    /// pays dearly for (it walks the kernel driver's topology), so tests count them.
    pub initialisations: AtomicU64,
    pub packets_completed: AtomicU64,
    pub packets_failed: AtomicU64,
    pub leaked_at_shutdown: AtomicU64,
    pub breaches: AtomicU64,
}

pub static STATS: Stats = Stats {
    initialisations: AtomicU64::new(0),
    packets_completed: AtomicU64::new(0),
    packets_failed: AtomicU64::new(0),
    leaked_at_shutdown: AtomicU64::new(0),
    breaches: AtomicU64::new(0),
};

static LAST_ERROR: Mutex<String> = Mutex::new(String::new());

/// Records an error of the simulated device (the kernel could not run).
pub fn device_error(message: &str) {
    eprintln!("npu-harness-hsa: {message}");
    *lock(&LAST_ERROR) = message.to_owned();
}

/// Records a broken rule of the HSA contract, loudly.
pub fn breach(rule: &str) {
    STATS.breaches.fetch_add(1, Ordering::Relaxed);
    device_error(rule);
}

pub fn last_error() -> String {
    lock(&LAST_ERROR).clone()
}

static NEXT_HANDLE: AtomicU64 = AtomicU64::new(0x1000);

/// A fresh, never reused, non-zero handle value.
pub fn next_handle() -> u64 {
    NEXT_HANDLE.fetch_add(0x10, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_with_an_optional_packet_number() {
        assert_eq!(
            parse_fault("hang").unwrap(),
            Fault {
                kind: FaultKind::Hang,
                packet: 1
            }
        );
        assert_eq!(
            parse_fault("queue_error:3").unwrap(),
            Fault {
                kind: FaultKind::QueueError,
                packet: 3
            }
        );
        assert!(parse_fault("signal_negative:0").is_err());
        let err = parse_fault("explode").unwrap_err();
        assert!(
            err.contains("explode") && err.contains("queue_error"),
            "{err}"
        );
    }
}
