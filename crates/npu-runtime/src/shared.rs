//! Where the live shared buffers of a runtime are, so a dispatch can tell an argument inside
//! one (passed in place) from host memory (staged), and refuse one that runs past a buffer's
//! end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Start address → length of every live shared buffer of one runtime.
#[derive(Debug, Default)]
pub struct SharedRegions {
    regions: Mutex<BTreeMap<usize, usize>>,
    /// How many there are, readable without the lock: most programs never make a shared
    /// buffer, and their launches should not take a lock per argument to learn it. A buffer
    /// an argument lies in was made before the launch that passes it (the caller holds it), so
    /// its count is seen.
    live: AtomicUsize,
}

/// Where an argument lies relative to the shared buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Entirely inside the shared buffer that starts at `start` and is `len` bytes long.
    Shared { start: usize, len: usize },
    /// In no shared buffer: host memory, staged by the runtime.
    Host,
}

/// An argument that starts inside a shared buffer and runs past its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overrun {
    pub region_len: usize,
    pub offset: usize,
}

impl SharedRegions {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<usize, usize>> {
        self.regions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn insert(&self, start: usize, len: usize) {
        let mut regions = self.lock();
        regions.insert(start, len);
        self.live.store(regions.len(), Ordering::Release);
    }

    pub fn remove(&self, start: usize) {
        let mut regions = self.lock();
        regions.remove(&start);
        self.live.store(regions.len(), Ordering::Release);
    }

    pub fn is_empty(&self) -> bool {
        self.live.load(Ordering::Acquire) == 0
    }

    /// Where `len` bytes at `address` lie.
    pub fn place(&self, address: usize, len: usize) -> Result<Placement, Overrun> {
        if self.is_empty() {
            return Ok(Placement::Host);
        }
        let regions = self.lock();
        match regions.range(..=address).next_back() {
            Some((&start, &region_len)) if address < start + region_len => {
                if address.saturating_add(len) <= start + region_len {
                    Ok(Placement::Shared {
                        start,
                        len: region_len,
                    })
                } else {
                    Err(Overrun {
                        region_len,
                        offset: address - start,
                    })
                }
            }
            _ => Ok(Placement::Host),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_outside_and_past_the_end() {
        let r = SharedRegions::default();
        r.insert(1000, 100);
        assert_eq!(
            r.place(1000, 100),
            Ok(Placement::Shared {
                start: 1000,
                len: 100
            })
        );
        assert!(matches!(r.place(1050, 50), Ok(Placement::Shared { .. })));
        assert_eq!(
            r.place(1050, 51),
            Err(Overrun {
                region_len: 100,
                offset: 50
            })
        );
        assert_eq!(r.place(999, 4), Ok(Placement::Host));
        assert_eq!(r.place(1100, 4), Ok(Placement::Host));
        r.remove(1000);
        assert_eq!(r.place(1000, 4), Ok(Placement::Host));
    }
}
