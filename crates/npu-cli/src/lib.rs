//! The `triton-npu` command line, as a library so that the Python module can run it in-process.
//!
//! Each subcommand lives in its own module and exposes a clap `Args` type and a `run` function
//! returning the process exit code.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub mod cache;
pub mod compile;
pub mod config;
pub mod doctor;
pub mod hsaco;
pub mod model_scripts;
pub mod python_entry;
pub mod run;
pub mod test_examples;
pub mod transform;

/// Facts about the calling environment that Rust cannot learn by itself.
#[derive(Debug, Clone, Default)]
pub struct Host {
    /// Set when running inside Python (the console script `triton-npu-python`, to which the
    /// installed `triton-npu` hands the commands that need it, or `python -m triton_npu`).
    pub python: Option<PythonHost>,
}

#[derive(Debug, Clone, Default)]
pub struct PythonHost {
    pub executable: PathBuf,
    pub version: String,
    /// `triton.__version__`, if triton imports.
    pub triton_version: Option<String>,
    /// Why `import triton` failed, if it did.
    pub triton_error: Option<String>,
    /// The directory of the `triton` package.
    pub triton_dir: Option<PathBuf>,
    /// `site.getsitepackages()` plus the user site: where pip installs tool packages.
    pub site_packages: Vec<PathBuf>,
    /// The installed package's directories that may hold the XRT shim.
    pub shim_dirs: Vec<PathBuf>,
}

impl Host {
    pub fn standalone() -> Host {
        Host::default()
    }

    /// The driver's view of the installation.
    pub fn driver_host(&self) -> npu_driver::Host {
        match &self.python {
            Some(py) => npu_driver::Host {
                site_packages: py.site_packages.clone(),
                triton_dir: py.triton_dir.clone(),
                shim_dirs: py.shim_dirs.clone(),
            },
            None => npu_driver::Host::default(),
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "triton-npu",
    version = npu_target::VERSION,
    about = "Triton backend for AMD XDNA NPUs: diagnose the setup, show the configuration, \
             compile kernels ahead of time, show transform scripts, pack and inspect hsaco \
             files, run kernels for bring-up, run example scripts, manage the kernel cache"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check the configuration, the target, the toolchain and the runtimes.
    Doctor(doctor::DoctorArgs),
    /// Show every environment variable the driver reads, its value and its default.
    Config(config::ConfigArgs),
    /// List, verify and clear the kernel cache.
    Cache(cache::CacheArgs),
    /// Pack, dump and check AIE hsaco code objects.
    Hsaco(hsaco::HsacoArgs),
    /// Dispatch one kernel of an hsaco through ROCr (bring-up).
    Run(run::RunArgs),
    /// Compile a ttsharedir (Linalg) MLIR kernel ahead of time.
    Compile(compile::CompileArgs),
    /// Run upstream-style example scripts (one directory each) and summarise.
    TestExamples(test_examples::TestExamplesArgs),
    /// List the transform library; print the transform script air-opt gets.
    Transform(transform::TransformArgs),
}

/// Parses `args` (program name first) and runs the command. Never panics outward: a panic
/// inside a command is reported as an internal error with exit code 101.
pub fn run<I, T>(args: I, host: &Host) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match cli.command {
        Command::Doctor(args) => doctor::run(&args, host),
        Command::Config(args) => config::run(&args),
        Command::Cache(args) => cache::run(&args),
        Command::Hsaco(args) => hsaco::run(&args),
        Command::Run(args) => run::run(&args, host),
        Command::Compile(args) => compile::run_for_host(&args, host),
        Command::TestExamples(args) => test_examples::run(&args, host),
        Command::Transform(args) => transform::run(&args),
    }));
    outcome.unwrap_or_else(|_| {
        eprintln!("triton-npu: internal error (a bug; please report it with the command line)");
        101
    })
}
