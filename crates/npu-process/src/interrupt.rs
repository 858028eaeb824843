//! Stopping a wait when the user asks (Ctrl-C = SIGINT, or SIGTERM).
//!
//! Code that waits — for a tool here, for a device or a lock elsewhere — calls [`check`]
//! at least every ~50 ms and gives up with the [`Interrupted`] it returns. What a check
//! consults depends on who runs us, so the caller installs it:
//!
//! * a standalone program installs a [`SignalFlag`]: SIGINT and SIGTERM set a process-wide
//!   flag (and a second signal ends the process the default way);
//! * inside Python, the binding wraps each native call that may wait in [`with_check`] with a
//!   check that briefly re-takes the GIL and runs Python's signal handlers
//!   (`Python::check_signals`). While native code runs with the GIL released, Python's own C
//!   handler only records the signal; only such a check turns it into `KeyboardInterrupt` (or
//!   whatever the program's handler raises). Replacing Python's handlers instead would race
//!   with Python code that installs its own, and would lose the program's choices.
//!
//! A check is per thread (Python delivers signals to its main thread only, so a check on
//! another thread never fires, exactly as Python code there never sees `KeyboardInterrupt`).
//! Once a check has fired, every later [`check`] in the same [`with_check`] scope reports the
//! same interruption, so no later wait of the interrupted call starts.
//!
//! For device waits (`npu-runtime`): poll the device with a short timeout (≤ 50 ms) and call
//! [`check`] between polls; on `Err(i)`, abandon the wait (release or reset what the wait
//! owned) and return an error carrying `i`. [`check`] is cheap without an installed check
//! (two atomic/thread-local reads); with the Python check it takes the GIL, so do not call it
//! in a tight loop.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A wait was given up because the user asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted {
    signal: Option<i32>,
}

impl Interrupted {
    /// Interrupted by a signal (`libc::SIGINT`, `libc::SIGTERM`, …).
    pub const fn by_signal(signal: i32) -> Interrupted {
        Interrupted {
            signal: Some(signal),
        }
    }

    /// Interrupted by the installed check for a reason it keeps itself (e.g. a Python
    /// exception raised by the program's signal handler).
    pub const fn by_caller() -> Interrupted {
        Interrupted { signal: None }
    }

    /// The signal, when known.
    pub fn signal(&self) -> Option<i32> {
        self.signal
    }

    /// The conventional exit status of a program stopped this way: 128 + the signal number
    /// (130 for SIGINT, 143 for SIGTERM); 130 when the signal is not known.
    pub fn exit_code(&self) -> u8 {
        let signal = self.signal.unwrap_or(libc::SIGINT);
        u8::try_from(128 + signal).unwrap_or(130)
    }
}

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.signal {
            Some(libc::SIGINT) => f.write_str("interrupted by SIGINT (Ctrl-C)"),
            Some(libc::SIGTERM) => f.write_str("interrupted by SIGTERM"),
            Some(sig) => write!(f, "interrupted by signal {sig}"),
            None => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Interrupted {}

type CheckFn = dyn Fn() -> Result<(), Interrupted>;

/// One installed check and what it last reported.
struct Scope {
    check: Check,
    fired: Option<Interrupted>,
}

/// A scope's check: a closure, or a plain function (which costs no allocation to install, for
/// callers that install one around every short call).
#[derive(Clone)]
enum Check {
    Closure(Rc<CheckFn>),
    Function(fn() -> Result<(), Interrupted>),
}

impl Check {
    fn call(&self) -> Result<(), Interrupted> {
        match self {
            Check::Closure(check) => check(),
            Check::Function(check) => check(),
        }
    }
}

thread_local! {
    static SCOPES: RefCell<Vec<Scope>> = const { RefCell::new(Vec::new()) };
}

/// The signal a [`SignalFlag`] caught (0: none).
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Whether the wait in progress should stop: the signal a [`SignalFlag`] caught, else what the
/// checks installed on this thread by [`with_check`] say (innermost first).
pub fn check() -> Result<(), Interrupted> {
    if let Some(signal) = pending_signal() {
        return Err(Interrupted::by_signal(signal));
    }
    let depth = SCOPES.with(|s| s.borrow().len());
    for index in (0..depth).rev() {
        let (check, fired) = SCOPES.with(|s| {
            let scopes = s.borrow();
            (scopes[index].check.clone(), scopes[index].fired)
        });
        if let Some(i) = fired {
            return Err(i);
        }
        // Called without the borrow held: the check may run arbitrary code.
        if let Err(i) = check.call() {
            SCOPES.with(|s| {
                if let Some(scope) = s.borrow_mut().get_mut(index) {
                    scope.fired = Some(i);
                }
            });
            return Err(i);
        }
    }
    Ok(())
}

/// Runs `f` with `check_fn` consulted by every [`check`] on this thread until `f` returns
/// (also when it panics). Scopes nest.
pub fn with_check<R>(
    check_fn: impl Fn() -> Result<(), Interrupted> + 'static,
    f: impl FnOnce() -> R,
) -> R {
    within(Check::Closure(Rc::new(check_fn)), f)
}

/// [`with_check`] with a plain function, installed without allocating.
pub fn with_check_fn<R>(check_fn: fn() -> Result<(), Interrupted>, f: impl FnOnce() -> R) -> R {
    within(Check::Function(check_fn), f)
}

fn within<R>(check: Check, f: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            SCOPES.with(|s| {
                s.borrow_mut().pop();
            });
        }
    }
    SCOPES.with(|s| s.borrow_mut().push(Scope { check, fired: None }));
    let _pop = Pop;
    f()
}

/// The signal a [`SignalFlag`] caught, if any.
pub fn pending_signal() -> Option<i32> {
    match PENDING.load(Ordering::SeqCst) {
        0 => None,
        sig => i32::try_from(sig).ok(),
    }
}

/// Catches SIGINT and SIGTERM for a standalone program, until dropped: the first one sets the
/// flag [`check`] reports; a second one ends the process the default way at once, even if some
/// wait never checks. The handlers go away on drop; the caught signal stays readable through
/// [`pending_signal`].
pub struct SignalFlag {
    ids: Vec<signal_hook::SigId>,
}

/// Set by the first caught signal: arms the default action for the next one.
static ARMED: AtomicBool = AtomicBool::new(false);

impl SignalFlag {
    pub fn install() -> SignalFlag {
        let mut ids = Vec::new();
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // The order matters: the default action runs only when an earlier signal armed it.
            let actions = [
                signal_hook::flag::register_conditional_default(sig, &ARMED),
                signal_hook::flag::register_usize(sig, &PENDING, sig as usize),
                signal_hook::flag::register(sig, &ARMED),
            ];
            ids.extend(actions.into_iter().filter_map(Result::ok));
        }
        SignalFlag { ids }
    }

    /// What the flag caught so far.
    pub fn received(&self) -> Option<Interrupted> {
        pending_signal().map(Interrupted::by_signal)
    }
}

impl Drop for SignalFlag {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!(Interrupted::by_signal(libc::SIGINT).exit_code(), 130);
        assert_eq!(Interrupted::by_signal(libc::SIGTERM).exit_code(), 143);
        assert_eq!(Interrupted::by_caller().exit_code(), 130);
        assert_eq!(
            Interrupted::by_signal(libc::SIGINT).to_string(),
            "interrupted by SIGINT (Ctrl-C)"
        );
    }

    #[test]
    fn a_check_applies_inside_its_scope_only_and_sticks_once_fired() {
        assert_eq!(check(), Ok(()));
        let calls = Rc::new(Cell::new(0));
        let seen = calls.clone();
        with_check(
            move || {
                seen.set(seen.get() + 1);
                if seen.get() >= 2 {
                    Err(Interrupted::by_caller())
                } else {
                    Ok(())
                }
            },
            || {
                assert_eq!(check(), Ok(()));
                assert_eq!(check(), Err(Interrupted::by_caller()));
                // Fired: later waits of the interrupted call stop at once, without asking.
                assert_eq!(check(), Err(Interrupted::by_caller()));
            },
        );
        assert_eq!(calls.get(), 2);
        assert_eq!(check(), Ok(()));
    }

    #[test]
    fn nested_scopes_are_all_consulted_and_other_threads_are_not_affected() {
        with_check(
            || Err(Interrupted::by_signal(libc::SIGTERM)),
            || {
                with_check(
                    || Ok(()),
                    || {
                        assert_eq!(check(), Err(Interrupted::by_signal(libc::SIGTERM)));
                        let other = std::thread::spawn(check).join().unwrap();
                        assert_eq!(other, Ok(()));
                    },
                )
            },
        );
    }

    #[test]
    fn a_panicking_call_removes_its_check() {
        let result = std::panic::catch_unwind(|| {
            with_check(|| Err(Interrupted::by_caller()), || panic!("boom"))
        });
        assert!(result.is_err());
        assert_eq!(check(), Ok(()));
    }
}
