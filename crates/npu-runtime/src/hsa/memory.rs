//! The staging pool: device-visible buffers that host arguments are copied through, reused
//! across dispatches (ROCr allocations are slow).

use std::collections::HashMap;

use super::session::Session;
use crate::RuntimeError;
use crate::raw::hsa::PoolAllocation;

/// Staging buffers by size class.
pub(crate) struct StagingPool {
    free: HashMap<usize, Vec<PoolAllocation>>,
    pooled_bytes: usize,
}

/// Buffers kept per size class, and in total, between dispatches.
const KEEP_PER_CLASS: usize = 8;
const KEEP_BYTES: usize = 256 << 20;

impl StagingPool {
    pub fn new() -> StagingPool {
        StagingPool {
            free: HashMap::new(),
            pooled_bytes: 0,
        }
    }

    fn class(len: usize) -> usize {
        len.max(4096).next_power_of_two()
    }

    /// A buffer of at least `len` bytes from the agent's data pool.
    pub fn take(&mut self, session: &Session, len: usize) -> Result<PoolAllocation, RuntimeError> {
        let class = Self::class(len);
        if let Some(buffer) = self.free.get_mut(&class).and_then(Vec::pop) {
            self.pooled_bytes -= class;
            return Ok(buffer);
        }
        Ok(PoolAllocation::new(
            &session.hsa,
            session.pools.data,
            class,
        )?)
    }

    pub fn give_back(&mut self, buffer: PoolAllocation) {
        let class = buffer.len();
        let slot = self.free.entry(class).or_default();
        if slot.len() < KEEP_PER_CLASS && self.pooled_bytes + class <= KEEP_BYTES {
            self.pooled_bytes += class;
            slot.push(buffer);
        }
    }
}
