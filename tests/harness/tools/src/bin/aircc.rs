//! Stand-in `aircc` (tests only).
//!
//! Checks its command line as the C++ aircc does (LLVM `cl` parsing, the option set of
//! mlir-air's `tools/aircc/aircc.cpp`, the same error texts and exit status 1), follows the
//! same order of side effects (work directory first, then the elf/npu1 check, then the input),
//! and writes, instead of compiled code, structurally valid artifacts carrying the kernel's
//! harness program:
//!
//! * `--output-format elf`: the full ELF at `--elf-name` (default `aie.elf`) and
//!   `<tmpdir>/full_elf_config.json` (kernel `main`, instance `sequence`);
//! * `xclbin`: the xclbin at `-o` (default `aie.xclbin`) and the instruction stream at `-i`
//!   (default: the xclbin name with `.xclbin` replaced by `.insts.bin`);
//! * `pdi`: the PDI at `--pdi-name` (default `aie.pdi`) and the instruction stream at `-i`;
//! * `txn`: a placeholder `-o` (default `aie.txn.mlir`) and the instruction stream;
//! * `none`: nothing but the intermediates.
//!
//! A module whose launches each carry their own kernel meaning (triton-npu's stitched chains)
//! compiles to one program that runs them in order over the function's buffers (see
//! `npu_harness_tools::chain`); a symbol defined twice is refused as MLIR's parser does.
//!
//! Relative output names resolve against the working directory, not `--tmpdir`, as with the
//! real tool. The stand-in does not look for aiecc on PATH (there is none to run).

use std::path::{Path, PathBuf};

use npu_harness_program::Op;
use npu_harness_tools::artifacts;
use npu_harness_tools::attrs::Meaning;
use npu_harness_tools::chain;
use npu_harness_tools::cli::{self, Parsed, flag, list, optional, value};
use npu_harness_tools::harness;
use npu_harness_tools::{launch, placement};

const TOOL: &str = "aircc";

const DEVICES: &[&str] = &[
    "npu1",
    "npu1_1col",
    "npu1_2col",
    "npu1_3col",
    "npu2",
    "npu2_1col",
    "npu2_2col",
    "npu2_3col",
    "npu2_4col",
    "npu2_5col",
    "npu2_6col",
    "npu2_7col",
];

fn specs() -> Vec<cli::Spec> {
    vec![
        value("o"),
        value("i"),
        value("tmpdir"),
        flag("verbose"),
        flag("v"),
        value("row-offset"),
        value("col-offset"),
        value("num-rows"),
        value("num-cols"),
        value("trace-size"),
        value("trace-offset"),
        value("cc"),
        value("sysroot"),
        value("host-target"),
        flag("shared"),
        flag("xbridge"),
        flag("no-xbridge"),
        flag("xchesscc"),
        flag("no-xchesscc"),
        value("peano"),
        value("device"),
        value("target"),
        value("gpu-arch"),
        value("gpu-runtime"),
        flag("omit-while-true-loop"),
        optional("omit-ping-pong-transform"),
        value("lower-linalg-to-func"),
        flag("derive-library-call"),
        flag("air-loop-fusion"),
        list("air-runtime-loop-tiling-sizes"),
        flag("omit-auto-broadcast"),
        list("air-channel-multiplexing"),
        flag("use-lock-race-condition-fix"),
        flag("use-lock-race-condition-fix-v2"),
        flag("coalesce-shim-dma"),
        value("placed-ir-verifiers"),
        value("output-format"),
        flag("emit-txn-cpp"),
        value("xclbin-kernel-name"),
        value("xclbin-instance-name"),
        value("xclbin-kernel-id"),
        value("xclbin-input"),
        value("elf-name"),
        value("pdi-name"),
        flag("debug-ir"),
        flag("bf16-emulation"),
        value("stack-size"),
        flag("version"),
        flag("help"),
    ]
}

fn main() {
    let argv = harness::start(TOOL);
    let args = cli::parse(TOOL, &argv[0], &argv[1..], &specs(), 1..=1).unwrap_or_else(|e| {
        // `--version`/`--help` need no input.
        if argv.iter().any(|a| a == "--version" || a == "-version") {
            print!("{}", harness::version_banner(TOOL));
            std::process::exit(0);
        }
        harness::fail(&e)
    });
    if args.flag("version") {
        print!("{}", harness::version_banner(TOOL));
        return;
    }
    validate(&args);
    let format = args.value("output-format").unwrap_or("xclbin");
    let device = args.value("device").unwrap_or("xcvc1902");
    let verbose = args.flag("verbose") || args.flag("v");

    // 1. The work directory, one level, before anything else.
    let tmpdir = PathBuf::from(args.value("tmpdir").unwrap_or("air_project"));
    if let Err(e) = std::fs::create_dir(&tmpdir)
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        harness::fail(&format!(
            "Error creating directory {}: {}",
            tmpdir.display(),
            harness::os_message(&e)
        ));
    }
    // 2. elf is npu2-only.
    if format == "elf" && device.contains("npu1") {
        harness::fail(&format!(
            "Error: --output-format=elf is not supported for --device={device}. Use \
             --output-format=xclbin (default) or --output-format=pdi for npu1."
        ));
    }
    // 3. The input.
    let input = &args.positionals[0];
    let module = harness::read_input(input)
        .unwrap_or_else(|e| harness::fail(&format!("Error reading file {input}: {e}")));
    if !DEVICES.contains(&device) {
        harness::fail(&format!(
            "{input}:1:1: error: 'func.func' op Invalid aie.device option\nError: pass pipeline \
             failed: builtin.module(air-opt-memtile-dma-bds{{device={device}}})"
        ));
    }
    if let Some(name) = chain::duplicate_symbol(&module) {
        harness::fail(&format!(
            "{input}: error: redefinition of symbol named '{name}'\nError: failed to parse {input}"
        ));
    }
    if verbose {
        println!("compiling {input} for {device}");
    }
    // The herds go on the array before anything is written (air-place-herds, then the AIE
    // dialect's tile check; see npu_harness_tools::placement).
    let mut meaning = chain::meaning(&module);
    let int = |opt: &str| args.value(opt).and_then(|v| v.parse::<i64>().ok());
    let array = placement::array(device, int("num-cols"), int("num-rows"), int("row-offset"));
    if let Err(e) = placement::place(&herd_shapes(&module, &meaning), &array) {
        // Diagnostics carry the input's location, as MLIR prints them.
        let located: Vec<String> = e
            .lines()
            .map(|l| match l.strip_prefix("error: ") {
                Some(rest) => format!("{input}:0:0: error: {rest}"),
                None => l.to_owned(),
            })
            .collect();
        harness::fail(&format!(
            "{}\nError: pass pipeline failed: air-place-herds{{num-rows={} num-cols={} \
             row-anchor={}}}",
            located.join("\n"),
            array.rows,
            array.cols,
            array.row_anchor
        ));
    }
    // xclbin and pdi hold one device configuration, and air-to-aie makes each launch its own
    // aie.device: aiecc writes every device's xclbin/PDI and instructions to the one name
    // aircc passes it (mlir-air tools/aircc/aircc.cpp, `--xclbin-name=`/`--pdi-name=` and
    // `--npu-insts-name=`; mlir-aie aiecc `process_xclbin_gen`, one xclbin per device), so
    // all but one launch would be lost. Only the full ELF sequences several devices.
    let launches = chain::launch_count(&module);
    if matches!(format, "xclbin" | "pdi") && launches > 1 {
        harness::fail(&format!(
            "{input}: error: {launches} air.launch operations lower to {launches} aie.device \
             operations, but --output-format={format} holds one device's configuration and \
             instruction stream (every device would be written to the same {format} and \
             insts.bin); use --output-format=elf (npu2), which loads each device in turn, or \
             compile each launch on its own\nError running command: aiecc"
        ));
    }
    // The intermediates aircc saves.
    let base = Path::new(input)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "stdin.mlir".into());
    for stage in ["placed", "aie", "npu"] {
        let text = format!("// npu-harness aircc: {stage} stage of {input} for {device}\n{module}");
        write(&tmpdir.join(format!("{stage}.{base}")), text.as_bytes());
    }
    // 4. What aiecc would check: the Peano directory.
    check_peano(&args);

    // 5. The artifacts.
    // `--bf16-emulation` changes what the device multiplies (f32 dot inputs become bf16).
    if let Meaning::Program(p) = &mut meaning {
        p.bf16_emulation = args.flag("bf16-emulation");
    }
    let code = artifacts::kernel_code(&meaning);
    let pdi = artifacts::pdi(&code);
    let xclbin_name = args.value("o").unwrap_or("aie.xclbin").to_owned();
    let insts_name = match args.value("i") {
        Some(i) => i.to_owned(),
        None => match xclbin_name.strip_suffix(".xclbin") {
            Some(stem) => format!("{stem}.insts.bin"),
            None => xclbin_name.clone(),
        },
    };
    match format {
        "elf" => {
            let elf = artifacts::full_elf(&code, meaning.num_args(), &pdi);
            write(Path::new(args.value("elf-name").unwrap_or("aie.elf")), &elf);
            write_full_elf_config(&tmpdir, &meaning, &code, &pdi);
        }
        "xclbin" => {
            let x = artifacts::xclbin(&pdi, meaning.num_args(), artifacts::fingerprint(&code));
            write(Path::new(&xclbin_name), &x);
            write(Path::new(&insts_name), &code);
        }
        "pdi" => {
            write(Path::new(args.value("pdi-name").unwrap_or("aie.pdi")), &pdi);
            write(Path::new(&insts_name), &code);
        }
        "txn" => {
            let txn =
                format!("// npu-harness aircc: transaction stream of {input}\nmodule {{\n}}\n");
            write(
                Path::new(args.value("o").unwrap_or("aie.txn.mlir")),
                txn.as_bytes(),
            );
            write(Path::new(&insts_name), &code);
        }
        _ => {} // none
    }
    if let Meaning::NotComputable { reason, .. } = &meaning
        && verbose
    {
        println!("note: the kernel is not computable by the harness devices: {reason}");
    }
}

/// The herds of the kernel (`[columns, rows]`): those air-opt recorded on the module and those
/// of each launch's program (a chain's kernels each bring theirs).
fn herd_shapes(module: &str, meaning: &Meaning) -> Vec<[u64; 2]> {
    let mut shapes: Vec<[u64; 2]> = launch::herds(module)
        .unwrap_or_default()
        .iter()
        .map(|h| h.size)
        .collect();
    if let Meaning::Program(p) = meaning {
        for op in &p.ops {
            if let Op::Tiling { herd, .. } = op {
                shapes.push([u64::from(herd[0]), u64::from(herd[1])]);
            }
        }
    }
    shapes
}

/// LLVM-level value checks, before any side effect (cl rejects these while parsing).
fn validate(args: &Parsed) {
    if let Some(f) = args.value("output-format")
        && !["xclbin", "txn", "elf", "pdi", "none"].contains(&f)
    {
        harness::fail(&format!(
            "{TOOL}: for the --output-format option: Cannot find option named '{f}'!"
        ));
    }
    if let Some(t) = args.value("target") {
        if !["aie", "gpu"].contains(&t) {
            harness::fail(&format!(
                "{TOOL}: for the --target option: Cannot find option named '{t}'!"
            ));
        }
        if t == "gpu" {
            harness::fail("Error: could not find air-opt in PATH");
        }
    }
    if let Some(v) = args.value("placed-ir-verifiers")
        && !["off", "warn", "error"].contains(&v)
    {
        harness::fail(&format!(
            "{TOOL}: for the --placed-ir-verifiers option: Cannot find option named '{v}'!"
        ));
    }
    for opt in ["stack-size", "trace-size", "trace-offset"] {
        if let Some(v) = args.value(opt) {
            cli::unsigned(TOOL, opt, v).unwrap_or_else(|e| harness::fail(&e));
        }
    }
    for v in args.values("air-runtime-loop-tiling-sizes") {
        cli::unsigned(TOOL, "air-runtime-loop-tiling-sizes", v)
            .unwrap_or_else(|e| harness::fail(&e));
    }
    for opt in ["row-offset", "col-offset", "num-rows", "num-cols"] {
        if let Some(v) = args.value(opt)
            && v.parse::<i64>().is_err()
        {
            harness::fail(&format!(
                "{TOOL}: for the --{opt} option: '{v}' value invalid for integer argument!"
            ));
        }
    }
}

/// aiecc refuses an explicit `--peano` directory that does not exist, and fails when the
/// directory has no `bin/llc`.
fn check_peano(args: &Parsed) {
    let Some(dir) = args.value("peano").filter(|d| !d.is_empty()) else {
        return;
    };
    let root = Path::new(dir);
    if !root.is_dir() {
        harness::fail(&format!(
            "aiecc: --peano directory does not exist: {dir}\nError running command: aiecc"
        ));
    }
    if !root.join("bin").join("llc").is_file() {
        harness::fail(
            "aiecc: ShellCommand: tool 'llc' not found in search paths or PATH\naiecc: edge \
             'core_0_2.elf' failed\naiecc: pipeline failed\nError running command: aiecc",
        );
    }
}

fn write(path: &Path, bytes: &[u8]) {
    if let Err(e) = std::fs::write(path, bytes) {
        harness::fail(&format!(
            "aiecc: cannot write {}: {}\nError running command: aiecc",
            path.display(),
            harness::os_message(&e)
        ));
    }
}

/// aiecc's `full_elf_config.json`, in the work directory.
fn write_full_elf_config(tmpdir: &Path, meaning: &Meaning, code: &[u8], pdi: &[u8]) {
    let abs = std::path::absolute(tmpdir).unwrap_or_else(|_| tmpdir.to_path_buf());
    let pdi_file = abs.join("main.pdi");
    let ctrl_file = abs.join(format!("insts_main_{}.bin", artifacts::INSTANCE));
    write(&pdi_file, pdi);
    write(&ctrl_file, code);
    let arguments: Vec<serde_json::Value> = (0..meaning.num_args().max(3))
        .map(|i| {
            serde_json::json!({"name": format!("arg_{i}"), "type": "char *", "offset": format!("0x{:x}", 8 * u32::from(i))})
        })
        .collect();
    let config = serde_json::json!({
        "xrt-kernels": [{
            "name": "main",
            "arguments": arguments,
            "PDIs": [{"id": 0, "PDI_file": pdi_file.display().to_string()}],
            "instance": [{
                "id": artifacts::INSTANCE,
                "TXN_ctrl_code_file": ctrl_file.display().to_string(),
            }],
        }]
    });
    let text = serde_json::to_string_pretty(&config).unwrap_or_default();
    write(&tmpdir.join("full_elf_config.json"), text.as_bytes());
}
