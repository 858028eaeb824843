//! Shared buffers: buffer objects mapped into the process, which a dispatch passes to the
//! kernel in place (no copy) when an argument is exactly such a buffer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use xrt_sys::Bo;

use crate::HostArg;
use crate::shared::SharedRegions;

/// The shared buffers alive, by mapping address (and as regions, for the dispatch checks).
#[derive(Default)]
pub(crate) struct Registry {
    buffers: Mutex<HashMap<usize, Weak<Bo>>>,
    regions: SharedRegions,
}

impl Registry {
    pub fn add(self: &Arc<Self>, bo: Bo) -> XrtSharedBuffer {
        let bo = Arc::new(bo);
        self.buffers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(bo.as_ptr() as usize, Arc::downgrade(&bo));
        self.regions.insert(bo.as_ptr() as usize, bo.len());
        XrtSharedBuffer {
            bo,
            registry: Arc::downgrade(self),
        }
    }

    pub fn regions(&self) -> &SharedRegions {
        &self.regions
    }

    /// The shared buffer `arg` is, if it is exactly one (same address, same length).
    pub fn find(&self, arg: &HostArg) -> Option<Arc<Bo>> {
        let buffers = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
        let bo = buffers.get(&(arg.ptr() as usize))?.upgrade()?;
        (bo.len() == arg.len()).then_some(bo)
    }
}

/// A buffer object handed out by `alloc_shared`.
pub struct XrtSharedBuffer {
    bo: Arc<Bo>,
    registry: Weak<Registry>,
}

impl XrtSharedBuffer {
    /// The buffer object (its mapping is what the shared buffer is).
    pub fn bo(&self) -> &Bo {
        &self.bo
    }
}

impl Drop for XrtSharedBuffer {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.upgrade() {
            registry
                .buffers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&(self.bo.as_ptr() as usize));
            registry.regions.remove(self.bo.as_ptr() as usize);
        }
    }
}
