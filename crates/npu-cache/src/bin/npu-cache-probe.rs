//! Test helper for the multi-process tests of `npu-cache`: one `get_or_build` in its own
//! process. Not installed anywhere; the tests run it through `CARGO_BIN_EXE_npu-cache-probe`.
//!
//! ```text
//! npu-cache-probe <root> <kernel-name> <build-log> [options]
//!   --hold-build FILE   the build waits until FILE exists (so a test can kill the builder)
//!   --hold-entry FILE   after getting the entry, keep it in use until FILE exists
//!   --fail              the build fails after writing its files
//!   --size N            bytes of the main artifact (default 4096)
//!   --wait S            wait at most S seconds for another builder (default: the cache's)
//! ```
//!
//! The build appends `start <pid>` and `done <pid>` lines to the build log. On success the
//! probe prints `<entry data dir>\t<sha256 over the entry's files>` and exits 0; a failed build
//! exits 3, any other error 1 (message on stderr). Logs go to stderr: the cache's at debug
//! level, everything else at info level.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use npu_cache::{Cache, CacheError, Inputs};
use sha2::{Digest, Sha256};

struct Args {
    root: PathBuf,
    kernel: String,
    log: PathBuf,
    hold_build: Option<PathBuf>,
    hold_entry: Option<PathBuf>,
    fail: bool,
    size: usize,
    wait: Option<Duration>,
}

fn parse() -> Result<Args, String> {
    let mut raw = std::env::args().skip(1);
    let mut positional = Vec::new();
    let mut args = Args {
        root: PathBuf::new(),
        kernel: String::new(),
        log: PathBuf::new(),
        hold_build: None,
        hold_entry: None,
        fail: false,
        size: 4096,
        wait: None,
    };
    while let Some(a) = raw.next() {
        match a.as_str() {
            "--hold-build" => args.hold_build = raw.next().map(PathBuf::from),
            "--hold-entry" => args.hold_entry = raw.next().map(PathBuf::from),
            "--fail" => args.fail = true,
            "--wait" => {
                args.wait = Some(Duration::from_secs_f64(
                    raw.next()
                        .and_then(|s| s.parse().ok())
                        .ok_or("--wait needs a number of seconds")?,
                ))
            }
            "--size" => {
                args.size = raw
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("--size needs a number")?
            }
            _ => positional.push(a),
        }
    }
    let [root, kernel, log] = <[String; 3]>::try_from(positional)
        .map_err(|_| "usage: npu-cache-probe <root> <kernel-name> <build-log> [options]")?;
    args.root = root.into();
    args.kernel = kernel;
    args.log = log.into();
    Ok(args)
}

fn append(log: &Path, line: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new().create(true).append(true).open(log)?;
    f.write_all(format!("{line} {}\n", std::process::id()).as_bytes())
}

fn wait_for(path: &Path) {
    while !path.exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The artifact content: a function of the kernel name only, so every build of a key
/// produces the same bytes.
fn artifact(kernel: &str, size: usize) -> Vec<u8> {
    let seed = Sha256::digest(kernel.as_bytes());
    (0..size)
        .map(|i| seed[i % seed.len()] ^ (i as u8))
        .collect()
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new("info,npu_cache=debug"))
        .init();
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let cache = match Cache::at(&args.root) {
        Ok(c) => match args.wait {
            Some(wait) => c.with_build_wait(wait),
            None => c,
        },
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let inputs = Inputs::new()
        .text("kernel_name", &args.kernel)
        .text(
            "kernel_ir",
            format!("module {{ func.func @{}() }}", args.kernel),
        )
        .text("grid", "1,1,1");
    let result = cache.get_or_build(&inputs, |dir| -> std::io::Result<()> {
        append(&args.log, "start")?;
        if let Some(hold) = &args.hold_build {
            wait_for(hold);
        }
        std::fs::write(dir.join("aie.elf"), artifact(&args.kernel, args.size))?;
        std::fs::create_dir(dir.join("meta"))?;
        std::fs::write(dir.join("meta").join("kernel_name.txt"), &args.kernel)?;
        append(&args.log, "done")?;
        if args.fail {
            return Err(std::io::Error::other("injected build failure"));
        }
        Ok(())
    });
    let entry = match result {
        Ok(e) => e,
        Err(e @ CacheError::Build { .. }) => {
            eprintln!("build failed: {e}");
            return ExitCode::from(3);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let mut digest = Sha256::new();
    for record in &entry.manifest().files {
        digest.update(record.path.as_bytes());
        match std::fs::read(entry.dir().join(&record.path)) {
            Ok(bytes) => digest.update(&bytes),
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", record.path);
                return ExitCode::from(1);
            }
        }
    }
    let hex: String = digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("{}\t{hex}", entry.dir().display());
    let _ = std::io::stdout().flush();
    if let Some(hold) = &args.hold_entry {
        wait_for(hold);
    }
    drop(entry);
    ExitCode::SUCCESS
}
