//! Buffer objects (`xrt::bo`, `xrt::ext::bo`), mapped into the process.

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::api::{Device, log_release};
use crate::bindings as b;
use crate::error::XrtSysError;

/// XRT buffer flags (`xrt::bo::flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BoFlags(pub u32);

impl BoFlags {
    pub const NORMAL: BoFlags = BoFlags(b::TRITON_NPU_XRT_BO_NORMAL);
    pub const CACHEABLE: BoFlags = BoFlags(b::TRITON_NPU_XRT_BO_CACHEABLE);
    pub const HOST_ONLY: BoFlags = BoFlags(b::TRITON_NPU_XRT_BO_HOST_ONLY);
}

/// How a buffer object was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BoKind {
    /// `xrt::bo(device, size, flags, group)`.
    Flags { flags: BoFlags, group: i32 },
    /// `xrt::ext::bo(device, size)`.
    Ext,
}

/// Direction of a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncDirection {
    ToDevice,
    FromDevice,
}

/// A mapped buffer object (`xrt::bo`).
pub struct Bo {
    pub(crate) device: Arc<Device>,
    pub(crate) raw: NonNull<b::triton_npu_xrt_bo>,
    pub(crate) map: NonNull<u8>,
    pub(crate) size: usize,
    pub(crate) kind: BoKind,
    /// Unique in the process (addresses and XRT handles are reused after a free; this is
    /// not): lets a run tell that an argument is still set to this very buffer.
    pub(crate) id: u64,
}

/// The next [`Bo::id`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

// SAFETY: as for Device; the mapping is plain host memory owned by the BO.
unsafe impl Send for Bo {}
unsafe impl Sync for Bo {}

impl Bo {
    /// The host mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    pub fn kind(&self) -> BoKind {
        self.kind
    }

    /// The host mapping's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping holds `size` bytes while the BO lives; host writes need
        // `&mut self`, and the device writes it only during a run its owner waits for.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.size) }
    }

    /// The host mapping's bytes, to fill before a sync to the device.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr(), self.size) }
    }

    /// Syncs `size` bytes from `offset` in one direction.
    pub fn sync(
        &self,
        direction: SyncDirection,
        size: usize,
        offset: usize,
    ) -> Result<(), XrtSysError> {
        let dir = match direction {
            SyncDirection::ToDevice => b::TRITON_NPU_XRT_SYNC_TO_DEVICE,
            SyncDirection::FromDevice => b::TRITON_NPU_XRT_SYNC_FROM_DEVICE,
        } as i32;
        let shim = self.device.shim();
        // SAFETY: live BO.
        shim.call("triton_npu_xrt_bo_sync", |err, len| unsafe {
            shim.api
                .triton_npu_xrt_bo_sync(self.raw.as_ptr(), dir, size, offset, err, len)
        })
    }
}

impl Drop for Bo {
    fn drop(&mut self) {
        let shim = self.device.shim();
        // SAFETY: sole owner of a live BO; runs borrow it, so none refers to it any more.
        log_release(shim.call("triton_npu_xrt_bo_free", |err, len| unsafe {
            shim.api.triton_npu_xrt_bo_free(self.raw.as_ptr(), err, len)
        }));
    }
}
