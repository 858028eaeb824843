//! One initialised ROCr with its AIE agent: the agent's name and columns, its queue size, and
//! its memory pools, found the way ROCr's own AIE tests identify them.

use std::path::PathBuf;
use std::sync::Arc;

use hsa_sys::HsaLibrary;

use super::discovery;
use crate::RuntimeError;
use crate::raw::hsa::{Agent, AgentU32, DeviceType, Hsa, HsaError, Pool, PoolInfo};

/// The AIE agent's memory pools.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pools {
    /// `KERNARG_INIT`, allocatable: the kernarg blocks.
    pub kernarg: Pool,
    /// `COARSE`, allocatable, not `KERNARG_INIT`: tensors.
    pub data: Pool,
    /// `COARSE` with recommended granule 0: the device heap (device-SVM), where ROCr's loader
    /// puts code and where external variables must live.
    pub dev_heap: Option<Pool>,
}

/// An initialised ROCr and its AIE agent. ROCr shuts down once this and everything made
/// through it are gone.
pub(crate) struct Session {
    pub hsa: Arc<Hsa>,
    pub agent: Agent,
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
            .field("library", &self.hsa.library_path())
            .field("agent_name", &self.agent_name)
            .field("columns", &self.columns)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Initialises ROCr from `lib` and finds the AIE agent.
    pub fn open(lib: HsaLibrary) -> Result<Session, RuntimeError> {
        let hsa = Hsa::init(lib).map_err(|e| {
            RuntimeError::NoDevice(format!(
                "ROCr at {} could not initialise: hsa_init returned {}. This is what a ROCr \
                 without an NPU driver reports: check that the amdxdna kernel driver is loaded \
                 (/dev/accel/accel0 exists) and that this ROCr is AIE-capable. {}",
                e.library.display(),
                e.error.text,
                super::discovery::INSTALL_HINT
            ))
        })?;
        let path = hsa.library_path().to_owned();
        let agent = find_aie_agent(&hsa, &path)?;
        let agent_name = hsa.agent_name(agent)?;
        let columns = hsa
            .agent_u32(agent, AgentU32::ComputeUnits)
            .filter(|c| *c > 0);
        let min = hsa.agent_u32(agent, AgentU32::QueueMinSize).unwrap_or(64);
        let max = hsa.agent_u32(agent, AgentU32::QueueMaxSize).unwrap_or(64);
        // Upstream asks for 32 packets clamped to the agent's range (the AIE agent: exactly 64).
        let queue_size = 32u32
            .clamp(min.max(1), max.max(min).max(1))
            .next_power_of_two();
        let pools = find_pools(&hsa, agent, &agent_name, &path)?;
        // The wait timeout is only a hint; wall-clock deadlines still bound the wait.
        let timestamp_frequency = hsa.timestamp_frequency().unwrap_or(1_000_000_000);
        Ok(Session {
            hsa,
            agent,
            agent_name,
            columns,
            queue_size,
            pools,
            timestamp_frequency,
        })
    }

    pub fn library_path(&self) -> PathBuf {
        self.hsa.library_path().to_owned()
    }
}

/// Discovery that accepts a ROCr only once it initialises and reports an AIE agent: the
/// search result, and the first such failure (what to report when nothing was accepted).
pub(crate) fn discover(
    config: &npu_target::Config,
    site_packages: &[PathBuf],
) -> (discovery::Discovery<Session>, Option<RuntimeError>) {
    let mut device_error = None;
    let found = discovery::discover_with(config, site_packages, |_, library| {
        Session::open(library).map_err(|e| {
            let reason = e
                .to_string()
                .replace(discovery::INSTALL_HINT, "")
                .trim()
                .to_owned();
            device_error.get_or_insert(e);
            reason
        })
    });
    (found, device_error)
}

/// The first agent of type AIE, or an error listing the agents ROCr reported.
fn find_aie_agent(hsa: &Hsa, path: &std::path::Path) -> Result<Agent, RuntimeError> {
    let mut others = Vec::new();
    for agent in hsa.agents()? {
        let kind = hsa
            .device_type(agent)
            .unwrap_or(DeviceType::Unknown(u32::MAX));
        if kind == DeviceType::Aie {
            return Ok(agent);
        }
        let name = hsa.agent_name(agent).unwrap_or_else(|_| "?".to_owned());
        others.push(format!("{} {name:?}", kind.describe()));
    }
    Err(RuntimeError::NoDevice(format!(
        "ROCr at {} initialised but reports no AIE agent (HSA_DEVICE_TYPE_AIE); agents seen: \
         {}. Either the amdxdna NPU driver is not loaded or this ROCr has no AIE support. {}",
        path.display(),
        if others.is_empty() {
            "none".to_owned()
        } else {
            others.join(", ")
        },
        super::discovery::INSTALL_HINT
    )))
}

/// Tells the AIE pools apart by their flags and recommended granule.
fn find_pools(
    hsa: &Hsa,
    agent: Agent,
    agent_name: &str,
    path: &std::path::Path,
) -> Result<Pools, RuntimeError> {
    let infos: Vec<PoolInfo> = hsa.pools(agent).map_err(|e: HsaError| {
        if e.call == "hsa_amd_memory_pool_get_info" {
            RuntimeError::NoDevice(format!(
                "ROCr at {}: the AIE agent's memory pools cannot be read: {e} (a ROCr without \
                 RUNTIME_ALLOC_REC_GRANULE predates AIE support)",
                path.display()
            ))
        } else {
            e.into()
        }
    })?;
    let (mut kernarg, mut data, mut dev_heap) = (None, None, None);
    for info in infos.iter().filter(|i| i.global) {
        if info.coarse_grained && info.rec_granule == 0 {
            dev_heap.get_or_insert(info.pool);
        } else if info.kernarg_init && info.alloc_allowed && info.rec_granule != 0 {
            kernarg.get_or_insert(info.pool);
        } else if info.coarse_grained && info.alloc_allowed && info.rec_granule != 0 {
            data.get_or_insert(info.pool);
        }
    }
    let (kernarg, data) = match (kernarg, data) {
        (Some(k), Some(d)) => (k, d),
        (Some(k), None) => (k, k),
        (None, Some(d)) => (d, d),
        (None, None) => {
            return Err(RuntimeError::NoDevice(format!(
                "ROCr at {}: the AIE agent {agent_name:?} has no allocatable system memory pool \
                 for kernel arguments and tensors",
                path.display()
            )));
        }
    };
    Ok(Pools {
        kernarg,
        data,
        dev_heap,
    })
}
