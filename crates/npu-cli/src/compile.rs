//! `triton-npu compile`: ahead-of-time compile of a ttsharedir (Linalg) MLIR kernel.
//!
//! Runs the build pipeline of a first launch (`npu_driver::Pipeline`: the same target
//! detection, format rules, toolchain and runtime preparation) and writes the artifacts to
//! `-o OUTDIR`: `aie.elf` (elf), `aie.xclbin` + `insts.bin` (xclbin) or `aie.pdi` + `insts.bin`
//! (pdi), the AIR module `asm_air_output.mlir`, the transform script air-opt ran
//! `transform.mlir` (plus `auto_transform.mlir`, the generated matmul schedule before
//! expansion, when that was chosen), and what the runtime's preparation adds (HSA: the packed
//! `kernel.hsaco`). Command-line options beat the environment; the target, when neither
//! `--target` nor `AMD_TRITON_NPU_TARGET` gives it, is detected from the device as a launch
//! detects it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use npu_driver::{DriverError, Kernel, KernelBuild, Pipeline};
use npu_target::{Config, NpuVersion, OutputFormat, RuntimeKind};
use npu_toolchain::Artifacts;

use crate::Host;

#[derive(Debug, Clone, clap::Args)]
pub struct CompileArgs {
    /// The kernel's Linalg MLIR (triton-shared's output; Triton's ttsharedir stage).
    #[arg(value_name = "INPUT.mlir")]
    pub input: PathBuf,
    /// The kernel (func.func) name.
    #[arg(long, value_name = "NAME")]
    pub kernel: String,
    /// The launch grid: X[,Y[,Z]] (missing sizes are 1).
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_grid)]
    pub grid: [u32; 3],
    /// npu1 (AIE2: Phoenix, Hawk Point) or npu2 (AIE2P: Strix, Strix Halo, Krackan, Gorgon Point)
    /// [default: AMD_TRITON_NPU_TARGET, else the detected device].
    #[arg(long, value_name = "npu1|npu2", value_parser = parse_target)]
    pub target: Option<NpuVersion>,
    /// The runtime the artifacts are for; hsa also packs kernel.hsaco
    /// [default: AMD_TRITON_NPU_RUNTIME, else xrt].
    #[arg(long, value_name = "hsa|xrt", value_parser = parse_runtime)]
    pub runtime: Option<RuntimeKind>,
    /// aircc's output format [default: AMD_TRITON_NPU_OUTPUT_FORMAT, else elf on npu2 and
    /// xclbin on npu1].
    #[arg(long, value_name = "elf|xclbin|pdi", value_parser = parse_format)]
    pub format: Option<OutputFormat>,
    /// A transform-dialect tiling script [default: AIR_TRANSFORM_TILING_SCRIPT, else the
    /// automatic matmul schedule for a plain matmul, else the default elementwise schedule].
    #[arg(long, value_name = "FILE")]
    pub transform_script: Option<PathBuf>,
    /// Where to write the artifacts (created if missing).
    #[arg(short = 'o', long = "output", value_name = "OUTDIR")]
    pub output: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_grid(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("expected X, X,Y or X,Y,Z, got {s:?}"));
    }
    let mut grid = [1u32; 3];
    for (slot, part) in grid.iter_mut().zip(&parts) {
        *slot = part
            .parse()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| format!("grid sizes are whole numbers ≥ 1, got {part:?}"))?;
    }
    Ok(grid)
}

fn parse_target(s: &str) -> Result<NpuVersion, String> {
    NpuVersion::parse(s).ok_or_else(|| format!("expected npu1 or npu2, got {s:?}"))
}

fn parse_runtime(s: &str) -> Result<RuntimeKind, String> {
    RuntimeKind::parse(s).ok_or_else(|| format!("expected hsa or xrt, got {s:?}"))
}

fn parse_format(s: &str) -> Result<OutputFormat, String> {
    OutputFormat::parse(s).ok_or_else(|| format!("expected elf, xclbin or pdi, got {s:?}"))
}

/// Runs `triton-npu compile` with this process's configuration.
pub fn run(args: &CompileArgs) -> u8 {
    run_for_host(args, &Host::standalone())
}

/// Like [`run`], with the facts of the Python installation that runs the command (where its
/// tools, ROCr and XRT shim may be).
pub fn run_for_host(args: &CompileArgs, host: &Host) -> u8 {
    let config = match Config::current() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("triton-npu compile: {e}");
            return 1;
        }
    };
    run_with_config(args, config, &host.driver_host())
}

/// Runs the command with a given configuration (the command-line options are applied on top).
pub fn run_with_config(args: &CompileArgs, mut config: Config, host: &npu_driver::Host) -> u8 {
    let started = Instant::now();
    if let Some(t) = args.target {
        config.target = Some(t);
    }
    if let Some(r) = args.runtime {
        config.runtime = r;
    }
    if let Some(f) = args.format {
        config.output_format = Some(f);
    }
    if let Some(s) = &args.transform_script {
        config.transform_tiling_script = Some(s.clone());
    }
    match compile(args, &config, host) {
        Ok(done) => {
            let seconds = started.elapsed().as_secs_f64();
            if args.json {
                println!("{}", summary_json(args, &config, &done, seconds));
            } else {
                print!("{}", summary_text(args, &config, &done, seconds));
            }
            0
        }
        Err(e) => {
            eprintln!("triton-npu compile: {e}");
            1
        }
    }
}

fn compile(
    args: &CompileArgs,
    config: &Config,
    host: &npu_driver::Host,
) -> Result<KernelBuild, String> {
    let pipeline = Pipeline::new(config, host).map_err(|e| e.to_string())?;
    let linalg = std::fs::read_to_string(&args.input)
        .map_err(|e| format!("cannot read {}: {e}", args.input.display()))?;
    let kernel =
        Kernel::read_named(&args.kernel, linalg, args.grid, None).map_err(|e| match e {
            DriverError::UnknownKernel { .. } => {
                format!(
                    "{}: {e}. Pass --kernel with one of them",
                    args.input.display()
                )
            }
            e => format!("cannot read {}: {e}", args.input.display()),
        })?;
    pipeline
        .build_kernel(&kernel, &args.output)
        .map_err(|e| e.to_string())
}

/// The hsaco the runtime's preparation packed, with its kernel, when it packed one.
fn hsaco(done: &KernelBuild) -> Option<(&Path, &str)> {
    done.prepared
        .iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n == npu_driver::artifacts::HSACO)
        })
        .map(|p| (p.as_path(), done.symbol.as_str()))
}

fn summary_json(
    args: &CompileArgs,
    config: &Config,
    done: &KernelBuild,
    seconds: f64,
) -> serde_json::Value {
    let o = &done.output;
    let mut files = serde_json::Map::new();
    let (dispatch, list): (Option<&str>, Vec<(&str, &Path)>) = match &o.artifacts {
        Artifacts::Elf { elf, kernel_name } => (Some(kernel_name), vec![("elf", elf)]),
        Artifacts::Xclbin { xclbin, insts } => (None, vec![("xclbin", xclbin), ("insts", insts)]),
        Artifacts::Pdi { pdi, insts } => (None, vec![("pdi", pdi), ("insts", insts)]),
    };
    for (k, p) in list {
        files.insert(k.into(), p.display().to_string().into());
    }
    files.insert("air_mlir".into(), o.air_mlir.display().to_string().into());
    files.insert(
        "transform_mlir".into(),
        o.transform_mlir.display().to_string().into(),
    );
    if let Some(auto) = &o.auto_transform_mlir {
        files.insert(
            "auto_transform_mlir".into(),
            auto.display().to_string().into(),
        );
    }
    if let Some((h, _)) = hsaco(done) {
        files.insert("hsaco".into(), h.display().to_string().into());
    }
    serde_json::json!({
        "kernel": args.kernel,
        "target": o.target,
        "format": o.format,
        "runtime": config.runtime,
        "grid": args.grid,
        "bf16_emulation": o.bf16_emulation,
        "schedule": o.schedule,
        "elf_kernel_name": dispatch,
        "hsaco_kernel_name": hsaco(done).map(|(_, n)| n),
        "files": files,
        "steps": o.steps,
        "seconds": seconds,
    })
}

fn summary_text(args: &CompileArgs, config: &Config, done: &KernelBuild, seconds: f64) -> String {
    let o = &done.output;
    let mut s = format!(
        "compiled {} for {} ({}, runtime {}) in {seconds:.2} s\n",
        args.kernel, o.target, o.format, config.runtime
    );
    for p in o.artifacts.files() {
        s.push_str(&format!("  {}\n", p.display()));
    }
    if let Artifacts::Elf { kernel_name, .. } = &o.artifacts {
        s.push_str(&format!("  kernel to dispatch: {kernel_name}\n"));
    }
    s.push_str(&format!("  {}\n", o.air_mlir.display()));
    s.push_str(&format!(
        "  {} ({})\n",
        o.transform_mlir.display(),
        o.schedule
    ));
    if let Some(auto) = &o.auto_transform_mlir {
        s.push_str(&format!("  {}\n", auto.display()));
    }
    if let Some((h, name)) = hsaco(done) {
        s.push_str(&format!("  {} (kernel {name})\n", h.display()));
    }
    let steps: Vec<String> = o
        .steps
        .iter()
        .map(|t| format!("{} {:.2} s", t.step, t.seconds))
        .collect();
    s.push_str(&format!("  steps: {}\n", steps.join(", ")));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids() {
        assert_eq!(parse_grid("4").unwrap(), [4, 1, 1]);
        assert_eq!(parse_grid("4, 2").unwrap(), [4, 2, 1]);
        assert_eq!(parse_grid("1,2,3").unwrap(), [1, 2, 3]);
        assert!(parse_grid("0,1,1").unwrap_err().contains("≥ 1"));
        assert!(parse_grid("1,2,3,4").is_err());
        assert!(parse_grid("x").is_err());
    }
}
