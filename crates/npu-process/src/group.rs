//! Process groups: every tool runs in a group of its own, which is killed as a whole.
//!
//! **While we live**, the runner kills the group when the tool exits (helpers it left behind),
//! at the deadline and on interruption. The group id is only ever signalled while one of our
//! unreaped children belongs to it, so it cannot have been reused by then.
//!
//! **When we die** — even by SIGKILL, when no code of ours runs — a *watchdog* kills the group:
//! a `/bin/sh` started first as the group's leader, with the read end of a pipe as its stdin;
//! we keep the only write end (close-on-exec, so no tool inherits it). When our process ends,
//! the kernel closes that end, the watchdog's `read` sees end-of-file, and it runs
//! `kill -s KILL 0`: SIGKILL to its whole group, the tool and everything the tool started
//! (aircc starts aiecc, which starts Peano's tools). The watchdog keeps the group id alive as
//! long as it lives, so even then the id cannot be reused. `PR_SET_PDEATHSIG` alone would not
//! do: it reaches only the tool itself, not its children.
//!
//! The watchdog is started before the tool and already watches when the tool joins its
//! group, so there is no moment in which our death would leave the tool behind.
//!
//! Limits: a process of ours that was forked without exec (Python's `multiprocessing` "fork")
//! inherits the write end and keeps watchdogs waiting until it ends too; a tool that moves its
//! children to another group or session (`setsid`) takes them out of our reach.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions};

/// A handle that becomes readable when the child `pid` exits (a pidfd, Linux 5.3+), so that a
/// wait for it ends the moment it does; `None` where the kernel offers none.
pub fn exit_notifier(pid: libc::pid_t) -> Option<OwnedFd> {
    rustix::process::pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok()
}

/// Waits at most `timeout` for the child behind `notifier` to exit, returning as soon as it
/// does; without a notifier, sleeps `timeout`. A tool that ends between two checks of a
/// sleeping wait is noticed up to a whole pause late — per tool, per compile.
pub fn wait_exit(notifier: Option<&OwnedFd>, timeout: Duration) {
    let Some(fd) = notifier else {
        std::thread::sleep(timeout);
        return;
    };
    let limit = Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    match rustix::event::poll(&mut fds, Some(&limit)) {
        // Ended, timed out, or interrupted by a signal: the caller checks again.
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        // Cannot happen for a valid pidfd; never spin on it.
        Err(_) => std::thread::sleep(timeout),
    }
}

/// Whether the process has exited, without reaping it (so its pid stays reserved).
pub fn exited_unreaped(pid: libc::pid_t) -> io::Result<bool> {
    let pid = Pid::from_raw(pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        // WNOWAIT leaves the child waitable for `Child::wait`.
        match rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        ) {
            Ok(status) => return Ok(status.is_some()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Kills every process of group `pgid` with SIGKILL (nothing for `pgid` ≤ 0).
pub fn kill_group(pgid: libc::pid_t) {
    if let Some(pgid) = Pid::from_raw(pgid) {
        // A group that is already gone gives ESRCH, which is fine.
        let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
    }
}

/// Whether process `pid` has ended: it no longer exists, or it is a zombie nobody has reaped
/// yet (in a container, pid 1 may never reap orphans). For tests and diagnostics: a pid may
/// be reused once reaped.
pub fn has_ended(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name, which is in parentheses and may hold any byte.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// The shell the watchdog runs in.
const SHELL: &str = "/bin/sh";
/// Waits for end-of-file on stdin (our death, or [`Watchdog`] being dropped), then kills the
/// whole process group. Signals the group may get from a terminal are ignored.
const WATCH: &str = "trap '' INT TERM HUP QUIT; while read -r _; do :; done; kill -s KILL 0";

/// The leader of a tool's process group, watching for our death. See the module docs.
pub(crate) struct Watchdog {
    child: Child,
    /// Dropping it (or our death) tells the watchdog to kill the group.
    _alarm: io::PipeWriter,
}

impl Watchdog {
    pub(crate) fn start() -> io::Result<Watchdog> {
        let (quiet, alarm) = io::pipe()?;
        let child = Command::new(SHELL)
            .args(["-c", WATCH])
            .stdin(quiet)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(Watchdog {
            child,
            _alarm: alarm,
        })
    }

    /// The group's id (the watchdog's pid).
    pub(crate) fn pgid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    /// Kills the group (with the watchdog) and reaps the watchdog.
    pub(crate) fn finish(mut self) {
        kill_group(self.pgid());
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_wait_ends_when_the_child_exits_not_at_its_limit() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let notifier = exit_notifier(pid).expect("a pidfd (Linux 5.3+)");
        let start = Instant::now();
        wait_exit(Some(&notifier), Duration::from_secs(60));
        // A sleeping wait would take its whole minute.
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{:?}",
            start.elapsed()
        );
        assert!(exited_unreaped(pid).unwrap());
        child.wait().unwrap();
    }

    #[test]
    fn a_wait_for_a_running_child_ends_at_its_limit() {
        let mut child = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let notifier = exit_notifier(pid).expect("a pidfd (Linux 5.3+)");
        wait_exit(Some(&notifier), Duration::from_millis(10));
        assert!(!exited_unreaped(pid).unwrap());
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
