//! The AIE agent's three memory pools and the allocations made from them.
//!
//! Every kernel argument and kernarg buffer must lie inside one of these allocations (ROCr
//! resolves each address to a buffer object by range), so the agent keeps them in an ordered
//! map and checks every address a packet names against it.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::Mutex;

use hsa_sys::*;

use crate::state::lock;

/// Page size the pools report as granule and alignment.
pub const PAGE: usize = 4096;
/// The device heap is 64 MiB, like the XDNA driver's.
pub const DEV_HEAP_BYTES: usize = 64 << 20;

/// The pools, in the order ROCr's AIE agent reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// System memory, `KERNARG_INIT | COARSE`, allocatable.
    Kernarg,
    /// The device heap: `COARSE`, recommended granule 0; holds PDIs and instruction streams.
    DevHeap,
    /// System memory, `COARSE`, allocatable: tensors.
    Data,
}

impl Pool {
    pub const ALL: [Pool; 3] = [Pool::Kernarg, Pool::DevHeap, Pool::Data];

    pub fn handle(self) -> u64 {
        0xA1E0_0100
            + match self {
                Pool::Kernarg => 0,
                Pool::DevHeap => 1,
                Pool::Data => 2,
            }
    }

    pub fn from_handle(handle: u64) -> Option<Pool> {
        Pool::ALL.into_iter().find(|p| p.handle() == handle)
    }

    fn flags(self) -> u32 {
        match self {
            Pool::Kernarg => {
                HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT
                    | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED
            }
            Pool::DevHeap | Pool::Data => HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
        }
    }

    fn size(self) -> usize {
        match self {
            Pool::DevHeap => DEV_HEAP_BYTES,
            Pool::Kernarg | Pool::Data => 16 << 30,
        }
    }

    /// `hsa_amd_memory_pool_get_info`.
    ///
    /// # Safety
    /// `value` must be valid for a write of the attribute's type.
    pub unsafe fn info(
        self,
        attribute: hsa_amd_memory_pool_info_t,
        value: *mut u8,
    ) -> hsa_status_t {
        // SAFETY (all writes): the caller provides storage of the attribute's documented type.
        unsafe {
            match attribute {
                HSA_AMD_MEMORY_POOL_INFO_SEGMENT => {
                    value.cast::<u32>().write_unaligned(HSA_AMD_SEGMENT_GLOBAL)
                }
                HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS => {
                    value.cast::<u32>().write_unaligned(self.flags())
                }
                HSA_AMD_MEMORY_POOL_INFO_SIZE | HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE => {
                    value.cast::<usize>().write_unaligned(self.size())
                }
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED
                | HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL => value.cast::<bool>().write(true),
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE
                | HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT => {
                    value.cast::<usize>().write_unaligned(PAGE)
                }
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE => {
                    let granule = if self == Pool::DevHeap { 0 } else { PAGE };
                    value.cast::<usize>().write_unaligned(granule)
                }
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            }
        }
        HSA_STATUS_SUCCESS
    }
}

struct Allocation {
    layout: Layout,
    pool: Pool,
}

#[derive(Default)]
struct Memory {
    allocations: BTreeMap<usize, Allocation>,
    /// Successful `hsa_amd_memory_pool_allocate` calls since the process started (each an
    /// ioctl in ROCr: what a warm launch must not make).
    made: u64,
    /// Bytes of the device heap in use (allocations plus what the loader copied there).
    dev_heap_used: usize,
}

static MEMORY: Mutex<Memory> = Mutex::new(Memory {
    allocations: BTreeMap::new(),
    made: 0,
    dev_heap_used: 0,
});

/// `hsa_amd_memory_pool_allocate`.
pub fn allocate(pool: Pool, size: usize, flags: u32) -> Result<*mut u8, hsa_status_t> {
    if flags != 0 {
        crate::state::breach(&format!(
            "hsa_amd_memory_pool_allocate: flags must be 0 for AIE pools, got {flags:#x}"
        ));
        return Err(HSA_STATUS_ERROR_INVALID_ARGUMENT);
    }
    if size == 0 {
        return Err(HSA_STATUS_ERROR_INVALID_ARGUMENT);
    }
    let rounded = size
        .checked_next_multiple_of(PAGE)
        .ok_or(HSA_STATUS_ERROR_OUT_OF_RESOURCES)?;
    let layout =
        Layout::from_size_align(rounded, PAGE).map_err(|_| HSA_STATUS_ERROR_OUT_OF_RESOURCES)?;
    if pool == Pool::DevHeap && rounded > DEV_HEAP_BYTES {
        // ROCr's AllocateMemory: one device-heap allocation cannot exceed the 64 MiB heap.
        crate::state::device_error(&format!(
            "hsa_amd_memory_pool_allocate: {size} bytes from the device heap, which holds \
             {DEV_HEAP_BYTES} bytes"
        ));
        return Err(HSA_STATUS_ERROR_INVALID_ALLOCATION);
    }
    let mut memory = lock(&MEMORY);
    if pool == Pool::DevHeap {
        if memory.dev_heap_used + rounded > DEV_HEAP_BYTES {
            return Err(HSA_STATUS_ERROR_OUT_OF_RESOURCES);
        }
        memory.dev_heap_used += rounded;
    }
    // SAFETY: the layout has a non-zero size. Zeroed, like the driver's fresh buffer objects.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        if pool == Pool::DevHeap {
            memory.dev_heap_used -= rounded;
        }
        return Err(HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    }
    memory
        .allocations
        .insert(ptr as usize, Allocation { layout, pool });
    memory.made += 1;
    Ok(ptr)
}

/// `hsa_amd_memory_pool_free`.
pub fn free(ptr: *mut u8) -> hsa_status_t {
    let mut memory = lock(&MEMORY);
    let Some(allocation) = memory.allocations.remove(&(ptr as usize)) else {
        crate::state::breach(&format!(
            "hsa_amd_memory_pool_free: {ptr:p} is not the start of a live pool allocation"
        ));
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    };
    if allocation.pool == Pool::DevHeap {
        memory.dev_heap_used -= allocation.layout.size();
    }
    // SAFETY: allocated in `allocate` with this layout and removed from the map just now.
    unsafe { std::alloc::dealloc(ptr, allocation.layout) };
    HSA_STATUS_SUCCESS
}

/// Reserves device-heap bytes for code the loader places there.
pub fn reserve_dev_heap(bytes: usize) -> Result<(), hsa_status_t> {
    let mut memory = lock(&MEMORY);
    if memory.dev_heap_used + bytes > DEV_HEAP_BYTES {
        return Err(HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    }
    memory.dev_heap_used += bytes;
    Ok(())
}

pub fn release_dev_heap(bytes: usize) {
    let mut memory = lock(&MEMORY);
    memory.dev_heap_used = memory.dev_heap_used.saturating_sub(bytes);
}

/// The pool of the allocation that holds all of `[addr, addr + len)`, if one does.
pub fn pool_of_range(addr: usize, len: usize) -> Option<Pool> {
    find(&lock(&MEMORY), addr, len)
}

fn find(memory: &Memory, addr: usize, len: usize) -> Option<Pool> {
    let end = addr.checked_add(len)?;
    let (start, allocation) = memory.allocations.range(..=addr).next_back()?;
    (end <= start + allocation.layout.size()).then_some(allocation.pool)
}

/// Runs `f` while no allocation can be freed, after checking that every range lies inside a
/// live allocation; returns the index of the first range that does not.
pub fn with_ranges<R>(ranges: &[(usize, usize)], f: impl FnOnce() -> R) -> Result<R, usize> {
    let memory = lock(&MEMORY);
    if let Some(bad) = ranges
        .iter()
        .position(|&(a, l)| find(&memory, a, l).is_none())
    {
        return Err(bad);
    }
    let result = f();
    drop(memory);
    Ok(result)
}

/// (live allocations, live bytes, device-heap bytes in use).
pub fn usage() -> (u64, u64, u64) {
    let memory = lock(&MEMORY);
    let bytes: usize = memory.allocations.values().map(|a| a.layout.size()).sum();
    (
        memory.allocations.len() as u64,
        bytes as u64,
        memory.dev_heap_used as u64,
    )
}

/// Pool allocations made since the process started.
pub fn allocations_made() -> u64 {
    lock(&MEMORY).made
}

/// Frees everything at the last `hsa_shut_down`; returns how many allocations were left.
pub fn free_all() -> u64 {
    let mut memory = lock(&MEMORY);
    let left = std::mem::take(&mut memory.allocations);
    memory.dev_heap_used = 0;
    for (ptr, allocation) in &left {
        // SAFETY: each entry was allocated in `allocate` with its layout.
        unsafe { std::alloc::dealloc(*ptr as *mut u8, allocation.layout) };
    }
    left.len() as u64
}
