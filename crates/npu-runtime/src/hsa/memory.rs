//! Device-visible memory: pool allocations, the staging pool that tensors are copied through,
//! and shared buffers that dispatches use in place.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use hsa_sys::*;

use super::session::Session;
use crate::{RuntimeError, SharedBuffer};

/// One allocation from an AIE pool, freed on drop.
pub(crate) struct DeviceMemory {
    session: Arc<Session>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the allocation is plain memory owned by this value; ROCr's free is thread-safe.
unsafe impl Send for DeviceMemory {}
unsafe impl Sync for DeviceMemory {}

impl DeviceMemory {
    pub fn allocate(
        session: &Arc<Session>,
        pool: hsa_amd_memory_pool_t,
        len: usize,
    ) -> Result<DeviceMemory, RuntimeError> {
        let mut ptr: *mut core::ffi::c_void = core::ptr::null_mut();
        // SAFETY: `ptr` is a valid out pointer; flags 0 as the AIE pools require.
        let rc = unsafe {
            session
                .api()
                .hsa_amd_memory_pool_allocate(pool, len.max(1), 0, &mut ptr)
        };
        session.check(&format!("hsa_amd_memory_pool_allocate({len} bytes)"), rc)?;
        Ok(DeviceMemory {
            session: session.clone(),
            ptr: ptr.cast(),
            len,
        })
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: allocated by hsa_amd_memory_pool_allocate and not freed elsewhere.
        let rc = unsafe { self.session.api().hsa_amd_memory_pool_free(self.ptr.cast()) };
        if rc != HSA_STATUS_SUCCESS {
            tracing::warn!(
                "hsa_amd_memory_pool_free({:p}) failed: {}",
                self.ptr,
                self.session.lib.status_text(rc)
            );
        }
    }
}

/// Staging buffers by size class, reused across dispatches (ROCr allocations are slow).
pub(crate) struct StagingPool {
    free: HashMap<usize, Vec<DeviceMemory>>,
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

    pub fn take(
        &mut self,
        session: &Arc<Session>,
        len: usize,
    ) -> Result<DeviceMemory, RuntimeError> {
        let class = Self::class(len);
        if let Some(buffer) = self.free.get_mut(&class).and_then(Vec::pop) {
            self.pooled_bytes -= class;
            return Ok(buffer);
        }
        DeviceMemory::allocate(session, session.pools.data, class)
    }

    pub fn give_back(&mut self, buffer: DeviceMemory) {
        let class = buffer.len();
        let slot = self.free.entry(class).or_default();
        if slot.len() < KEEP_PER_CLASS && self.pooled_bytes + class <= KEEP_BYTES {
            self.pooled_bytes += class;
            slot.push(buffer);
        }
    }
}

/// Start address → length of every live shared buffer.
#[derive(Default)]
pub(crate) struct SharedRegions {
    regions: Mutex<BTreeMap<usize, usize>>,
}

/// Where an argument lives relative to the shared buffers.
pub(crate) enum Placement {
    /// Entirely inside a shared buffer: pass it in place.
    InPlace,
    /// Not in any shared buffer: stage it.
    Host,
    /// Starts inside a shared buffer but runs past its end.
    Overruns { region_len: usize, offset: usize },
}

impl SharedRegions {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, usize>> {
        self.regions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn place(&self, ptr: usize, len: usize) -> Placement {
        let regions = self.lock();
        match regions.range(..=ptr).next_back() {
            Some((&start, &region_len)) if ptr < start + region_len => {
                if ptr + len <= start + region_len {
                    Placement::InPlace
                } else {
                    Placement::Overruns {
                        region_len,
                        offset: ptr - start,
                    }
                }
            }
            _ => Placement::Host,
        }
    }
}

/// Memory the NPU reads and writes in place; dropping it frees it.
pub(crate) struct HsaSharedBuffer {
    memory: DeviceMemory,
    regions: Arc<SharedRegions>,
}

impl HsaSharedBuffer {
    pub fn new(memory: DeviceMemory, regions: Arc<SharedRegions>) -> HsaSharedBuffer {
        regions.lock().insert(memory.ptr() as usize, memory.len());
        HsaSharedBuffer { memory, regions }
    }
}

impl SharedBuffer for HsaSharedBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.memory.ptr()
    }

    fn len(&self) -> usize {
        self.memory.len()
    }
}

impl Drop for HsaSharedBuffer {
    fn drop(&mut self) {
        self.regions.lock().remove(&(self.memory.ptr() as usize));
    }
}
