//! Allocations from an AIE memory pool, freed on drop, and the shared buffers made of them.

use std::ptr::NonNull;
use std::sync::Arc;

use super::{Hsa, HsaError, Pool};
use crate::raw::host::SharedBuffer;
use crate::shared::SharedRegions;

/// One allocation from an AIE pool: host-visible memory the device can address.
pub(crate) struct PoolAllocation {
    hsa: Arc<Hsa>,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the allocation is plain memory owned by this value; ROCr's free is thread-safe.
unsafe impl Send for PoolAllocation {}
// SAFETY: `&self` gives only reads (and the address); writes need `&mut self`.
unsafe impl Sync for PoolAllocation {}

impl PoolAllocation {
    /// `len` bytes (at least one) from `pool`.
    pub fn new(hsa: &Arc<Hsa>, pool: Pool, len: usize) -> Result<PoolAllocation, HsaError> {
        let mut ptr: *mut core::ffi::c_void = core::ptr::null_mut();
        // SAFETY: `ptr` is a valid out pointer; flags 0 as the AIE pools require.
        let rc = unsafe {
            hsa.api()
                .hsa_amd_memory_pool_allocate(hsa.pool_handle(pool), len.max(1), 0, &mut ptr)
        };
        hsa.check(format!("hsa_amd_memory_pool_allocate({len} bytes)"), rc)?;
        let ptr = NonNull::new(ptr.cast()).ok_or_else(|| HsaError {
            call: format!("hsa_amd_memory_pool_allocate({len} bytes)").into(),
            status: super::HsaStatus::Other(0),
            text: "reported success but returned a null pointer".to_owned(),
        })?;
        Ok(PoolAllocation {
            hsa: Arc::clone(hsa),
            ptr,
            len,
        })
    }

    /// The address the device sees (the same as the host mapping's).
    pub fn address(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the allocation holds `len` bytes for as long as `self` lives; writes need
        // `&mut self`, and the device writes it only during a dispatch its owner waits for.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PoolAllocation {
    fn drop(&mut self) {
        // SAFETY: allocated by hsa_amd_memory_pool_allocate and freed only here.
        let rc = unsafe {
            self.hsa
                .api()
                .hsa_amd_memory_pool_free(self.ptr.as_ptr().cast())
        };
        if let Err(e) = self.hsa.check("hsa_amd_memory_pool_free", rc) {
            tracing::warn!("{e} for {:p}", self.ptr);
        }
    }
}

/// A pool allocation handed out as a shared buffer: dispatches pass arguments inside it in
/// place. It is listed in the runtime's shared regions while it lives.
pub(crate) struct HsaSharedBuffer {
    memory: PoolAllocation,
    regions: Arc<SharedRegions>,
}

impl HsaSharedBuffer {
    pub fn new(memory: PoolAllocation, regions: Arc<SharedRegions>) -> HsaSharedBuffer {
        regions.insert(memory.as_ptr() as usize, memory.len());
        HsaSharedBuffer { memory, regions }
    }
}

// SAFETY: the pool allocation is mapped, readable and writable for `len` bytes until this
// value is dropped.
unsafe impl SharedBuffer for HsaSharedBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.memory.as_ptr()
    }

    fn len(&self) -> usize {
        self.memory.len()
    }
}

impl Drop for HsaSharedBuffer {
    fn drop(&mut self) {
        self.regions.remove(self.memory.as_ptr() as usize);
    }
}
