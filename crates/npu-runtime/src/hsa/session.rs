//! One initialised ROCr: `hsa_init`, the AIE agent, its name and columns, and the pools.

use std::ffi::c_void;
use std::path::{Path, PathBuf};

use hsa_sys::*;

use crate::RuntimeError;

/// A call's status as an error naming the call and ROCr's text for the status.
pub(crate) fn check(
    lib: &HsaLibrary,
    call: &str,
    status: hsa_status_t,
) -> Result<(), RuntimeError> {
    if status == HSA_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(RuntimeError::Call {
            call: call.to_owned(),
            reason: lib.status_text(status),
        })
    }
}

/// The AIE agent's memory pools, found the way ROCr's own AIE tests identify them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pools {
    /// `KERNARG_INIT`, allocatable: the kernarg blocks.
    pub kernarg: hsa_amd_memory_pool_t,
    /// `COARSE`, allocatable, not `KERNARG_INIT`: tensors and external variables.
    pub data: hsa_amd_memory_pool_t,
    /// `COARSE` with recommended granule 0: the device heap ROCr's loader fills (reported only).
    pub dev_heap: Option<hsa_amd_memory_pool_t>,
}

/// An initialised ROCr and its AIE agent. Dropping it calls `hsa_shut_down`.
pub(crate) struct Session {
    pub lib: &'static HsaLibrary,
    pub agent: hsa_agent_t,
    pub agent_name: String,
    /// `HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT` when the agent reports it (non-zero).
    pub columns: Option<u32>,
    pub queue_size: u32,
    pub pools: Pools,
    /// Ticks per second of signal-wait timeouts.
    pub timestamp_frequency: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("library", &self.lib.path())
            .field("agent_name", &self.agent_name)
            .field("columns", &self.columns)
            .finish_non_exhaustive()
    }
}

struct AgentScan {
    lib: &'static HsaLibrary,
    aie: Option<hsa_agent_t>,
    others: Vec<String>,
}

unsafe extern "C" fn visit_agent(agent: hsa_agent_t, data: *mut c_void) -> hsa_status_t {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `data` is the AgentScan passed to hsa_iterate_agents below.
        let scan = unsafe { &mut *(data as *mut AgentScan) };
        let api = scan.lib.api();
        let mut device: hsa_device_type_t = u32::MAX;
        // SAFETY: HSA_AGENT_INFO_DEVICE writes a hsa_device_type_t.
        let rc = unsafe {
            api.hsa_agent_get_info(
                agent,
                HSA_AGENT_INFO_DEVICE,
                (&mut device as *mut u32).cast(),
            )
        };
        if rc == HSA_STATUS_SUCCESS && device == HSA_DEVICE_TYPE_AIE {
            scan.aie.get_or_insert(agent);
        } else {
            let kind = match device {
                HSA_DEVICE_TYPE_CPU => "CPU",
                HSA_DEVICE_TYPE_GPU => "GPU",
                HSA_DEVICE_TYPE_DSP => "DSP",
                _ => "unknown",
            };
            let name = agent_name(scan.lib, agent).unwrap_or_else(|_| "?".to_owned());
            scan.others.push(format!("{kind} {name:?}"));
        }
    }));
    match outcome {
        Ok(()) => HSA_STATUS_SUCCESS,
        Err(_) => HSA_STATUS_ERROR,
    }
}

fn agent_name(lib: &HsaLibrary, agent: hsa_agent_t) -> Result<String, RuntimeError> {
    let mut name = [0u8; 64];
    // SAFETY: HSA_AGENT_INFO_NAME writes char[64].
    let rc = unsafe {
        lib.api()
            .hsa_agent_get_info(agent, HSA_AGENT_INFO_NAME, name.as_mut_ptr().cast())
    };
    check(lib, "hsa_agent_get_info(NAME)", rc)?;
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).trim().to_owned())
}

fn agent_u32(lib: &HsaLibrary, agent: hsa_agent_t, attribute: u32) -> Option<u32> {
    let mut v = 0u32;
    // SAFETY: the attributes asked for here write a uint32_t.
    let rc = unsafe {
        lib.api()
            .hsa_agent_get_info(agent, attribute, (&mut v as *mut u32).cast())
    };
    (rc == HSA_STATUS_SUCCESS).then_some(v)
}

#[derive(Default)]
struct PoolScan {
    lib: Option<&'static HsaLibrary>,
    kernarg: Option<hsa_amd_memory_pool_t>,
    data: Option<hsa_amd_memory_pool_t>,
    dev_heap: Option<hsa_amd_memory_pool_t>,
    error: Option<String>,
}

fn pool_info<T: Default>(
    lib: &HsaLibrary,
    pool: hsa_amd_memory_pool_t,
    attr: u32,
) -> Result<T, hsa_status_t> {
    let mut v = T::default();
    // SAFETY: each attribute asked for writes a value of type T (u32, bool or size_t).
    let rc = unsafe {
        lib.api()
            .hsa_amd_memory_pool_get_info(pool, attr, (&mut v as *mut T).cast())
    };
    if rc == HSA_STATUS_SUCCESS {
        Ok(v)
    } else {
        Err(rc)
    }
}

unsafe extern "C" fn visit_pool(pool: hsa_amd_memory_pool_t, data: *mut c_void) -> hsa_status_t {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `data` is the PoolScan passed below.
        let scan = unsafe { &mut *(data as *mut PoolScan) };
        let Some(lib) = scan.lib else { return };
        let read = || -> Result<(u32, u32, bool, usize), hsa_status_t> {
            Ok((
                pool_info::<u32>(lib, pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT)?,
                pool_info::<u32>(lib, pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS)?,
                pool_info::<bool>(lib, pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED)?,
                pool_info::<usize>(
                    lib,
                    pool,
                    HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE,
                )?,
            ))
        };
        let (segment, flags, allowed, rec_granule) = match read() {
            Ok(v) => v,
            Err(status) => {
                scan.error = Some(format!(
                    "hsa_amd_memory_pool_get_info failed: {} (a ROCr without \
                     RUNTIME_ALLOC_REC_GRANULE predates AIE support)",
                    lib.status_text(status)
                ));
                return;
            }
        };
        if segment != HSA_AMD_SEGMENT_GLOBAL {
            return;
        }
        let kernarg_init = flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT != 0;
        let coarse = flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED != 0;
        if coarse && rec_granule == 0 {
            scan.dev_heap.get_or_insert(pool);
        } else if kernarg_init && allowed && rec_granule != 0 {
            scan.kernarg.get_or_insert(pool);
        } else if coarse && allowed && rec_granule != 0 {
            scan.data.get_or_insert(pool);
        }
    }));
    match outcome {
        Ok(()) => HSA_STATUS_SUCCESS,
        Err(_) => HSA_STATUS_ERROR,
    }
}

impl Session {
    /// Initialises ROCr from `lib` and finds the AIE agent.
    pub fn open(lib: HsaLibrary) -> Result<Session, RuntimeError> {
        // Once hsa_init has run, the library may own threads and state: it stays loaded for
        // the life of the process, like a linked ROCr.
        let lib: &'static HsaLibrary = Box::leak(Box::new(lib));
        let path = lib.path().to_owned();
        let api = lib.api();
        // SAFETY: hsa_init takes no arguments; it is reference-counted.
        let rc = unsafe { api.hsa_init() };
        if rc != HSA_STATUS_SUCCESS {
            return Err(RuntimeError::NoDevice(format!(
                "ROCr at {} could not initialise: hsa_init returned {}. This is what a ROCr \
                 without an NPU driver reports: check that the amdxdna kernel driver is loaded \
                 (/dev/accel/accel0 exists) and that this ROCr is AIE-capable. {}",
                path.display(),
                lib.status_text(rc),
                super::discovery::INSTALL_HINT
            )));
        }
        Session::after_init(lib, &path).inspect_err(|_| {
            // SAFETY: balances the successful hsa_init above.
            unsafe { api.hsa_shut_down() };
        })
    }

    fn after_init(lib: &'static HsaLibrary, path: &Path) -> Result<Session, RuntimeError> {
        let api = lib.api();
        let mut scan = AgentScan {
            lib,
            aie: None,
            others: Vec::new(),
        };
        // SAFETY: visit_agent matches the callback type and gets `scan` as data.
        let rc = unsafe {
            api.hsa_iterate_agents(Some(visit_agent), (&mut scan as *mut AgentScan).cast())
        };
        check(lib, "hsa_iterate_agents", rc)?;
        let Some(agent) = scan.aie else {
            return Err(RuntimeError::NoDevice(format!(
                "ROCr at {} initialised but reports no AIE agent (HSA_DEVICE_TYPE_AIE); agents \
                 seen: {}. Either the amdxdna NPU driver is not loaded or this ROCr has no AIE \
                 support. {}",
                path.display(),
                if scan.others.is_empty() {
                    "none".to_owned()
                } else {
                    scan.others.join(", ")
                },
                super::discovery::INSTALL_HINT
            )));
        };
        let agent_name = agent_name(lib, agent)?;
        let columns =
            agent_u32(lib, agent, HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT).filter(|c| *c > 0);
        let min = agent_u32(lib, agent, HSA_AGENT_INFO_QUEUE_MIN_SIZE).unwrap_or(64);
        let max = agent_u32(lib, agent, HSA_AGENT_INFO_QUEUE_MAX_SIZE).unwrap_or(64);
        // Upstream asks for 32 packets clamped to the agent's range (the AIE agent: exactly 64).
        let queue_size = 32u32
            .clamp(min.max(1), max.max(min).max(1))
            .next_power_of_two();

        let mut pools = PoolScan {
            lib: Some(lib),
            ..PoolScan::default()
        };
        // SAFETY: visit_pool matches the callback type and gets `pools` as data.
        let rc = unsafe {
            api.hsa_amd_agent_iterate_memory_pools(
                agent,
                Some(visit_pool),
                (&mut pools as *mut PoolScan).cast(),
            )
        };
        check(lib, "hsa_amd_agent_iterate_memory_pools", rc)?;
        if let Some(error) = pools.error {
            return Err(RuntimeError::NoDevice(format!(
                "ROCr at {}: the AIE agent's memory pools cannot be read: {error}",
                path.display()
            )));
        }
        let (kernarg, data) = match (pools.kernarg, pools.data) {
            (Some(k), Some(d)) => (k, d),
            (Some(k), None) => (k, k),
            (None, Some(d)) => (d, d),
            (None, None) => {
                return Err(RuntimeError::NoDevice(format!(
                    "ROCr at {}: the AIE agent {agent_name:?} has no allocatable system memory \
                     pool for kernel arguments and tensors",
                    path.display()
                )));
            }
        };
        let mut frequency = 0u64;
        // SAFETY: TIMESTAMP_FREQUENCY writes a uint64_t.
        let rc = unsafe {
            api.hsa_system_get_info(
                HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY,
                (&mut frequency as *mut u64).cast(),
            )
        };
        if rc != HSA_STATUS_SUCCESS || frequency == 0 {
            // The wait timeout is only a hint; wall-clock deadlines still bound the wait.
            frequency = 1_000_000_000;
        }
        Ok(Session {
            lib,
            agent,
            agent_name,
            columns,
            queue_size,
            pools: Pools {
                kernarg,
                data,
                dev_heap: pools.dev_heap,
            },
            timestamp_frequency: frequency,
        })
    }

    pub fn api(&self) -> &'static HsaApi {
        self.lib.api()
    }

    pub fn check(&self, call: &str, status: hsa_status_t) -> Result<(), RuntimeError> {
        check(self.lib, call, status)
    }

    pub fn library_path(&self) -> PathBuf {
        self.lib.path().to_owned()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: balances the hsa_init of `open`; every object made through this session
        // holds an Arc to it, so none is left.
        unsafe { self.api().hsa_shut_down() };
    }
}
