//! What every stand-in does before its real work: record its command line and obey the fault
//! injection switches.
//!
//! * `NPU_HARNESS_LOG=<file>`: append `{"tool": …, "argv": […], "cwd": …, "pid": …}` as one
//!   JSON line (under an exclusive file lock, so concurrent tools never interleave).
//! * `NPU_HARNESS_FAIL=<tool>[,<tool>…]`: print 45 lines of output and an error, exit 1.
//! * `NPU_HARNESS_HANG=<tool>[,<tool>…]`: start a helper process (a copy of itself) in the same
//!   process group, log its pid as `{"tool": …, "helper_pid": …}`, and sleep forever — so a
//!   test can check that a timeout kills the whole group.
//!
//! Tool names: `air-opt`, `aircc`, `llc`, `triton-shared-opt`. A bare `--version` run is
//! never failed or hung, so that discovery still finds the tool and the fault hits the step
//! under test.

use std::io::Write;
use std::time::Duration;

pub const LOG: &str = "NPU_HARNESS_LOG";
pub const FAIL: &str = "NPU_HARNESS_FAIL";
pub const HANG: &str = "NPU_HARNESS_HANG";
const HANG_HELPER: &str = "NPU_HARNESS_HANG_HELPER";

/// Lines printed before an injected failure (more than the 40 a driver error shows).
pub const FAIL_NOISE_LINES: usize = 45;

/// Records the invocation, applies fault injection, and returns the command line.
pub fn start(tool: &str) -> Vec<String> {
    if std::env::var_os(HANG_HELPER).is_some() {
        sleep_forever();
    }
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    log_line(&serde_json::json!({
        "tool": tool,
        "argv": argv,
        "cwd": cwd,
        "pid": std::process::id(),
    }));
    // `--version` probes (discovery) are answered normally: the faults hit real work.
    let probe = argv.len() == 2 && (argv[1] == "--version" || argv[1] == "-version");
    if names(HANG, tool) && !probe {
        let helper = std::env::current_exe()
            .ok()
            .and_then(|exe| {
                std::process::Command::new(exe)
                    .env(HANG_HELPER, "1")
                    .stdin(std::process::Stdio::null())
                    .spawn()
                    .ok()
            })
            .map(|child| child.id());
        log_line(&serde_json::json!({ "tool": tool, "helper_pid": helper }));
        sleep_forever();
    }
    if names(FAIL, tool) && !probe {
        let mut out = std::io::stdout().lock();
        for i in 1..=FAIL_NOISE_LINES {
            let _ = writeln!(out, "{tool}: harness progress line {i}");
        }
        let _ = out.flush();
        eprintln!(
            "{tool}: error: injected failure ({FAIL}={})",
            std::env::var(FAIL).unwrap_or_default()
        );
        std::process::exit(1);
    }
    argv
}

fn names(var: &str, tool: &str) -> bool {
    std::env::var(var)
        .map(|v| v.split(',').any(|t| t.trim() == tool))
        .unwrap_or(false)
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn log_line(value: &serde_json::Value) {
    let Some(path) = std::env::var_os(LOG) else {
        return;
    };
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    else {
        eprintln!("npu-harness: cannot open {LOG}={}", path.to_string_lossy());
        return;
    };
    let _ = file.lock();
    let mut line = value.to_string();
    line.push('\n');
    let _ = (&file).write_all(line.as_bytes());
    let _ = file.unlock();
}

/// Prints an error the way the real tool would and exits with status 1.
pub fn fail(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(1);
}

/// Reads an input file (`-` = stdin), or `None` with the OS error text.
pub fn read_input(path: &str) -> Result<String, String> {
    if path == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| e.to_string())?;
        return Ok(s);
    }
    std::fs::read_to_string(path).map_err(|e| os_message(&e))
}

/// Writes an output file (`-` = stdout).
pub fn write_output(path: &str, contents: &[u8]) -> Result<(), String> {
    if path == "-" {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(contents)
            .and_then(|_| out.flush())
            .map_err(|e| e.to_string());
    }
    std::fs::write(path, contents).map_err(|e| os_message(&e))
}

/// The OS's message without Rust's ` (os error N)` suffix, as C++ tools print it.
pub fn os_message(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_owned(),
        None => s,
    }
}

/// An LLVM-style `--version` banner.
pub fn version_banner(tool: &str) -> String {
    format!(
        "LLVM (http://llvm.org/):\n  LLVM version 20.1.0-npu-harness\n  \
         npu-harness stand-in for {tool} (conformance tests only; computes nothing)\n  \
         Optimized build.\n"
    )
}
