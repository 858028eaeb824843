//! Kernels prepared in this process, shared by every launcher of the same kernel.
//!
//! Triton builds a launcher per compiled kernel and may build several for one kernel, so the
//! process keeps what [`prepare`](crate::prepare) returned under its whole input — the request
//! and the configuration it ran with — and a second launcher of the same kernel finds it. A
//! compile-only result is never kept: once compile-only is off, the next launch must load and
//! dispatch.
//!
//! The table is bounded ([`MAX_PREPARED`] entries): a process that loads thousands of distinct
//! kernels must not keep every one of them. When it is full, the least recently used entry is
//! dropped and its runtime is told to let the program go ([`Runtime::release`]); the device
//! state goes once no launcher holds the kernel either, and a later launch of it prepares it
//! again (from the on-disk cache, so no tool runs).
//!
//! [`Runtime::release`]: npu_runtime::Runtime::release

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use npu_target::Config;

use crate::error::DriverError;
use crate::kernel::{KernelRequest, Prepared, prepare};
use crate::runtimes::Host;

type Key = (KernelRequest, Config);

/// The most prepared kernels the process keeps.
pub const MAX_PREPARED: usize = 256;

static PREPARED: Mutex<Option<Lru<Key, Arc<Prepared>>>> = Mutex::new(None);

/// The kernel prepared for `(config, req)`, preparing it on first use (outside the table's
/// lock, so that other kernels are not held up by a long build).
pub fn prepared(
    config: &Config,
    host: &Host,
    req: &KernelRequest,
) -> Result<Arc<Prepared>, DriverError> {
    let key = (req.clone(), config.clone());
    if let Some(found) = table().as_mut().and_then(|m| m.get(&key)) {
        return Ok(found);
    }
    let prepared = match prepare(config, host, req) {
        // The device is full (device heap, hardware contexts): let the older half of the
        // table go and try once more.
        Err(DriverError::Runtime(e))
            if e.kind() == npu_runtime::ErrorKind::HardwareContextExhausted && len() > 0 =>
        {
            release_oldest(len().div_ceil(2));
            prepare(config, host, req)?
        }
        other => other?,
    };
    let prepared = Arc::new(prepared);
    if prepared.loaded.is_none() {
        return Ok(prepared);
    }
    let (kept, evicted) = table()
        .get_or_insert_with(|| Lru::new(MAX_PREPARED))
        .insert(key, prepared);
    // Released outside the table's lock: a runtime may take its own locks.
    if let Some(evicted) = evicted
        && let Some((program, runtime)) = &evicted.loaded
    {
        runtime.release(program);
    }
    Ok(kept)
}

/// Lets the `count` least recently used kernels go, releasing their programs.
fn release_oldest(count: usize) {
    let evicted: Vec<Arc<Prepared>> = {
        let mut table = table();
        let Some(lru) = table.as_mut() else { return };
        (0..count).filter_map(|_| lru.pop_oldest()).collect()
    };
    for prepared in evicted {
        if let Some((program, runtime)) = &prepared.loaded {
            runtime.release(program);
        }
    }
}

/// Lets every prepared kernel go and then every opened runtime's device state (for the end of
/// the process): the table empties, each program is released to its runtime, and the runtimes
/// drop their queues and hardware contexts. A launch after this prepares its kernel again.
pub fn release_all() {
    release_oldest(len());
    npu_runtime::registry::release_all();
}

/// The number of prepared kernels the table holds now.
pub fn len() -> usize {
    table().as_ref().map_or(0, Lru::len)
}

fn table() -> std::sync::MutexGuard<'static, Option<Lru<Key, Arc<Prepared>>>> {
    PREPARED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A process-wide clock of uses: a kernel's last use is the clock's value when it was last
/// found or dispatched.
static CLOCK: AtomicU64 = AtomicU64::new(0);

/// The clock's next value.
pub(crate) fn tick() -> u64 {
    CLOCK.fetch_add(1, Ordering::Relaxed) + 1
}

/// What the table can tell the age of: a launcher dispatches a kernel it holds without going
/// through the table, so the kernel itself records when it was last used.
pub(crate) trait Recency {
    fn last_used(&self) -> u64;
    fn touch(&self);
}

impl Recency for Arc<Prepared> {
    fn last_used(&self) -> u64 {
        Prepared::last_used(self)
    }
    fn touch(&self) {
        Prepared::touch(self);
    }
}

/// A map of at most `cap` entries that drops the least recently used one when full.
struct Lru<K, V> {
    cap: usize,
    entries: HashMap<K, V>,
}

impl<K: Eq + Hash + Clone, V: Clone + Recency> Lru<K, V> {
    fn new(cap: usize) -> Self {
        Lru {
            cap: cap.max(1),
            entries: HashMap::new(),
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The value under `key`, marked as just used.
    fn get(&mut self, key: &K) -> Option<V> {
        let value = self.entries.get(key)?;
        value.touch();
        Some(value.clone())
    }

    /// Removes and returns the least recently used entry.
    fn pop_oldest(&mut self) -> Option<V> {
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, v)| v.last_used())
            .map(|(k, _)| k.clone())?;
        self.entries.remove(&oldest)
    }

    /// Keeps `value` under `key` unless a value is there already (a racing insert wins), and
    /// returns the value kept and the entry dropped to make room, if one was.
    fn insert(&mut self, key: K, value: V) -> (V, Option<V>) {
        if let Some(kept) = self.get(&key) {
            return (kept, None);
        }
        let evicted = if self.entries.len() >= self.cap {
            self.pop_oldest()
        } else {
            None
        };
        value.touch();
        self.entries.insert(key, value.clone());
        (value, evicted)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::{Lru, Recency, tick};

    /// A value that records its last use, as a prepared kernel does.
    #[derive(Clone, Debug)]
    struct Used(u32, Arc<AtomicU64>);

    impl Used {
        fn new(v: u32) -> Used {
            Used(v, Arc::new(AtomicU64::new(0)))
        }
    }

    impl PartialEq for Used {
        fn eq(&self, other: &Used) -> bool {
            self.0 == other.0
        }
    }

    impl Recency for Used {
        fn last_used(&self) -> u64 {
            self.1.load(Ordering::Relaxed)
        }
        fn touch(&self) {
            self.1.store(tick(), Ordering::Relaxed);
        }
    }

    fn value(found: Option<Used>) -> Option<u32> {
        found.map(|u| u.0)
    }

    #[test]
    fn a_full_table_drops_the_least_recently_used_entry() {
        let mut lru = Lru::new(2);
        assert_eq!(lru.insert("a", Used::new(1)).0.0, 1);
        assert!(lru.insert("b", Used::new(2)).1.is_none());
        // "a" is used, so "b" is now the oldest.
        assert_eq!(value(lru.get(&"a")), Some(1));
        assert_eq!(value(lru.insert("c", Used::new(3)).1), Some(2));
        assert_eq!(value(lru.get(&"b")), None);
        assert_eq!(lru.len(), 2);
        // A racing insert of a key already there keeps the first value.
        let (kept, evicted) = lru.insert("a", Used::new(9));
        assert_eq!((kept.0, evicted), (1, None));
    }

    #[test]
    fn a_use_outside_the_table_counts() {
        // A launcher dispatches the kernel it holds without asking the table.
        let mut lru = Lru::new(2);
        let a = lru.insert("a", Used::new(1)).0;
        lru.insert("b", Used::new(2));
        a.touch();
        assert_eq!(value(lru.insert("c", Used::new(3)).1), Some(2));
    }

    #[test]
    fn thousands_of_keys_stay_within_the_bound() {
        let mut lru = Lru::new(super::MAX_PREPARED);
        let mut evicted = 0;
        for i in 0..2_000 {
            if lru.insert(i, Used::new(i)).1.is_some() {
                evicted += 1;
            }
        }
        assert_eq!(lru.len(), super::MAX_PREPARED);
        assert_eq!(evicted, 2_000 - super::MAX_PREPARED as u32);
        // The newest keys are the ones kept.
        assert_eq!(value(lru.get(&1_999)), Some(1_999));
        assert_eq!(value(lru.get(&0)), None);
    }
}
