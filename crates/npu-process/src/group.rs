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
//! The tool also gets `PR_SET_PDEATHSIG(SIGKILL)` (it dies with the thread that started it),
//! which covers the moment before its watchdog could act and systems without `/bin/sh`.
//!
//! Limits: a process of ours that was forked without exec (Python's `multiprocessing` "fork")
//! inherits the write end and keeps watchdogs waiting until it ends too; a tool that moves its
//! children to another group or session (`setsid`) takes them out of our reach.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// Whether the process has exited, without reaping it (so its pid stays reserved).
pub fn exited_unreaped(pid: libc::pid_t) -> io::Result<bool> {
    loop {
        // SAFETY: siginfo_t is plain data; waitid only writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child; WNOWAIT leaves it waitable for `Child::wait`.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: waitid filled the structure (or left it zeroed when nothing changed).
            return Ok(unsafe { info.si_pid() } != 0);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Kills every process of group `pgid` with SIGKILL (nothing for `pgid` ≤ 0).
/// Async-signal-safe.
pub fn kill_group(pgid: libc::pid_t) {
    if pgid > 0 {
        // SAFETY: plain syscall; a group that is already gone gives ESRCH, which is fine.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
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

/// Makes `command` die with SIGKILL when the thread that spawns it ends (see the module docs).
pub(crate) fn die_with_parent(command: &mut Command) {
    // SAFETY: getpid is async-signal-safe and runs before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: only async-signal-safe calls (prctl, getppid) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // We died before the request took effect: do not start a tool nobody waits for.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}
