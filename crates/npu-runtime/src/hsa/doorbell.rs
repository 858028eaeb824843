//! The doorbell thread: rings the queue's doorbell for dispatches that have a timeout.
//!
//! ROCr submits synchronously inside the doorbell store (and ROCr's XDNA path waits there), so
//! a hung kernel would hang a caller that rang it itself before its wait, and its timeout,
//! even started. With a timeout the store is made on this thread instead. Dispatches are
//! serialised by the runtime, so there is at most one request in flight; each is numbered,
//! and a [`Ticket`] tells its caller whether the store has returned.
//!
//! The hand-off is on the path of every launch (the default timeout is finite), so it is
//! built to cost a few cache-line transfers and nothing more: a request is its number and the
//! value to store, written by the caller into a line of their own; the thread answers in
//! another line. The caller takes no lock; the thread holds the doorbell's lock while it rings
//! (uncontended: the caller takes it only when the queue changes), on a line of its own. The
//! queue's doorbell (which keeps the queue alive) is handed over only when the queue changes,
//! and the thread rings it in place, so no reference count moves between the cores per
//! launch. After a store the thread keeps looking for the next request for a short while
//! before it sleeps, and a caller that waits for a store to return looks before it sleeps;
//! either side is woken (a futex call) only when the other really sleeps.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::spin::{SPIN, spin_until};
use crate::RuntimeError;
use crate::raw::hsa::{AieQueue, Doorbell};

/// Keeps what one side writes off the cache line the other side writes.
#[repr(align(128))]
#[derive(Default)]
struct Line<T>(T);

/// What the caller writes: the request's number (1, 2, …) and the value to store.
#[derive(Default)]
struct Request {
    posted: AtomicU64,
    value: AtomicI64,
}

#[derive(Default)]
struct Mailbox {
    request: Line<Request>,
    /// The number of the last request whose store returned (written by the thread).
    returned: Line<AtomicU64>,
    /// The doorbell requests are rung on: set by the caller before it posts for a new queue,
    /// and held locked by the thread while it rings (so a store that never returns keeps its
    /// queue alive, and the caller can tell: `try_lock` fails). On a line of its own: the
    /// thread locks it for every store, and the flags below are read by both sides on every
    /// launch, so beside them it would move between the cores twice per launch.
    doorbell: Line<Mutex<Option<Doorbell>>>,
    shutdown: AtomicBool,
    /// Whether the thread sleeps on `posted_cv` / a caller sleeps on `returned_cv`; both
    /// sleep under `sleep`.
    thread_sleeps: AtomicBool,
    caller_sleeps: AtomicBool,
    sleep: Mutex<()>,
    posted_cv: Condvar,
    returned_cv: Condvar,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) struct DoorbellThread {
    mailbox: Arc<Mailbox>,
    /// Which queue's doorbell the mailbox holds (its address; the mailbox keeps that queue
    /// alive, so no other queue can have it).
    current: Option<usize>,
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
        Ok(DoorbellThread {
            mailbox,
            current: None,
        })
    }

    /// Has the thread store `value` to `queue`'s doorbell. The previous request's store has
    /// returned (the runtime waits for it, or refuses to dispatch while it is stuck).
    pub fn ring(&mut self, queue: &AieQueue, value: i64) -> Ticket {
        let m = &self.mailbox;
        if self.current != Some(queue.id()) {
            *lock(&m.doorbell.0) = Some(queue.doorbell());
            self.current = Some(queue.id());
        }
        let request = &m.request.0;
        request.value.store(value, Ordering::Relaxed);
        // Only this side writes `posted`. Sequentially consistent with the look at
        // `thread_sleeps` below, as the thread's flag and its look at `posted` are: one of
        // the two sides sees the other.
        let number = request.posted.load(Ordering::Relaxed) + 1;
        request.posted.store(number, Ordering::SeqCst);
        if m.thread_sleeps.load(Ordering::SeqCst) {
            let _sleep = lock(&m.sleep);
            m.posted_cv.notify_one();
        }
        Ticket {
            mailbox: Arc::clone(m),
            number,
        }
    }

    /// Lets go of the doorbell the thread holds, so that a queue the runtime drops is
    /// destroyed now. Not while a store that never returned holds it: that queue must live.
    pub fn forget_queue(&mut self) {
        if let Ok(mut held) = self.mailbox.doorbell.0.try_lock() {
            *held = None;
            self.current = None;
        }
    }
}

impl Drop for DoorbellThread {
    fn drop(&mut self) {
        // The queue goes with the runtime (and ROCr with it) unless a store still holds it.
        self.forget_queue();
        self.mailbox.shutdown.store(true, Ordering::SeqCst);
        let _sleep = lock(&self.mailbox.sleep);
        self.mailbox.posted_cv.notify_one();
    }
}

fn serve(m: &Mailbox) {
    let request = &m.request.0;
    let mut served = 0u64;
    let pending = |served, order| request.posted.load(order) != served || m.shutdown.load(order);
    loop {
        if !spin_until(SPIN, || pending(served, Ordering::Acquire)) {
            let mut sleep = lock(&m.sleep);
            m.thread_sleeps.store(true, Ordering::SeqCst);
            while !pending(served, Ordering::SeqCst) {
                sleep = m
                    .posted_cv
                    .wait(sleep)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            m.thread_sleeps.store(false, Ordering::SeqCst);
        }
        if request.posted.load(Ordering::Acquire) == served {
            return; // shut down, nothing left to ring
        }
        let value = request.value.load(Ordering::Relaxed);
        match lock(&m.doorbell.0).as_ref() {
            Some(doorbell) => doorbell.ring(value),
            // The caller sets the doorbell before posting; ringing nothing leaves the packet
            // unsubmitted, which the caller's wait reports as a timeout.
            None => tracing::error!("the doorbell thread got a request without a doorbell"),
        }
        served += 1;
        m.returned.0.store(served, Ordering::SeqCst);
        if m.caller_sleeps.load(Ordering::SeqCst) {
            let _sleep = lock(&m.sleep);
            m.returned_cv.notify_all();
        }
    }
}

impl Ticket {
    /// Whether the store has returned (no wait).
    pub fn returned(&self) -> bool {
        self.mailbox.returned.0.load(Ordering::Acquire) >= self.number
    }

    /// Waits until the store has returned (the packet has ended, so it returns soon).
    pub fn wait_returned(&self) {
        if !spin_until(SPIN, || self.returned()) {
            let m = &self.mailbox;
            let mut sleep = lock(&m.sleep);
            // Flag first, then look (both sequentially consistent, as the thread's store of
            // `returned` and its look at the flag): one of the two sees the other.
            m.caller_sleeps.store(true, Ordering::SeqCst);
            while m.returned.0.load(Ordering::SeqCst) < self.number {
                sleep = m
                    .returned_cv
                    .wait_timeout(sleep, Duration::from_millis(10))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            m.caller_sleeps.store(false, Ordering::SeqCst);
        }
    }
}
