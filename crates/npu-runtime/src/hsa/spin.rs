//! Looking for another thread's (or the device's) progress before sleeping on it.
//!
//! A launch hands work between threads: the doorbell thread picks up a request, the caller
//! sees the packet end and the store return. Each side first looks for the other for a while
//! ([`SPIN`], about one launch), because waking a sleeping thread costs more than most
//! launches. The first microseconds of that look are busy (a hand-off between cores is seen
//! within a fraction of a microsecond, and a `sched_yield` per look would cost more than the
//! hand-off itself); after that each look yields the core, so an idle side stops competing
//! with the thread that has work.

use std::time::{Duration, Instant};

/// How long either side looks for the other before it sleeps: about one launch, so that
/// back-to-back launches never sleep, and an idle thread stops costing CPU at once.
pub(crate) const SPIN: Duration = Duration::from_micros(50);

/// How long of [`SPIN`] is busy before each look yields the core.
const BUSY: Duration = Duration::from_micros(5);

/// Busy looks between two readings of the clock.
const LOOKS_PER_CLOCK: u32 = 32;

/// Looks for `done` for up to `limit` (busy at first, then yielding between looks); whether
/// it was seen.
pub(crate) fn spin_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    if done() {
        return true;
    }
    let started = Instant::now();
    loop {
        for _ in 0..LOOKS_PER_CLOCK {
            std::hint::spin_loop();
            if done() {
                return true;
            }
        }
        let elapsed = started.elapsed();
        if elapsed >= limit {
            return false;
        }
        if elapsed >= BUSY {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn what_is_already_done_is_seen_at_the_first_look() {
        let mut looks = 0;
        assert!(spin_until(Duration::ZERO, || {
            looks += 1;
            true
        }));
        assert_eq!(looks, 1);
    }

    #[test]
    fn what_never_happens_is_given_up_after_the_limit() {
        let started = Instant::now();
        assert!(!spin_until(Duration::from_millis(2), || false));
        assert!(started.elapsed() >= Duration::from_millis(2));
    }

    #[test]
    fn another_threads_progress_is_seen() {
        let flag = Arc::new(AtomicBool::new(false));
        let theirs = Arc::clone(&flag);
        let setter = std::thread::spawn(move || theirs.store(true, Ordering::Release));
        assert!(spin_until(Duration::from_secs(10), || flag.load(Ordering::Acquire)));
        setter.join().unwrap();
    }
}
