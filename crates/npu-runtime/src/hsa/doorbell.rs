//! The doorbell thread: rings the queue's doorbell for dispatches that have a timeout.
//!
//! ROCr submits synchronously inside the doorbell store (and ROCr's XDNA path waits there), so
//! a hung kernel would hang a caller that rang it itself before its wait, and its timeout,
//! even started. With a timeout the store is made on this thread instead. Dispatches are
//! serialised by the runtime, so there is at most one request in flight; each is numbered,
//! and a [`Ticket`] tells its caller whether the store has returned.
//!
//! The hand-off is on the path of every launch (the default timeout is finite), so it avoids
//! system calls when it can: after a store the thread keeps looking for the next request for
//! a short while before it sleeps, and a caller that waits for a store to return looks before
//! it sleeps; either side is woken (a futex call) only when the other really sleeps.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::spin::{SPIN, spin_until};
use crate::RuntimeError;
use crate::raw::hsa::Doorbell;

#[derive(Default)]
struct Slot {
    request: Option<(Doorbell, i64)>,
    shutdown: bool,
}

#[derive(Default)]
struct Mailbox {
    slot: Mutex<Slot>,
    /// Wakes the thread (a request or shutdown).
    posted_cv: Condvar,
    /// Wakes callers waiting for a store to return.
    returned_cv: Condvar,
    /// Requests posted and stores returned so far (request numbers start at 1).
    posted: AtomicU64,
    returned: AtomicU64,
    /// Whether the thread sleeps on `posted_cv` / a caller sleeps on `returned_cv`.
    thread_sleeps: AtomicBool,
    caller_sleeps: AtomicBool,
}

impl Mailbox {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(crate) struct DoorbellThread {
    mailbox: Arc<Mailbox>,
}

/// One request's store: whether it has returned.
pub(crate) struct Ticket {
    mailbox: Arc<Mailbox>,
    number: u64,
}

impl DoorbellThread {
    pub fn start() -> Result<DoorbellThread, RuntimeError> {
        let mailbox = Arc::new(Mailbox::default());
        let theirs = Arc::clone(&mailbox);
        std::thread::Builder::new()
            .name("npu-hsa-doorbell".into())
            .spawn(move || serve(&theirs))
            .map_err(|e| RuntimeError::Call {
                call: "starting the doorbell thread".into(),
                reason: e.to_string(),
            })?;
        Ok(DoorbellThread { mailbox })
    }

    /// Has the thread store `value` to `doorbell`.
    pub fn ring(&self, doorbell: Doorbell, value: i64) -> Ticket {
        let m = &self.mailbox;
        let number = {
            let mut slot = m.lock();
            slot.request = Some((doorbell, value));
            m.posted.fetch_add(1, Ordering::AcqRel) + 1
        };
        if m.thread_sleeps.load(Ordering::Acquire) {
            // The thread sets the flag under the lock before it sleeps, so either it sees the
            // request before sleeping or it is asleep now and this wakes it.
            let _slot = m.lock();
            m.posted_cv.notify_one();
        }
        Ticket {
            mailbox: Arc::clone(m),
            number,
        }
    }
}

impl Drop for DoorbellThread {
    fn drop(&mut self) {
        self.mailbox.lock().shutdown = true;
        self.mailbox.posted_cv.notify_one();
    }
}

fn serve(m: &Mailbox) {
    let mut served = 0u64;
    loop {
        spin_until(SPIN, || m.posted.load(Ordering::Acquire) != served);
        let (doorbell, value) = {
            let mut slot = m.lock();
            loop {
                if let Some(request) = slot.request.take() {
                    break request;
                }
                if slot.shutdown {
                    return;
                }
                m.thread_sleeps.store(true, Ordering::Release);
                slot = m
                    .posted_cv
                    .wait(slot)
                    .unwrap_or_else(PoisonError::into_inner);
                m.thread_sleeps.store(false, Ordering::Release);
            }
        };
        doorbell.ring(value);
        // The doorbell keeps ROCr alive: let go of it before saying the store returned, so a
        // runtime dropped right after shuts ROCr down.
        drop(doorbell);
        served += 1;
        m.returned.store(served, Ordering::SeqCst);
        if m.caller_sleeps.load(Ordering::SeqCst) {
            let _slot = m.lock();
            m.returned_cv.notify_all();
        }
    }
}

impl Ticket {
    /// Whether the store has returned (no wait).
    pub fn returned(&self) -> bool {
        self.mailbox.returned.load(Ordering::Acquire) >= self.number
    }

    /// Waits until the store has returned (the packet has ended, so it returns soon).
    pub fn wait_returned(&self) {
        if !spin_until(SPIN, || self.returned()) {
            let m = &self.mailbox;
            let mut slot = m.lock();
            // Flag first, then look (both sequentially consistent, as the thread's store of
            // `returned` and its look at the flag): one of the two sees the other.
            m.caller_sleeps.store(true, Ordering::SeqCst);
            while m.returned.load(Ordering::SeqCst) < self.number {
                slot = m
                    .returned_cv
                    .wait_timeout(slot, Duration::from_millis(10))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            m.caller_sleeps.store(false, Ordering::SeqCst);
        }
    }
}
