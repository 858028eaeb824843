//! `triton-npu compile`: ahead-of-time compile of a ttsharedir (Linalg) MLIR kernel.
//!
//! Runs the same pipeline as a first launch (air-opt lowering, aircc) and writes the artifacts
//! to `-o OUTDIR`: `aie.elf` (elf), `aie.xclbin` + `insts.bin` (xclbin) or `aie.pdi` +
//! `insts.bin` (pdi), the AIR module `asm_air_output.mlir`, the transform script air-opt ran
//! `transform.mlir` (plus `auto_transform.mlir`, the generated matmul schedule before
//! expansion, when that was chosen), and under the HSA runtime the packed `kernel.hsaco`. Command-line options beat the environment; the target, when neither
//! `--target` nor `AMD_TRITON_NPU_TARGET` gives it, is detected from the device.

use std::path::{Path, PathBuf};
use std::time::Instant;

use npu_target::xrt_smi::XrtSmiProbe;
use npu_target::{Config, NpuVersion, OutputFormat, RuntimeKind};
use npu_toolchain::{Artifacts, CompileOutput, CompileRequest, Compiler, SearchPaths, Toolchain};

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
    /// npu1 (AIE2: Phoenix, Hawk Point) or npu2 (AIE2P: Strix, Strix Halo, Krackan)
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

/// Like [`run`], searching the Python host's site-packages and triton package for the tools.
pub fn run_for_host(args: &CompileArgs, host: &Host) -> u8 {
    let config = match Config::current() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("triton-npu compile: {e}");
            return 1;
        }
    };
    let search = host
        .python
        .as_ref()
        .map(|p| SearchPaths {
            site_packages: p.site_packages.clone(),
            triton_dir: p.triton_dir.clone(),
        })
        .unwrap_or_default();
    run_with_config(args, config, &search)
}

/// Runs the command with a given configuration (the command-line options are applied on top).
pub fn run_with_config(args: &CompileArgs, mut config: Config, search: &SearchPaths) -> u8 {
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
    match compile(args, &config, search) {
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

/// A finished compile: the toolchain's output plus the packed hsaco.
struct Done {
    output: CompileOutput,
    hsaco: Option<(PathBuf, String)>,
}

fn compile(args: &CompileArgs, config: &Config, search: &SearchPaths) -> Result<Done, String> {
    let target = match config.target {
        Some(t) => t,
        None => {
            let probe = XrtSmiProbe::from_config(config);
            npu_target::target::detect(config, &[&probe])
                .map_err(|e| e.to_string())?
                .target
        }
    };
    let format = OutputFormat::resolve(config.output_format, config.runtime, target)
        .map_err(|e| e.to_string())?;
    let linalg = std::fs::read_to_string(&args.input)
        .map_err(|e| format!("cannot read {}: {e}", args.input.display()))?;
    let module = npu_mlir::Module::parse(&linalg)
        .map_err(|e| format!("cannot read {}: {e}", args.input.display()))?;
    check_kernel_name(&module, &args.kernel, &args.input)?;
    let buffers = module
        .function(&args.kernel)
        .map_or(0, |f| f.buffers().count());
    let toolchain = Toolchain::discover(config, search).map_err(|e| e.to_string())?;
    let output = Compiler::new(&toolchain, config)
        .compile(&CompileRequest {
            kernel: args.kernel.clone(),
            linalg: linalg.clone(),
            grid: args.grid,
            actual_sizes: None,
            target,
            format,
            options: Default::default(),
            out_dir: args.output.clone(),
            debug_tag: None,
        })
        .map_err(|e| e.to_string())?;
    let hsaco = prepare(&output, config.runtime, &args.kernel, buffers, &args.output)?;
    Ok(Done { output, hsaco })
}

/// The input must define the kernel; say which functions it does define otherwise.
fn check_kernel_name(
    module: &npu_mlir::Module<'_>,
    kernel: &str,
    input: &Path,
) -> Result<(), String> {
    if module.function(kernel).is_some_and(|f| f.body().is_some()) {
        return Ok(());
    }
    let found: Vec<&str> = module
        .functions()
        .filter(|f| f.body().is_some())
        .map(|f| f.name())
        .collect();
    Err(format!(
        "{} defines no function @{kernel}; it defines: {}. Pass --kernel with one of them",
        input.display(),
        if found.is_empty() {
            "none".to_owned()
        } else {
            found.join(", ")
        }
    ))
}

/// Runs the runtime's preparation over the outputs, as a launch would (HSA packs
/// `kernel.hsaco`: the same bytes a launch caches); the hsaco and its kernel when it made one.
fn prepare(
    output: &CompileOutput,
    runtime: RuntimeKind,
    kernel: &str,
    buffers: usize,
    out_dir: &Path,
) -> Result<Option<(PathBuf, String)>, String> {
    let name = npu_driver::artifacts::prepare(
        runtime,
        out_dir,
        &output.artifacts,
        output.target,
        kernel,
        buffers,
    )
    .map_err(|e| e.to_string())?;
    let packs_hsaco = npu_runtime::registry::backend(runtime)
        .map_err(|e| e.to_string())?
        .prepared_files()
        .contains(&npu_driver::artifacts::HSACO);
    Ok(packs_hsaco.then(|| (out_dir.join(npu_driver::artifacts::HSACO), name)))
}

fn summary_json(
    args: &CompileArgs,
    config: &Config,
    done: &Done,
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
    if let Some((h, _)) = &done.hsaco {
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
        "hsaco_kernel_name": done.hsaco.as_ref().map(|(_, n)| n),
        "files": files,
        "steps": o.steps,
        "seconds": seconds,
    })
}

fn summary_text(args: &CompileArgs, config: &Config, done: &Done, seconds: f64) -> String {
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
    if let Some((h, name)) = &done.hsaco {
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

    #[test]
    fn kernel_names() {
        let text = "module {\n  func.func @add(%arg0: memref<*xf32> {tt.divisibility = 16 : i32}, %arg1: memref<*xbf16>, %arg2: i32) {\n    return\n  }\n  func.func @other() {\n  }\n  func.func private @decl(i32)\n}";
        let m = &npu_mlir::Module::parse(text).unwrap();
        assert!(check_kernel_name(m, "add", Path::new("k.mlir")).is_ok());
        // A declaration is no kernel.
        assert!(check_kernel_name(m, "decl", Path::new("k.mlir")).is_err());
        let e = check_kernel_name(m, "ad", Path::new("k.mlir")).unwrap_err();
        assert!(
            e.contains("no function @ad") && e.contains("add, other"),
            "{e}"
        );
    }
}
