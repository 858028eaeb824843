//! Agents and their memory pools: handles only ROCr hands out, and what ROCr says about them.

use std::ffi::c_void;

use hsa_sys::*;

use super::{Hsa, HsaError};

/// An agent ROCr reported. Only iteration makes one, so every handle is ROCr's own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Agent(hsa_agent_t);

/// What kind of processor an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceType {
    Cpu,
    Gpu,
    Dsp,
    Aie,
    Unknown(u32),
}

impl DeviceType {
    fn from_raw(value: hsa_device_type_t) -> DeviceType {
        match value {
            HSA_DEVICE_TYPE_CPU => DeviceType::Cpu,
            HSA_DEVICE_TYPE_GPU => DeviceType::Gpu,
            HSA_DEVICE_TYPE_DSP => DeviceType::Dsp,
            HSA_DEVICE_TYPE_AIE => DeviceType::Aie,
            other => DeviceType::Unknown(other),
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            DeviceType::Cpu => "CPU",
            DeviceType::Gpu => "GPU",
            DeviceType::Dsp => "DSP",
            DeviceType::Aie => "AIE",
            DeviceType::Unknown(_) => "unknown",
        }
    }
}

/// A memory pool of an agent, as iteration found it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pool(hsa_amd_memory_pool_t);

/// What ROCr says about a pool (the attributes the AIE pools are told apart by).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolInfo {
    pub pool: Pool,
    pub global: bool,
    pub kernarg_init: bool,
    pub coarse_grained: bool,
    pub alloc_allowed: bool,
    pub rec_granule: usize,
}

/// An iteration callback that appends each item to the `Vec<T>` passed as `data`.
unsafe extern "C" fn collect<T>(item: T, data: *mut c_void) -> hsa_status_t {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `data` is the Vec<T> the iterating call was given, which outlives it.
        let found = unsafe { &mut *(data as *mut Vec<T>) };
        found.push(item);
    }));
    match outcome {
        Ok(()) => HSA_STATUS_SUCCESS,
        Err(_) => HSA_STATUS_ERROR,
    }
}

impl Hsa {
    /// Every agent ROCr reports, in its order.
    pub fn agents(&self) -> Result<Vec<Agent>, HsaError> {
        let mut found: Vec<hsa_agent_t> = Vec::new();
        // SAFETY: collect matches the callback type and gets `found` as data, which outlives
        // the call.
        let rc = unsafe {
            self.api().hsa_iterate_agents(
                Some(collect::<hsa_agent_t>),
                (&mut found as *mut Vec<hsa_agent_t>).cast(),
            )
        };
        self.check("hsa_iterate_agents", rc)?;
        Ok(found.into_iter().map(Agent).collect())
    }

    pub fn device_type(&self, agent: Agent) -> Result<DeviceType, HsaError> {
        let mut device: hsa_device_type_t = u32::MAX;
        // SAFETY: HSA_AGENT_INFO_DEVICE writes a hsa_device_type_t.
        let rc = unsafe {
            self.api().hsa_agent_get_info(
                agent.0,
                HSA_AGENT_INFO_DEVICE,
                (&mut device as *mut u32).cast(),
            )
        };
        self.check("hsa_agent_get_info(DEVICE)", rc)?;
        Ok(DeviceType::from_raw(device))
    }

    /// `HSA_AGENT_INFO_NAME` (`aie2`, `aie2p`, a GPU's `gfx…`).
    pub fn agent_name(&self, agent: Agent) -> Result<String, HsaError> {
        let mut name = [0u8; 64];
        // SAFETY: HSA_AGENT_INFO_NAME writes char[64].
        let rc = unsafe {
            self.api()
                .hsa_agent_get_info(agent.0, HSA_AGENT_INFO_NAME, name.as_mut_ptr().cast())
        };
        self.check("hsa_agent_get_info(NAME)", rc)?;
        let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
        Ok(String::from_utf8_lossy(&name[..end]).trim().to_owned())
    }

    /// A 32-bit agent attribute: queue sizes, the compute-unit (column) count.
    pub fn agent_u32(&self, agent: Agent, attribute: AgentU32) -> Option<u32> {
        let attribute = match attribute {
            AgentU32::QueueMinSize => HSA_AGENT_INFO_QUEUE_MIN_SIZE,
            AgentU32::QueueMaxSize => HSA_AGENT_INFO_QUEUE_MAX_SIZE,
            AgentU32::ComputeUnits => HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT,
        };
        let mut v = 0u32;
        // SAFETY: each attribute asked for here writes a uint32_t.
        let rc = unsafe {
            self.api()
                .hsa_agent_get_info(agent.0, attribute, (&mut v as *mut u32).cast())
        };
        (rc == HSA_STATUS_SUCCESS).then_some(v)
    }

    /// The agent's pools with the attributes that tell the AIE pools apart. A ROCr that
    /// cannot report `RUNTIME_ALLOC_REC_GRANULE` fails here: it predates AIE support.
    pub fn pools(&self, agent: Agent) -> Result<Vec<PoolInfo>, HsaError> {
        let mut found: Vec<hsa_amd_memory_pool_t> = Vec::new();
        // SAFETY: collect matches the callback type and gets `found` as data, which outlives
        // the call.
        let rc = unsafe {
            self.api().hsa_amd_agent_iterate_memory_pools(
                agent.0,
                Some(collect::<hsa_amd_memory_pool_t>),
                (&mut found as *mut Vec<hsa_amd_memory_pool_t>).cast(),
            )
        };
        self.check("hsa_amd_agent_iterate_memory_pools", rc)?;
        found
            .into_iter()
            .map(|pool| {
                let segment: u32 = self.pool_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT)?;
                let flags: u32 = self.pool_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS)?;
                let alloc_allowed: bool =
                    self.pool_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED)?;
                let rec_granule: usize =
                    self.pool_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE)?;
                Ok(PoolInfo {
                    pool: Pool(pool),
                    global: segment == HSA_AMD_SEGMENT_GLOBAL,
                    kernarg_init: flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT != 0,
                    coarse_grained: flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED != 0,
                    alloc_allowed,
                    rec_granule,
                })
            })
            .collect()
    }

    fn pool_info<T: PoolValue>(
        &self,
        pool: hsa_amd_memory_pool_t,
        attribute: hsa_amd_memory_pool_info_t,
    ) -> Result<T, HsaError> {
        let mut v = T::default();
        // SAFETY: every attribute asked for writes a value of type T (PoolValue is only
        // implemented for the C types these attributes write: u32, bool, size_t).
        let rc = unsafe {
            self.api()
                .hsa_amd_memory_pool_get_info(pool, attribute, (&mut v as *mut T).cast())
        };
        self.check("hsa_amd_memory_pool_get_info", rc)?;
        Ok(v)
    }

    pub(super) fn agent_handle(&self, agent: Agent) -> hsa_agent_t {
        agent.0
    }

    pub(super) fn pool_handle(&self, pool: Pool) -> hsa_amd_memory_pool_t {
        pool.0
    }
}

/// The 32-bit agent attributes the runtime reads.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AgentU32 {
    QueueMinSize,
    QueueMaxSize,
    ComputeUnits,
}

/// Types a pool attribute is written as.
trait PoolValue: Default {}
impl PoolValue for u32 {}
impl PoolValue for bool {}
impl PoolValue for usize {}
