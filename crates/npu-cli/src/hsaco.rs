//! `triton-npu hsaco pack|dump|check`: the native replacement for mlir-aie's `aie-hsaco` and
//! `aie-hsaco-dump`, plus ROCr's loader rules as a command.
//!
//! `pack` takes the reference packer's arguments: `--hsaco PATH --arch ARCH` and kernels given
//! as `--kernel SPEC` colon specs or as `--kernel-name/--kernel-elf` option groups, in one
//! ordered stream (see [`npu_hsaco::spec`]). Errors print one line on stderr: exit status 2 for
//! a command line that does not follow the grammar, 1 for inputs that cannot be packed. `pack`
//! refuses everything `check` refuses for the architecture's widest agent.
//!
//! `check` prints one line per kernel and a `RESULT:` line: ROCr's status when ROCr refuses the
//! file, "no status: ROCr crashes or throws on this file" when it crashes instead, and
//! "refused here, ROCr accepts it: …, because …" for the files this tool refuses although ROCr
//! loads them.

use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, ArgMatches, Command, FromArgMatches};
use npu_hsaco::spec::{KernelOption, sources_from_options};
use npu_hsaco::{Arch, Error, check_bytes, dump, parse};

/// `triton-npu hsaco`.
#[derive(Debug, clap::Args)]
pub struct HsacoArgs {
    #[command(subcommand)]
    pub command: HsacoCommand,
}

/// The hsaco subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum HsacoCommand {
    /// Pack kernels into an AIE hsaco (created if missing; other architectures are kept).
    Pack(PackArgs),
    /// Print the AIE sections exactly as the reference dumper (aie-hsaco-dump) does.
    Dump(DumpArgs),
    /// Exit 0 iff ROCr would load the file on an agent of ARCH with N columns (a few files ROCr
    /// loads are refused on purpose; the report says which and why).
    Check(CheckArgs),
}

/// `triton-npu hsaco pack`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Kernel specs (repeatable, in table order):\n  \
    --kernel NAME:INSTS:PDI:KERNARG_SIZE:NUM_COLS\n  \
    --kernel xclbin:NAME:XCLBIN:INSTS:KERNARG_SIZE[:NUM_COLS]\n  \
    --kernel elf:PATH[:KERNARG_SIZE[:NUM_COLS]]\n\
    or groups without delimiters (names and paths may contain ':' and spaces):\n  \
    --kernel-name NAME --kernel-insts PATH (--kernel-pdi PATH | --kernel-xclbin PATH) \
    [--kernel-kernarg N] [--kernel-cols N]\n  \
    --kernel-elf PATH [--kernel-kernarg N] [--kernel-cols N]")]
pub struct PackArgs {
    /// The hsaco to create or update.
    #[arg(long, value_name = "PATH")]
    pub hsaco: PathBuf,
    /// The architecture (section name): aie2 (npu1) or aie2p (npu2).
    #[arg(long, value_name = "ARCH", value_parser = parse_arch)]
    pub arch: Arch,
    #[command(flatten)]
    pub kernels: KernelOptions,
}

/// `triton-npu hsaco dump`.
#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    /// The hsaco to describe.
    #[arg(long, value_name = "FILE")]
    pub hsaco: PathBuf,
}

/// `triton-npu hsaco check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The hsaco to check.
    #[arg(long, value_name = "FILE")]
    pub hsaco: PathBuf,
    /// The agent's architecture: aie2 (npu1) or aie2p (npu2).
    #[arg(long, value_name = "ARCH", value_parser = parse_arch)]
    pub arch: Arch,
    /// The agent's column count [default: 4 for aie2, 8 for aie2p].
    #[arg(long, value_name = "N")]
    pub cols: Option<u32>,
}

fn parse_arch(s: &str) -> Result<Arch, String> {
    s.parse()
}

/// The kernel options in command-line order (clap keeps each option's values separately, so
/// the order is rebuilt from their argument indices).
#[derive(Debug, Clone, Default)]
pub struct KernelOptions(pub Vec<KernelOption>);

const KERNEL_ARGS: [(&str, &str, &str); 8] = [
    (
        "kernel",
        "SPEC",
        "A kernel as a colon spec (repeatable; see below)",
    ),
    (
        "kernel-name",
        "NAME",
        "Start a PdiInsts kernel group with this name",
    ),
    (
        "kernel-elf",
        "PATH",
        "Start a group packing every kernel of this AIE full ELF",
    ),
    (
        "kernel-insts",
        "PATH",
        "The group's instruction stream (insts.bin)",
    ),
    ("kernel-pdi", "PATH", "The group's PDI"),
    (
        "kernel-xclbin",
        "PATH",
        "The group's xclbin (its AIE_PARTITION gives the PDI and the width)",
    ),
    (
        "kernel-kernarg",
        "N",
        "The group's kernarg size in bytes (16 per buffer argument)",
    ),
    ("kernel-cols", "N", "The group's partition width in columns"),
];

fn option(id: &str, value: String) -> KernelOption {
    match id {
        "kernel" => KernelOption::Spec(value),
        "kernel-name" => KernelOption::Name(value),
        "kernel-elf" => KernelOption::Elf(value),
        "kernel-insts" => KernelOption::Insts(value),
        "kernel-pdi" => KernelOption::Pdi(value),
        "kernel-xclbin" => KernelOption::Xclbin(value),
        "kernel-kernarg" => KernelOption::Kernarg(value),
        _ => KernelOption::Cols(value),
    }
}

impl FromArgMatches for KernelOptions {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut indexed = Vec::new();
        for (id, _, _) in KERNEL_ARGS {
            let (Some(values), Some(indices)) =
                (matches.get_many::<String>(id), matches.indices_of(id))
            else {
                continue;
            };
            for (value, index) in values.zip(indices) {
                indexed.push((index, option(id, value.clone())));
            }
        }
        indexed.sort_by_key(|(index, _)| *index);
        Ok(KernelOptions(indexed.into_iter().map(|(_, o)| o).collect()))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = KernelOptions::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for KernelOptions {
    fn augment_args(mut cmd: Command) -> Command {
        for (id, value_name, help) in KERNEL_ARGS {
            cmd = cmd.arg(
                Arg::new(id)
                    .long(id)
                    .value_name(value_name)
                    .help(help)
                    .action(ArgAction::Append)
                    .allow_hyphen_values(true),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        KernelOptions::augment_args(cmd)
    }
}

/// Runs `triton-npu hsaco ...` and returns the exit code.
pub fn run(args: &HsacoArgs) -> u8 {
    match &args.command {
        HsacoCommand::Pack(a) => run_pack(a),
        HsacoCommand::Dump(a) => run_dump(a),
        HsacoCommand::Check(a) => run_check(a),
    }
}

fn fail(command: &str, message: impl std::fmt::Display, code: u8) -> u8 {
    // One line: a message with embedded newlines (e.g. from a file name) stays on one line.
    let line = message.to_string().replace('\n', "\\n");
    eprintln!("triton-npu hsaco {command}: error: {line}");
    code
}

fn run_pack(args: &PackArgs) -> u8 {
    let sources = match sources_from_options(&args.kernels.0) {
        Ok(s) => s,
        Err(e) => return fail("pack", e, 2),
    };
    match npu_hsaco::pack::pack_file(&args.hsaco, args.arch, &sources) {
        Ok(outcome) => {
            for (name, variables) in &outcome.kernels {
                for v in variables {
                    println!(
                        "kernel '{name}' needs external variable '{}' ({} bytes): define it before loading",
                        v.name, v.size
                    );
                }
            }
            0
        }
        Err(e) => fail("pack", refusal_text(&e, &args.hsaco), 1),
    }
}

/// The message for a refused pack, noting that the output was left as it was.
fn refusal_text(e: &Error, hsaco: &Path) -> String {
    format!("{e} ({} was not written)", hsaco.display())
}

fn read_file(command: &str, path: &Path) -> Result<Vec<u8>, u8> {
    std::fs::read(path).map_err(|e| fail(command, format!("{}: {e}", path.display()), 1))
}

fn run_dump(args: &DumpArgs) -> u8 {
    let bytes = match read_file("dump", &args.hsaco) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let hsaco = match parse(&bytes) {
        Ok(h) => h,
        Err(e) => return fail("dump", format!("{}: {e}", args.hsaco.display()), 1),
    };
    let d = dump(&hsaco);
    print!("{}", d.stdout);
    for e in &d.errors {
        let text = if e.starts_with("no aie2/aie2p") {
            format!("{}: {e}", args.hsaco.display())
        } else {
            e.clone()
        };
        fail("dump", text, 1);
    }
    d.exit_code()
}

fn run_check(args: &CheckArgs) -> u8 {
    let bytes = match read_file("check", &args.hsaco) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let cols = args
        .cols
        .unwrap_or_else(|| args.arch.default_agent_columns());
    let report = check_bytes(&bytes, args.arch, cols);
    print!("{report}");
    match &report.verdict {
        Ok(_) => 0,
        Err(rejection) => fail("check", format!("{}: {rejection}", args.hsaco.display()), 1),
    }
}
