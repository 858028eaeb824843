//! Signals: a value, waiters, and — for a queue's doorbell — the queue to wake.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use hsa_sys::*;

use crate::queue::Queue;
use crate::state::lock;

/// Ticks per second of the agent's timestamp (`HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`): 1 ns.
pub const TIMESTAMP_FREQUENCY: u64 = 1_000_000_000;

pub struct Signal {
    value: Mutex<i64>,
    changed: Condvar,
    /// Set for a queue's doorbell signal.
    doorbell_of: Mutex<Option<Weak<Queue>>>,
}

impl Signal {
    pub fn load(&self) -> i64 {
        *lock(&self.value)
    }

    pub fn store(&self, value: i64) {
        *lock(&self.value) = value;
        self.changed.notify_all();
        let queue = lock(&self.doorbell_of).as_ref().and_then(Weak::upgrade);
        if let Some(queue) = queue {
            queue.ring();
        }
    }

    /// Subtracts `n`, as ROCr does when a packet completes.
    pub fn subtract(&self, n: i64) {
        *lock(&self.value) -= n;
        self.changed.notify_all();
    }

    /// Waits until `condition(value, compare)` holds or `timeout_ticks` pass; returns the value
    /// last seen.
    pub fn wait(&self, condition: hsa_signal_condition_t, compare: i64, timeout_ticks: u64) -> i64 {
        let holds = |v: i64| match condition {
            HSA_SIGNAL_CONDITION_EQ => v == compare,
            HSA_SIGNAL_CONDITION_NE => v != compare,
            HSA_SIGNAL_CONDITION_LT => v < compare,
            HSA_SIGNAL_CONDITION_GTE => v >= compare,
            _ => true,
        };
        let deadline = (timeout_ticks != u64::MAX)
            .then(|| Instant::now().checked_add(Duration::from_nanos(timeout_ticks)))
            .flatten();
        let mut value = lock(&self.value);
        while !holds(*value) {
            match deadline {
                None => {
                    value = self
                        .changed
                        .wait(value)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    value = self
                        .changed
                        .wait_timeout(value, deadline - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
            }
        }
        *value
    }
}

static SIGNALS: Mutex<Option<HashMap<u64, Arc<Signal>>>> = Mutex::new(None);

pub fn create(initial: i64) -> u64 {
    let handle = crate::state::next_handle();
    let signal = Arc::new(Signal {
        value: Mutex::new(initial),
        changed: Condvar::new(),
        doorbell_of: Mutex::new(None),
    });
    lock(&SIGNALS)
        .get_or_insert_with(HashMap::new)
        .insert(handle, signal);
    handle
}

pub fn get(handle: u64) -> Option<Arc<Signal>> {
    lock(&SIGNALS).as_ref()?.get(&handle).cloned()
}

pub fn destroy(handle: u64) -> bool {
    lock(&SIGNALS)
        .as_mut()
        .and_then(|m| m.remove(&handle))
        .is_some()
}

/// Makes `handle` the doorbell of `queue`.
pub fn attach_doorbell(handle: u64, queue: &Arc<Queue>) {
    if let Some(signal) = get(handle) {
        *lock(&signal.doorbell_of) = Some(Arc::downgrade(queue));
    }
}

pub fn live() -> u64 {
    lock(&SIGNALS).as_ref().map_or(0, |m| m.len() as u64)
}

/// Drops every signal at the last `hsa_shut_down`; returns how many were left.
pub fn destroy_all() -> u64 {
    lock(&SIGNALS).take().map_or(0, |m| m.len() as u64)
}
