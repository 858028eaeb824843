//! `triton-npu run`: dispatch one kernel of an hsaco through ROCr, outside Triton — for
//! bringing up a kernel on real hardware. Inputs come from files, outputs go to
//! `<out-dir>/arg<i>.bin`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use npu_runtime::hsa::{CodeSource, HsaRuntime, Variable};
use npu_runtime::{DispatchOptions, HostBuffers};

use crate::Host;

/// One buffer argument of the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgSpec {
    /// Read from a file; not written back.
    In(PathBuf),
    /// A zero-filled output of this many bytes.
    Out(u64),
    /// Read from a file and written back.
    InOut(PathBuf),
}

fn parse_arg(text: &str) -> Result<ArgSpec, String> {
    let (kind, value) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not in:PATH, out:BYTES or inout:PATH"))?;
    if value.is_empty() {
        return Err(format!("{text:?} names no file or size after the colon"));
    }
    match kind {
        "in" => Ok(ArgSpec::In(PathBuf::from(value))),
        "inout" => Ok(ArgSpec::InOut(PathBuf::from(value))),
        "out" => match npu_target::config::parse_byte_size(value) {
            Some(0) => Err(format!("{text:?}: an output needs at least one byte")),
            Some(n) => Ok(ArgSpec::Out(n)),
            None => Err(format!(
                "{text:?}: {value:?} is not a byte count (e.g. 4096 or 16K)"
            )),
        },
        other => Err(format!(
            "{other:?} is not an argument kind; use in, out or inout"
        )),
    }
}

fn parse_variable(text: &str) -> Result<Variable, String> {
    let (name, size) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?} is not NAME:BYTES"))?;
    let size = npu_target::config::parse_byte_size(size)
        .filter(|s| *s > 0)
        .ok_or_else(|| format!("{text:?}: {size:?} is not a positive byte count"))?;
    Ok(Variable {
        name: name.to_owned(),
        size,
    })
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The hsaco file holding the kernel.
    #[arg(long, value_name = "FILE")]
    pub hsaco: PathBuf,
    /// The kernel's name in the hsaco (`main:<instance>` for a full-ELF kernel).
    #[arg(long, value_name = "NAME")]
    pub kernel: String,
    /// A buffer argument, in the kernel's order: `in:PATH` (input file), `out:BYTES` (output of
    /// that size, e.g. 4096 or 16K) or `inout:PATH` (input file, written back). Repeat per
    /// argument.
    #[arg(long = "arg", value_name = "SPEC", required = true, value_parser = parse_arg)]
    pub args: Vec<ArgSpec>,
    /// Where outputs are written, as `arg<i>.bin`.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out_dir: PathBuf,
    /// An external variable the code relocates against, as NAME:BYTES (e.g.
    /// scratch-pad-ctrl:4096). Repeatable.
    #[arg(long = "variable", value_name = "NAME:BYTES", value_parser = parse_variable)]
    pub variables: Vec<Variable>,
    /// Give up waiting after this many seconds (default: AMD_TRITON_NPU_HSA_TIMEOUT, whose own
    /// default is 120).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

pub fn run(args: &RunArgs, host: &Host) -> u8 {
    match dispatch(args, host) {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("triton-npu run: {message}");
            1
        }
    }
}

fn read(path: &Path, index: usize) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("argument {index}: cannot read {}: {e}", path.display()))?;
    if bytes.is_empty() {
        return Err(format!(
            "argument {index}: {} is empty; a buffer argument needs at least one byte",
            path.display()
        ));
    }
    Ok(bytes)
}

fn dispatch(args: &RunArgs, host: &Host) -> Result<(), String> {
    let timeout = match args.timeout {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => return Err(format!("--timeout {s} is not a positive number of seconds")),
    };
    let mut buffers: Vec<Vec<u8>> = Vec::with_capacity(args.args.len());
    for (i, spec) in args.args.iter().enumerate() {
        buffers.push(match spec {
            ArgSpec::In(path) | ArgSpec::InOut(path) => read(path, i)?,
            ArgSpec::Out(n) => {
                let n = usize::try_from(*n)
                    .map_err(|_| format!("argument {i}: {n} bytes is too large"))?;
                vec![0u8; n]
            }
        });
    }
    std::fs::create_dir_all(&args.out_dir)
        .map_err(|e| format!("cannot create {}: {e}", args.out_dir.display()))?;

    let config = npu_target::Config::current().map_err(|e| e.to_string())?;
    let site_packages = host
        .python
        .as_ref()
        .map(|p| p.site_packages.clone())
        .unwrap_or_default();
    let runtime = HsaRuntime::global(&config, &site_packages).map_err(|e| e.to_string())?;
    let program = runtime
        .prepare_with_variables(CodeSource::File(&args.hsaco), &args.kernel, &args.variables)
        .map_err(|e| e.to_string())?;
    let writeback: Vec<bool> = args
        .args
        .iter()
        .map(|s| !matches!(s, ArgSpec::In(_)))
        .collect();
    // Inputs are lent read-only: the kernel cannot write them back.
    let host_args =
        buffers
            .iter_mut()
            .zip(&writeback)
            .fold(HostBuffers::new(), |all, (buffer, written)| {
                if *written {
                    all.writable(buffer)
                } else {
                    all.read_only(buffer)
                }
            });
    let report = host_args
        .dispatch(
            runtime,
            &program,
            &DispatchOptions {
                writeback: Some(&writeback),
                timeout,
                element_sizes: None,
            },
        )
        .map_err(|e| e.to_string())?;
    drop(host_args);
    println!(
        "ran {} on {} ({}) in {:.3} ms",
        args.kernel,
        runtime.agent_name(),
        runtime.library_path().display(),
        report.device_time.as_secs_f64() * 1e3
    );
    for (i, (buffer, written)) in buffers.iter().zip(&writeback).enumerate() {
        if !written {
            continue;
        }
        let path = args.out_dir.join(format!("arg{i}.bin"));
        std::fs::write(&path, buffer)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!(
            "wrote arg{i} ({} bytes) to {}",
            buffer.len(),
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_specs_parse_and_refuse_clearly() {
        assert_eq!(parse_arg("in:a.bin"), Ok(ArgSpec::In("a.bin".into())));
        assert_eq!(parse_arg("inout:/x/y"), Ok(ArgSpec::InOut("/x/y".into())));
        assert_eq!(parse_arg("out:4K"), Ok(ArgSpec::Out(4096)));
        for (bad, needle) in [
            ("a.bin", "not in:PATH"),
            ("out:0", "at least one byte"),
            ("out:lots", "not a byte count"),
            ("both:x", "not an argument kind"),
            ("in:", "names no file"),
        ] {
            let err = parse_arg(bad).unwrap_err();
            assert!(err.contains(needle), "{bad}: {err}");
        }
        assert_eq!(
            parse_variable("scratch-pad-ctrl:4096"),
            Ok(Variable {
                name: "scratch-pad-ctrl".into(),
                size: 4096
            })
        );
        assert!(parse_variable("x:0").is_err());
    }
}
