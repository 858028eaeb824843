//! Which process opened a process-wide runtime.
//!
//! ROCr and XRT are not fork-safe. A child made by `fork()` after its parent opened a runtime
//! (or began to: the NPU driver opens it on a helper thread while kernels compile) inherits
//! handles to the parent's queue and device, the kernels loaded on them, and possibly the lock
//! of an open in progress on a thread that does not exist in the child. The child must touch
//! none of it: opening, loading, allocating and dispatching ask [`Opener::usable`] first, which
//! refuses with a message saying what to do, and the exit handler leaves an inherited runtime
//! alone ([`Opener::owns`]). A `pthread_atfork` handler marks, in the child, every runtime its
//! parent had opened.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, Once, OnceLock, PoisonError};

use crate::RuntimeError;

/// The HSA runtime's opener.
pub(crate) static HSA: Opener = Opener::new("HSA");
/// The XRT runtime's opener.
pub(crate) static XRT: Opener = Opener::new("XRT");

pub(crate) struct Opener {
    runtime: &'static str,
    /// The pid of the process that opened the runtime, or began to (0: none).
    pid: AtomicU32,
    /// Set in a child forked after the runtime was opened (or began to be).
    inherited: AtomicBool,
}

/// Runs in the child of every `fork()` (before it returns there).
extern "C" fn in_child() {
    for opener in [&HSA, &XRT] {
        if opener.pid.load(Ordering::Relaxed) != 0 {
            opener.inherited.store(true, Ordering::Relaxed);
        }
    }
}

impl Opener {
    const fn new(runtime: &'static str) -> Opener {
        Opener {
            runtime,
            pid: AtomicU32::new(0),
            inherited: AtomicBool::new(false),
        }
    }

    /// Refuses in a child forked after this process's parent opened the runtime or was
    /// opening it. One atomic load: dispatches ask it every time.
    pub fn usable(&self) -> Result<(), RuntimeError> {
        if !self.inherited.load(Ordering::Acquire) {
            return Ok(());
        }
        let runtime = self.runtime;
        Err(RuntimeError::Call {
            call: format!("using the {runtime} runtime"),
            reason: format!(
                "this process was forked from process {} after that process opened the \
                 {runtime} runtime (a process opens it when it compiles or launches its first \
                 NPU kernel), and {runtime} cannot be shared across fork(); compile and launch \
                 only in the worker processes, or start them with the 'spawn' or 'forkserver' \
                 method of multiprocessing",
                self.pid.load(Ordering::Relaxed)
            ),
        })
    }

    /// Marks this process as the opener, before it takes the open's lock (a child forked from
    /// then on refuses instead of waiting for that lock forever).
    pub fn begin(&self) {
        static HANDLER: Once = Once::new();
        HANDLER.call_once(|| {
            // SAFETY: `in_child` only stores to atomics, which is allowed after fork().
            let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
            if rc != 0 {
                tracing::debug!("pthread_atfork failed ({rc}): a forked child is not guarded");
            }
        });
        self.pid.store(std::process::id(), Ordering::Release);
    }

    /// The open failed: nobody opened it.
    pub fn failed(&self) {
        self.pid.store(0, Ordering::Release);
    }

    /// Whether this process opened the runtime (an inherited one is not released at exit).
    pub fn owns(&self) -> bool {
        !self.inherited.load(Ordering::Acquire) && self.pid.load(Ordering::Acquire) != 0
    }
}

/// A runtime the process opens once, on first use, and shares; guarded by its [`Opener`]. A
/// failed open is not remembered: a later call may succeed once the setup is fixed.
pub(crate) struct ProcessWide<T: 'static> {
    opener: &'static Opener,
    runtime: OnceLock<T>,
    opening: Mutex<()>,
}

impl<T> ProcessWide<T> {
    pub const fn new(opener: &'static Opener) -> ProcessWide<T> {
        ProcessWide {
            opener,
            runtime: OnceLock::new(),
            opening: Mutex::new(()),
        }
    }

    /// The runtime, opened with `open` by the first caller (the others wait for it).
    pub fn get_or_open(
        &'static self,
        open: impl FnOnce() -> Result<T, RuntimeError>,
    ) -> Result<&'static T, RuntimeError> {
        self.opener.usable()?;
        if let Some(runtime) = self.runtime.get() {
            return Ok(runtime);
        }
        self.opener.begin();
        let _guard = self.opening.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(runtime) = self.runtime.get() {
            return Ok(runtime);
        }
        match open() {
            Ok(runtime) => Ok(self.runtime.get_or_init(|| runtime)),
            Err(e) => {
                self.opener.failed();
                Err(e)
            }
        }
    }

    /// The runtime if this process opened it (one inherited across fork is not this
    /// process's to use or release).
    pub fn get(&'static self) -> Option<&'static T> {
        self.runtime.get().filter(|_| self.opener.owns())
    }
}
