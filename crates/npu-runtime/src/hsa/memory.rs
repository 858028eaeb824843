//! The staging pool: device-visible buffers that host arguments are copied through, reused
//! across dispatches (ROCr allocations are slow).

use super::session::Session;
use crate::RuntimeError;
use crate::raw::hsa::PoolAllocation;

/// Staging buffers by size class: a short list searched in order (a process sees few size
/// classes, powers of two, so this beats hashing on every dispatch).
pub(crate) struct StagingPool {
    free: Vec<(usize, Vec<PoolAllocation>)>,
    pooled_bytes: usize,
}

/// Buffers kept per size class, and in total, between dispatches. A dispatch stages at most
/// `MAX_KERNEL_ARGS` buffers, all possibly of one class: keeping fewer made every launch of a
/// kernel with more same-sized arguments than that allocate and free the rest (an ioctl each
/// in ROCr).
const KEEP_PER_CLASS: usize = crate::MAX_KERNEL_ARGS;
const KEEP_BYTES: usize = 256 << 20;

impl StagingPool {
    pub fn new() -> StagingPool {
        StagingPool {
            free: Vec::new(),
            pooled_bytes: 0,
        }
    }

    fn class(len: usize) -> usize {
        len.max(4096).next_power_of_two()
    }

    /// A buffer of at least `len` bytes from the agent's data pool.
    pub fn take(&mut self, session: &Session, len: usize) -> Result<PoolAllocation, RuntimeError> {
        let class = Self::class(len);
        if let Some(buffer) = self
            .free
            .iter_mut()
            .find(|(c, _)| *c == class)
            .and_then(|(_, buffers)| buffers.pop())
        {
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
        let index = match self.free.iter().position(|(c, _)| *c == class) {
            Some(i) => i,
            None => {
                self.free.push((class, Vec::new()));
                self.free.len() - 1
            }
        };
        let slot = &mut self.free[index].1;
        if slot.len() < KEEP_PER_CLASS && self.pooled_bytes + class <= KEEP_BYTES {
            self.pooled_bytes += class;
            slot.push(buffer);
        }
    }
}
