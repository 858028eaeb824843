//! aircc's command line (upstream's, argument for argument) and what it leaves behind.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use npu_target::{NpuVersion, OutputFormat};

/// Options of upstream's `_aircc_compile` beyond format and target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AirccOptions {
    /// One `--air-runtime-loop-tiling-sizes=<n>` per entry, in order. Upstream passes `[4, 4]`
    /// (aircc's own default became empty in mlir-air #1470); empty passes none.
    pub runtime_loop_tiling_sizes: Vec<u32>,
    /// `--stack-size <n>` (2048 since llvm-aie 21).
    pub stack_size: u32,
    /// Passed verbatim after the other options (e.g. `--use-lock-race-condition-fix-v2`).
    pub extra_args: Vec<String>,
}

impl Default for AirccOptions {
    fn default() -> Self {
        AirccOptions {
            runtime_loop_tiling_sizes: vec![4, 4],
            stack_size: 2048,
            extra_args: Vec::new(),
        }
    }
}

/// The artifact names upstream uses (and its cache stores).
pub const ELF: &str = "aie.elf";
pub const XCLBIN: &str = "aie.xclbin";
pub const PDI: &str = "aie.pdi";
pub const INSTS: &str = "insts.bin";
/// aiecc's description of the full ELF's kernels, in aircc's work directory.
pub const FULL_ELF_CONFIG: &str = "full_elf_config.json";
/// aircc's default `--tmpdir`, relative to its working directory.
pub const AIRCC_TMPDIR: &str = "air_project";

/// aircc's arguments (without the program name), in upstream's exact order:
///
/// ```text
/// --device <npu1|npu2> --no-xchesscc --no-xbridge --output-format <f> <outputs>
/// --peano=<root> [--bf16-emulation] [--air-runtime-loop-tiling-sizes=<n>]… --stack-size <n>
/// [extra args…] <input>
/// ```
///
/// with `<outputs>` = `--elf-name P/aie.elf` (elf), `-i P/insts.bin -o P/aie.xclbin`
/// (xclbin) or `-i P/insts.bin --pdi-name P/aie.pdi` (pdi). An absent Peano root gives the
/// literal `--peano=` (upstream's fallback: aiecc then looks for Peano itself).
pub fn command_line(
    format: OutputFormat,
    target: NpuVersion,
    project: &Path,
    peano_root: Option<&Path>,
    bf16_emulation: bool,
    options: &AirccOptions,
    input: &Path,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--device",
        target.as_str(),
        "--no-xchesscc",
        "--no-xbridge",
        "--output-format",
        format.as_str(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    let path = |name: &str| project.join(name).into_os_string();
    match format {
        OutputFormat::Elf => {
            args.push("--elf-name".into());
            args.push(path(ELF));
        }
        OutputFormat::Xclbin => {
            args.push("-i".into());
            args.push(path(INSTS));
            args.push("-o".into());
            args.push(path(XCLBIN));
        }
        OutputFormat::Pdi => {
            args.push("-i".into());
            args.push(path(INSTS));
            args.push("--pdi-name".into());
            args.push(path(PDI));
        }
    }
    let mut peano = OsString::from("--peano=");
    if let Some(root) = peano_root {
        peano.push(root);
    }
    args.push(peano);
    if bf16_emulation {
        args.push("--bf16-emulation".into());
    }
    for n in &options.runtime_loop_tiling_sizes {
        args.push(format!("--air-runtime-loop-tiling-sizes={n}").into());
    }
    args.push("--stack-size".into());
    args.push(options.stack_size.to_string().into());
    args.extend(options.extra_args.iter().map(OsString::from));
    args.push(input.into());
    args
}

/// What aircc produced, at their final paths.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "format", rename_all = "lowercase")]
pub enum Artifacts {
    /// npu2: one full ELF; `kernel_name` is the `main:<instance>` name the runtimes dispatch.
    Elf { elf: PathBuf, kernel_name: String },
    /// An xclbin plus its instruction stream.
    Xclbin { xclbin: PathBuf, insts: PathBuf },
    /// A bare PDI plus its instruction stream.
    Pdi { pdi: PathBuf, insts: PathBuf },
}

impl Artifacts {
    pub fn format(&self) -> OutputFormat {
        match self {
            Artifacts::Elf { .. } => OutputFormat::Elf,
            Artifacts::Xclbin { .. } => OutputFormat::Xclbin,
            Artifacts::Pdi { .. } => OutputFormat::Pdi,
        }
    }

    /// Every file, in a fixed order.
    pub fn files(&self) -> Vec<&Path> {
        match self {
            Artifacts::Elf { elf, .. } => vec![elf],
            Artifacts::Xclbin { xclbin, insts } => vec![xclbin, insts],
            Artifacts::Pdi { pdi, insts } => vec![pdi, insts],
        }
    }
}

/// The file names aircc writes for a format (relative to the project directory).
pub(crate) fn output_names(format: OutputFormat) -> &'static [&'static str] {
    match format {
        OutputFormat::Elf => &[ELF],
        OutputFormat::Xclbin => &[XCLBIN, INSTS],
        OutputFormat::Pdi => &[PDI, INSTS],
    }
}

/// Where `full_elf_config.json` may be, in upstream's order: the project directory, then
/// aircc's default tmpdir under its working directory (where aiecc actually writes it).
pub(crate) fn full_elf_config_candidates(project: &Path, aircc_cwd: &Path) -> [PathBuf; 2] {
    [
        project.join(FULL_ELF_CONFIG),
        aircc_cwd.join(AIRCC_TMPDIR).join(FULL_ELF_CONFIG),
    ]
}

/// The kernel name to dispatch from `full_elf_config.json`: the `xrt-kernels` entry named
/// `main` that has an `instance` list gives `main:<instance[0].id>`; otherwise the last entry
/// gives `<name>:<instance[0].id>` (upstream's `_extract_elf_kernel_name`).
pub fn elf_kernel_name(json: &str) -> Result<String, String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("not valid JSON ({e})"))?;
    let kernels = value
        .get("xrt-kernels")
        .and_then(|k| k.as_array())
        .ok_or("no \"xrt-kernels\" list")?;
    let first_instance = |entry: &serde_json::Value| -> Option<String> {
        entry
            .get("instance")?
            .as_array()?
            .first()?
            .get("id")?
            .as_str()
            .map(str::to_owned)
    };
    let has_instances = |entry: &serde_json::Value| {
        entry
            .get("instance")
            .and_then(|i| i.as_array())
            .is_some_and(|a| !a.is_empty())
    };
    if let Some(main) = kernels
        .iter()
        .find(|k| k.get("name").and_then(|n| n.as_str()) == Some("main") && has_instances(k))
    {
        let id = first_instance(main)
            .ok_or("the \"main\" kernel's first instance has no string \"id\"")?;
        return Ok(format!("main:{id}"));
    }
    let last = kernels.last().ok_or("the \"xrt-kernels\" list is empty")?;
    let name = last
        .get("name")
        .and_then(|n| n.as_str())
        .ok_or("the last \"xrt-kernels\" entry has no string \"name\"")?;
    let id = first_instance(last).ok_or_else(|| {
        format!("kernel {name:?} has no \"instance\" list whose first entry has a string \"id\"")
    })?;
    Ok(format!("{name}:{id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn golden_command_lines() {
        let p = Path::new("/w");
        let input = Path::new("/w/asm_air_output.mlir");
        // (format, device, peano, the arguments that name the outputs and peano)
        let cases: [(OutputFormat, NpuVersion, Option<&Path>, &[&str]); 3] = [
            (
                OutputFormat::Elf,
                NpuVersion::Npu2,
                Some(Path::new("/opt/peano")),
                &["elf", "--elf-name", "/w/aie.elf", "--peano=/opt/peano"],
            ),
            (
                OutputFormat::Xclbin,
                NpuVersion::Npu1,
                Some(Path::new("/opt/peano")),
                &[
                    "xclbin",
                    "-i",
                    "/w/insts.bin",
                    "-o",
                    "/w/aie.xclbin",
                    "--peano=/opt/peano",
                ],
            ),
            (
                OutputFormat::Pdi,
                NpuVersion::Npu2,
                None,
                &[
                    "pdi",
                    "-i",
                    "/w/insts.bin",
                    "--pdi-name",
                    "/w/aie.pdi",
                    "--peano=",
                ],
            ),
        ];
        for (format, version, peano, outputs) in cases {
            let device = match version {
                NpuVersion::Npu1 => "npu1",
                NpuVersion::Npu2 => "npu2",
            };
            let mut want = vec![
                "--device",
                device,
                "--no-xchesscc",
                "--no-xbridge",
                "--output-format",
            ];
            want.extend_from_slice(outputs);
            want.extend_from_slice(&[
                "--air-runtime-loop-tiling-sizes=4",
                "--air-runtime-loop-tiling-sizes=4",
                "--stack-size",
                "2048",
                "/w/asm_air_output.mlir",
            ]);
            let got = command_line(
                format,
                version,
                p,
                peano,
                false,
                &AirccOptions::default(),
                input,
            );
            assert_eq!(strings(&got), want, "{format:?} on {device}");
        }
    }

    #[test]
    fn golden_options_order() {
        let o = AirccOptions {
            runtime_loop_tiling_sizes: vec![8, 2, 1],
            stack_size: 4096,
            extra_args: vec!["--use-lock-race-condition-fix-v2".into(), "-v".into()],
        };
        assert_eq!(
            strings(&command_line(
                OutputFormat::Elf,
                NpuVersion::Npu2,
                Path::new("/p"),
                Some(Path::new("/pe")),
                true,
                &o,
                Path::new("/p/in.mlir")
            )),
            [
                "--device",
                "npu2",
                "--no-xchesscc",
                "--no-xbridge",
                "--output-format",
                "elf",
                "--elf-name",
                "/p/aie.elf",
                "--peano=/pe",
                "--bf16-emulation",
                "--air-runtime-loop-tiling-sizes=8",
                "--air-runtime-loop-tiling-sizes=2",
                "--air-runtime-loop-tiling-sizes=1",
                "--stack-size",
                "4096",
                "--use-lock-race-condition-fix-v2",
                "-v",
                "/p/in.mlir"
            ]
        );
        let none = AirccOptions {
            runtime_loop_tiling_sizes: vec![],
            ..AirccOptions::default()
        };
        let args = strings(&command_line(
            OutputFormat::Elf,
            NpuVersion::Npu2,
            Path::new("/p"),
            None,
            false,
            &none,
            Path::new("/p/in.mlir"),
        ));
        assert!(!args.iter().any(|a| a.contains("tiling")), "{args:?}");
    }

    #[test]
    fn kernel_name_rules() {
        let main = r#"{"xrt-kernels":[{"name":"other","instance":[{"id":"x"}]},
            {"name":"main","arguments":[],"instance":[{"id":"sequence","TXN_ctrl_code_file":"/a"},{"id":"b"}]}]}"#;
        assert_eq!(elf_kernel_name(main).unwrap(), "main:sequence");
        let last = r#"{"xrt-kernels":[{"name":"a","instance":[{"id":"i1"}]},{"name":"b","instance":[{"id":"i2"}]}]}"#;
        assert_eq!(elf_kernel_name(last).unwrap(), "b:i2");
        // `main` without instances does not count.
        let main_empty = r#"{"xrt-kernels":[{"name":"main","instance":[]},{"name":"z","instance":[{"id":"q"}]}]}"#;
        assert_eq!(elf_kernel_name(main_empty).unwrap(), "z:q");
        for (bad, want) in [
            ("{", "not valid JSON"),
            ("{}", "no \"xrt-kernels\" list"),
            (r#"{"xrt-kernels":[]}"#, "empty"),
            (
                r#"{"xrt-kernels":[{"name":"k"}]}"#,
                "kernel \"k\" has no \"instance\"",
            ),
            (
                r#"{"xrt-kernels":[{"instance":[{"id":"x"}]}]}"#,
                "no string \"name\"",
            ),
            (
                r#"{"xrt-kernels":[{"name":"main","instance":[{"id":3}]}]}"#,
                "no string \"id\"",
            ),
        ] {
            let e = elf_kernel_name(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
