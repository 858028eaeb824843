//! `triton-npu transform`: the transform library and the scripts air-opt gets.
//!
//! * `transform list [--doc] [--json]`: every named sequence of triton-npu's transform
//!   library, one line each with its signature (and file).
//! * `transform expand SCRIPT [--target npu1|npu2]`: the script with its library references
//!   resolved (includes inlined, `foreach_match` targets inserted), exactly as air-opt gets it;
//!   exit 2 when it cannot be expanded (unknown sequence, recursion, bad nesting), with the
//!   file and line.
//! * `transform expand --kernel KERNEL.mlir --target npu1|npu2`: the script a compile of that
//!   kernel (triton-shared's Linalg) would use: `AIR_TRANSFORM_TILING_SCRIPT` when set, else
//!   the automatic matmul schedule or the default elementwise schedule.

use std::io::Write;
use std::path::PathBuf;

use npu_target::{Config, NpuVersion};
use npu_transform::{Library, schedule};

#[derive(Debug, clap::Args)]
pub struct TransformArgs {
    #[command(subcommand)]
    command: TransformCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TransformCommand {
    /// List the transform library's named sequences, one line each with its signature.
    List(ListArgs),
    /// Print the script air-opt gets: SCRIPT with its transform.include calls expanded, or the
    /// schedule chosen for a kernel (--kernel).
    Expand(ExpandArgs),
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    /// Also print what each sequence does and when to use it.
    #[arg(long)]
    doc: bool,
    /// Print one JSON array instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ExpandArgs {
    /// A transform-dialect script (e.g. an upstream example's transform_aie2p.mlir).
    #[arg(value_name = "SCRIPT", required_unless_present = "kernel")]
    script: Option<PathBuf>,
    /// npu1 or npu2: warns about sequences written for the other NPU; with --kernel, picks
    /// the schedule [default: AMD_TRITON_NPU_TARGET].
    #[arg(long, value_name = "npu1|npu2", value_parser = parse_target)]
    target: Option<NpuVersion>,
    /// Instead of SCRIPT: a kernel's Linalg (ttsharedir); prints the script its compile uses.
    #[arg(long, value_name = "KERNEL.mlir", conflicts_with = "script")]
    kernel: Option<PathBuf>,
}

fn parse_target(s: &str) -> Result<NpuVersion, String> {
    NpuVersion::parse(s).ok_or_else(|| format!("expected npu1 or npu2, got {s:?}"))
}

pub fn run(args: &TransformArgs) -> u8 {
    match &args.command {
        TransformCommand::List(a) => list(a),
        TransformCommand::Expand(a) => match expand(a) {
            Ok(text) => {
                let mut out = std::io::stdout().lock();
                // A closed pipe (`| head`) is not an error worth reporting.
                let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
                0
            }
            Err(e) => {
                eprintln!("triton-npu transform expand: {e}");
                2
            }
        },
    }
}

fn list(args: &ListArgs) -> u8 {
    let library = match Library::get() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("triton-npu transform list: {e}");
            return 1;
        }
    };
    let entries = library.entries();
    if args.json {
        let items: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "name": e.name,
                    "signature": e.signature,
                    "file": e.file,
                    "doc": e.doc,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(items));
        return 0;
    }
    let width = entries.iter().map(|e| e.signature.len()).max().unwrap_or(0);
    for e in &entries {
        println!("{:<width$}  [{}]", e.signature, e.file);
        if args.doc {
            println!("    {}\n", e.doc);
        }
    }
    0
}

fn expand(args: &ExpandArgs) -> Result<String, String> {
    let config = Config::current().map_err(|e| e.to_string())?;
    let target = args.target.or(config.target);
    if let Some(path) = &args.script {
        let text = schedule::read_user_script(path).map_err(|e| e.to_string())?;
        let expansion = npu_transform::expand(&text, &path.display().to_string(), target)
            .map_err(|e| e.to_string())?;
        for w in &expansion.warnings {
            eprintln!("triton-npu transform expand: warning: {w}");
        }
        return Ok(expansion.text);
    }
    let Some(kernel) = &args.kernel else {
        return Err("give a SCRIPT or --kernel KERNEL.mlir".into());
    };
    let Some(target) = target else {
        return Err(
            "the schedule depends on the target: pass --target npu1|npu2 (or set \
             AMD_TRITON_NPU_TARGET)"
                .into(),
        );
    };
    let linalg = std::fs::read_to_string(kernel)
        .map_err(|e| format!("cannot read {}: {e}", kernel.display()))?;
    let summary = npu_transform::kernel::summarize(&linalg);
    let chosen = schedule::choose(config.transform_tiling_script.as_deref(), &summary, target)
        .map_err(|e| e.to_string())?;
    eprintln!(
        "triton-npu transform expand: {} for {} on {target}",
        chosen.kind.describe(),
        kernel.display()
    );
    for w in &chosen.expansion.warnings {
        eprintln!("triton-npu transform expand: warning: {w}");
    }
    Ok(chosen.expansion.text)
}
