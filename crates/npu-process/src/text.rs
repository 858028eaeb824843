//! What people read about a run: command lines to paste, exit statuses, output tails.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

/// Describes an exit status: `exit status 1`, `killed by signal 11 (SIGSEGV: the tool
/// crashed)`.
pub fn describe_status(status: &ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit status {code}");
    }
    match status.signal() {
        Some(sig) => format!("killed by signal {sig}{}", signal_name(sig)),
        None => "ended abnormally".to_owned(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV: the tool crashed)",
        libc::SIGABRT => " (SIGABRT: an assertion failed in the tool)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGBUS => " (SIGBUS)",
        _ => "",
    }
}

/// How much of the end of a log [`tail_lines`] reads.
const TAIL_WINDOW: u64 = 256 * 1024;

/// The last `n` lines of a log file (lossy UTF-8, `\r` progress updates folded); the whole
/// file for `n == usize::MAX`, else only its last 256 KiB are read. Empty when the file
/// cannot be read.
pub fn tail_lines(path: &Path, n: usize) -> Vec<String> {
    let Ok(mut file) = File::open(path) else {
        return Vec::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = if n == usize::MAX {
        0
    } else {
        len.saturating_sub(TAIL_WINDOW)
    };
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    last_lines(&bytes, n, start > 0)
}

/// The last `n` lines of `bytes`; `cut` says the first line may be a fragment (dropped).
pub fn last_lines(bytes: &[u8], n: usize, cut: bool) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines: Vec<String> = text
        .lines()
        // A progress line rewritten with `\r` shows its final state only.
        .map(|l| l.rsplit('\r').next().unwrap_or(l).trim_end().to_owned())
        .collect();
    if cut && !lines.is_empty() {
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let skip = lines.len().saturating_sub(n);
    lines.split_off(skip)
}

/// A command line as it could be pasted into a POSIX shell.
pub fn shell_line(program: &Path, args: &[OsString]) -> String {
    std::iter::once(program.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One word for a POSIX shell, quoted only when needed.
pub fn shell_quote(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./=:,+-@%".contains(c));
    if safe {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `3600 s`, `1.5 s`.
pub fn seconds(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn tail_keeps_the_last_lines_and_folds_carriage_returns() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("l");
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str("progress 10%\rprogress 100%\n\n");
        std::fs::write(&log, text).unwrap();
        let tail = tail_lines(&log, 3);
        assert_eq!(tail, vec!["line 98", "line 99", "progress 100%"]);
        assert_eq!(tail_lines(&log, usize::MAX).len(), 101);
        assert!(tail_lines(&dir.path().join("missing"), 3).is_empty());
        assert_eq!(last_lines(b"partial\nwhole\n", 5, true), vec!["whole"]);
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote(OsStr::new("--peano=/opt/p")), "--peano=/opt/p");
        assert_eq!(shell_quote(OsStr::new("a b")), "'a b'");
        assert_eq!(shell_quote(OsStr::new("")), "''");
        assert_eq!(shell_quote(OsStr::new("it's")), r"'it'\''s'");
        assert_eq!(
            shell_line(
                Path::new("/bin/x"),
                &[OsString::from("builtin.module(cse)")]
            ),
            "/bin/x 'builtin.module(cse)'"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(seconds(Duration::from_secs(3600)), "3600 s");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5 s");
    }
}
