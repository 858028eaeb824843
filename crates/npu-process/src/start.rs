//! Why a tool could not be started, in words that say what to do.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A tool that could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start {tool} ({}): {problem}", .program.display())]
pub struct StartError {
    /// The tool's name, e.g. `aircc`.
    pub tool: String,
    pub program: PathBuf,
    pub problem: StartProblem,
    #[source]
    pub source: io::Error,
}

/// What kept a tool from starting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartProblem {
    /// No such file.
    NotFound,
    /// The file is a script whose `#!` interpreter does not exist.
    MissingInterpreter(PathBuf),
    /// No permission to execute it.
    NotExecutable,
    /// Not a program this machine can run.
    BadFormat,
    /// A limit of the process or of the system was reached.
    Exhausted(Exhaustion),
    /// Anything else; the OS error says what.
    Other(String),
}

impl fmt::Display for StartProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartProblem::NotFound => f.write_str(
                "the file does not exist; install the tool or point its setting at the right \
                 path",
            ),
            StartProblem::MissingInterpreter(interpreter) => write!(
                f,
                "it is a script whose interpreter {} (its #! line) does not exist; install \
                 that interpreter or fix the script",
                interpreter.display()
            ),
            StartProblem::NotExecutable => f.write_str(
                "permission denied: the file is not executable (chmod +x), a directory on its \
                 path is not searchable, or its file system is mounted noexec",
            ),
            StartProblem::BadFormat => f.write_str(
                "the file is not a program this machine can run (another architecture, a \
                 damaged binary, or a script without a #! line)",
            ),
            StartProblem::Exhausted(e) => e.fmt(f),
            StartProblem::Other(what) => f.write_str(what),
        }
    }
}

impl StartError {
    /// Classifies `source`, the error of starting `program`.
    pub fn new(tool: &str, program: &Path, source: io::Error) -> StartError {
        let problem = match exhaustion(&source) {
            Some(e) => StartProblem::Exhausted(e),
            None => match source.raw_os_error() {
                Some(libc::ENOENT) => match interpreter(program) {
                    Some(i) if !i.exists() => StartProblem::MissingInterpreter(i),
                    _ if program.exists() => StartProblem::Other(source.to_string()),
                    _ => StartProblem::NotFound,
                },
                Some(libc::EACCES | libc::EPERM) => StartProblem::NotExecutable,
                Some(libc::ENOEXEC | libc::ELIBBAD) => StartProblem::BadFormat,
                _ => StartProblem::Other(source.to_string()),
            },
        };
        StartError {
            tool: tool.to_owned(),
            program: program.to_owned(),
            problem,
            source,
        }
    }
}

/// The interpreter a script names on its `#!` line.
fn interpreter(program: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    line.split_whitespace().next().map(PathBuf::from)
}

/// A limit that was reached: which errno, which limit and its value, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exhaustion {
    /// `EMFILE`, `ENFILE`, `EAGAIN`, `ENOMEM`, `ENOSPC`, `EDQUOT`, `E2BIG`.
    pub errno: &'static str,
    /// What ran out, with the limit's name and value when there is one.
    pub what: String,
    /// What to do about it.
    pub fix: String,
}

impl fmt::Display for Exhaustion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}); {}", self.what, self.errno, self.fix)
    }
}

/// Describes `err` as resource exhaustion (too many open files or processes, no memory, a
/// command line too long), or `None` for any other error. Other crates use it for their own
/// resources (e.g. file descriptors of loaded kernels).
pub fn exhaustion(err: &io::Error) -> Option<Exhaustion> {
    let errno = err.raw_os_error()?;
    Some(match errno {
        libc::EMFILE => {
            let (soft, hard) = limit(rustix::process::Resource::Nofile);
            Exhaustion {
                errno: "EMFILE",
                what: format!(
                    "this process has as many files open as its limit allows (RLIMIT_NOFILE, \
                     `ulimit -n`: {soft}; hard limit {hard})"
                ),
                fix: format!(
                    "raise the limit (e.g. `ulimit -n {hard}` before starting Python), or \
                     release kernels and files this program keeps open"
                ),
            }
        }
        libc::ENFILE => Exhaustion {
            errno: "ENFILE",
            what: format!(
                "the system's table of open files is full (fs.file-max: {})",
                proc_value("/proc/sys/fs/file-max")
            ),
            fix: "close programs that hold many files, or raise fs.file-max (sysctl)".to_owned(),
        },
        libc::EAGAIN => {
            let (soft, hard) = limit(rustix::process::Resource::Nproc);
            Exhaustion {
                errno: "EAGAIN",
                what: format!(
                    "no new process can be created: the per-user process limit (RLIMIT_NPROC, \
                     `ulimit -u`: {soft}; hard limit {hard}) or the system's (kernel.threads-max: \
                     {}, kernel.pid_max: {}) is reached",
                    proc_value("/proc/sys/kernel/threads-max"),
                    proc_value("/proc/sys/kernel/pid_max")
                ),
                fix: "end processes you no longer need, or raise the limit (`ulimit -u`)"
                    .to_owned(),
            }
        }
        libc::ENOMEM => Exhaustion {
            errno: "ENOMEM",
            what: "not enough memory (for a new process, a mapping or an open file)".to_owned(),
            fix: "free memory (fewer parallel compiles or processes) and try again".to_owned(),
        },
        libc::ENOSPC | libc::EDQUOT => Exhaustion {
            errno: if errno == libc::ENOSPC {
                "ENOSPC"
            } else {
                "EDQUOT"
            },
            what: "the file system (or your disk quota) is full".to_owned(),
            fix: "free space there, or point AMD_TRITON_NPU_CACHE_DIR (the kernel cache) and \
                  TMPDIR (compile folders) at a file system with room"
                .to_owned(),
        },
        libc::E2BIG => Exhaustion {
            errno: "E2BIG",
            what: "the command line and environment are longer than the system allows \
                   (ARG_MAX)"
                .to_owned(),
            fix: "shorten the environment (very long variables) or the paths involved".to_owned(),
        },
        _ => return None,
    })
}

/// The text of `err`, followed by what ran out and what to do when it is resource
/// exhaustion: for messages about files that could not be opened, created or written.
pub fn describe_io(err: &io::Error) -> String {
    match exhaustion(err) {
        Some(e) => format!("{err}: {e}"),
        None => err.to_string(),
    }
}

/// Sets this process's limit on open files (RLIMIT_NOFILE, `ulimit -n`) to `soft` (raising it
/// up to `hard`): for tests and trials of what happens when the limit is reached.
pub fn set_open_file_limit(soft: u64, hard: u64) -> io::Result<()> {
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(soft),
            maximum: Some(hard),
        },
    )
    .map_err(io::Error::from)
}

/// A resource limit of this process as (soft, hard), `unlimited` spelled out.
fn limit(resource: rustix::process::Resource) -> (String, String) {
    let value = rustix::process::getrlimit(resource);
    let show = |v: Option<u64>| v.map_or_else(|| "unlimited".to_owned(), |v| v.to_string());
    (show(value.current), show(value.maximum))
}

fn proc_value(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn os(errno: i32) -> io::Error {
        io::Error::from_raw_os_error(errno)
    }

    #[test]
    fn exhaustion_names_the_errno_the_limit_and_the_fix() {
        let e = exhaustion(&os(libc::EMFILE)).unwrap();
        assert_eq!(e.errno, "EMFILE");
        assert!(
            e.what.contains("RLIMIT_NOFILE") && e.fix.contains("ulimit -n"),
            "{e}"
        );
        let e = exhaustion(&os(libc::EAGAIN)).unwrap();
        assert!(
            e.what.contains("RLIMIT_NPROC") && e.what.contains("pid_max"),
            "{e}"
        );
        assert_eq!(exhaustion(&os(libc::ENFILE)).unwrap().errno, "ENFILE");
        assert_eq!(exhaustion(&os(libc::ENOMEM)).unwrap().errno, "ENOMEM");
        assert_eq!(exhaustion(&os(libc::E2BIG)).unwrap().errno, "E2BIG");
        let full = describe_io(&os(libc::ENOSPC));
        assert!(
            full.contains("ENOSPC") && full.contains("AMD_TRITON_NPU_CACHE_DIR"),
            "{full}"
        );
        assert_eq!(describe_io(&os(libc::ENOENT)), os(libc::ENOENT).to_string());
        assert!(exhaustion(&os(libc::ENOENT)).is_none());
        assert!(exhaustion(&io::Error::other("x")).is_none());
    }

    #[test]
    fn a_missing_interpreter_is_told_apart_from_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("tool");
        std::fs::write(&script, "#!/nonexistent/interp -x\necho hi\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = StartError::new("tool", &script, os(libc::ENOENT));
        assert_eq!(
            e.problem,
            StartProblem::MissingInterpreter(PathBuf::from("/nonexistent/interp"))
        );
        assert!(e.to_string().contains("/nonexistent/interp"), "{e}");
        let e = StartError::new("tool", &dir.path().join("gone"), os(libc::ENOENT));
        assert_eq!(e.problem, StartProblem::NotFound);
        let e = StartError::new("tool", &script, os(libc::EACCES));
        assert!(e.to_string().contains("chmod +x"), "{e}");
    }
}
