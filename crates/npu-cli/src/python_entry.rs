//! The hand-over from the standalone binary to the Python entry point.
//!
//! pip installs `triton-npu` as this binary, and beside it `triton-npu-python`, the console
//! script that runs the same commands inside the interpreter that installed the package. The
//! binary runs the commands that need nothing of Python itself (help, version, `config`,
//! `cache`, `hsaco`, `transform`), so they start without an interpreter. `doctor`, `compile`,
//! `run` and `test-examples` use what only that interpreter knows (where pip put the tools,
//! triton and the XRT shim; triton's version; the remote kernel cache, which is a Python
//! object): the binary replaces itself with the console script for them, which then behaves
//! exactly as the Python entry point does (its exit codes and signal handling included).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::{Cli, Command};
use clap::Parser;

/// The console script's name (`[project.scripts]` in pyproject.toml).
pub const SCRIPT: &str = "triton-npu-python";

/// Whether the command line `args` (program name first) runs a command that needs the Python
/// entry point. A command line that does not parse does not: the binary reports the error.
pub fn needs_python<I, T>(args: I) -> bool
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    Cli::try_parse_from(args).is_ok_and(|cli| match cli.command {
        Command::Doctor(_) | Command::Compile(_) | Command::Run(_) | Command::TestExamples(_) => {
            true
        }
        Command::Config(_) | Command::Cache(_) | Command::Hsaco(_) | Command::Transform(_) => false,
    })
}

/// The console script installed beside `exe` (this binary, symlinks resolved), if any: a
/// binary built by cargo has none and runs every command itself.
pub fn script_beside(exe: &Path) -> Option<PathBuf> {
    let script = exe.parent()?.join(SCRIPT);
    npu_process::lookup::is_executable_file(&script).then_some(script)
}

/// Replaces this process with `script` run with `args` (program name excluded); returns only
/// when that fails, with the reason.
pub fn exec(script: &Path, args: &[impl AsRef<OsStr>]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(script).args(args).exec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_commands_that_use_python_are_handed_over() {
        for args in [
            &["doctor"][..],
            &[
                "compile", "k.mlir", "--kernel", "k", "--grid", "1", "-o", "out",
            ],
            &[
                "run", "--hsaco", "k.hsaco", "--kernel", "k", "--arg", "out:16",
            ],
            &["test-examples", "dir"],
        ] {
            let line = std::iter::once("triton-npu").chain(args.iter().copied());
            assert!(needs_python(line), "{args:?}");
        }
        for args in [
            &["--help"][..],
            &["--version"],
            &["hsaco", "dump", "--hsaco", "x.hsaco"],
            &["cache", "stats"],
            &["transform", "list"],
            &["config"],
            &["no-such-command"],
            &["doctor", "--no-such-flag"],
            &["doctor", "--help"],
            &["compile", "k.mlir"],
        ] {
            let line = std::iter::once("triton-npu").chain(args.iter().copied());
            assert!(!needs_python(line), "{args:?}");
        }
    }

    #[test]
    fn the_script_must_be_an_executable_file_beside_the_binary() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("triton-npu");
        assert_eq!(script_beside(&exe), None);
        let script = t.path().join(SCRIPT);
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(script_beside(&exe), None, "not executable");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(script_beside(&exe), Some(script));
    }
}
