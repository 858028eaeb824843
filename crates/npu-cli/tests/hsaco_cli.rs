//! `triton-npu hsaco pack|dump|check` through the built binary, against the reference vectors
//! in the repository's test fixtures (`tests/fixtures`; missing them fails these tests).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    assert!(
        dir.join("hsaco-vectors/vectors.json").is_file(),
        "the test fixtures are missing: expected {}/hsaco-vectors/vectors.json",
        dir.display()
    );
    dir
}

fn vector(name: &str) -> PathBuf {
    fixtures().join("hsaco-vectors").join(name)
}

fn vectors_json() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixtures().join("hsaco-vectors/vectors.json")).unwrap())
        .unwrap()
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_triton-npu"))
        .current_dir(cwd)
        .arg("hsaco")
        .args(args)
        .output()
        .expect("binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// A failed run: status `code`, exactly one line on stderr containing every `needle`.
fn assert_fails(o: &Output, code: i32, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line on stderr, got: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr {err:?} should contain {n:?}");
    }
}

fn read(p: impl AsRef<Path>) -> Vec<u8> {
    std::fs::read(p.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", p.as_ref().display()))
}

#[test]
fn pack_reproduces_every_reference_vector() {
    let json = vectors_json();
    let out = tempfile::tempdir().unwrap();
    let mut packed = 0;
    for (name, v) in json.as_object().unwrap() {
        let Some(argv) = v["commands"][0].as_array() else {
            continue;
        };
        let mut args: Vec<String> = argv
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let file = args[1].clone();
        let target = out.path().join(format!("{name}.hsaco"));
        args[1] = target.to_str().unwrap().to_string();
        let args: Vec<&str> = std::iter::once("pack")
            .chain(args.iter().map(String::as_str))
            .collect();
        let o = run(&vector(name), &args);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        assert!(
            o.stderr.is_empty() && o.stdout.is_empty(),
            "{name}: a successful pack is silent"
        );
        assert!(
            read(&target) == read(vector(name).join(&file)),
            "{name}: file differs from the reference"
        );
        packed += 1;
    }
    assert_eq!(packed, 5);
}

#[test]
fn pack_real_npu1_xclbin_matches_the_recorded_file() {
    let dir = fixtures().join("hsaco-real/xdna_emu_npu1");
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("k.hsaco");
    let t = target.to_str().unwrap();
    let o = run(
        &dir,
        &[
            "pack",
            "--hsaco",
            t,
            "--arch",
            "aie2",
            "--kernel",
            "xclbin:MLIR_AIE:aie.xclbin:insts.bin:48:1",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(read(&target) == read(dir.join("from_xclbin.hsaco")));
    // The long form, with the column count taken from the xclbin.
    std::fs::remove_file(&target).unwrap();
    let o = run(
        &dir,
        &[
            "pack",
            "--hsaco",
            t,
            "--arch",
            "aie2",
            "--kernel-name",
            "MLIR_AIE",
            "--kernel-xclbin",
            "aie.xclbin",
            "--kernel-insts",
            "insts.bin",
            "--kernel-kernarg",
            "48",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(read(&target) == read(dir.join("from_xclbin.hsaco")));
}

#[test]
fn long_form_packs_the_same_bytes_as_colon_specs() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("d.hsaco");
    let t = target.to_str().unwrap();
    let o = run(
        &vector("06_dedup_order"),
        &[
            "pack",
            "--hsaco",
            t,
            "--arch",
            "aie2p",
            "--kernel-name",
            "zeta",
            "--kernel-insts",
            "A.bin",
            "--kernel-pdi",
            "P.pdi",
            "--kernel-kernarg",
            "16",
            "--kernel",
            "alpha:B.bin:P.pdi:32:2",
            "--kernel-name",
            "mid",
            "--kernel-cols",
            "3",
            "--kernel-kernarg",
            "48",
            "--kernel-pdi",
            "Q.pdi",
            "--kernel-insts",
            "A.bin",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(read(&target) == read(vector("06_dedup_order/d.hsaco")));

    let elf_target = out.path().join("e.hsaco");
    let o = run(
        &vector("09_fullelf_basic"),
        &[
            "pack",
            "--hsaco",
            elf_target.to_str().unwrap(),
            "--arch",
            "aie2p",
            "--kernel-elf",
            "aie.elf",
            "--kernel-kernarg",
            "0",
            "--kernel-cols",
            "1",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(read(&elf_target) == read(vector("09_fullelf_basic/vsadd_elf.hsaco")));
}

#[test]
fn names_and_paths_with_spaces_colons_and_non_ascii() {
    let out = tempfile::tempdir().unwrap();
    let inputs = out.path().join("my inputs: π");
    std::fs::create_dir(&inputs).unwrap();
    std::fs::copy(
        vector("02_pdi_insts_basic/insts.bin"),
        inputs.join("insts:1.bin"),
    )
    .unwrap();
    std::fs::copy(
        vector("02_pdi_insts_basic/design.pdi"),
        inputs.join("design pdi.pdi"),
    )
    .unwrap();
    let target = out.path().join("names.hsaco");
    let t = target.to_str().unwrap();
    let o = run(
        &inputs,
        &[
            "pack",
            "--hsaco",
            t,
            "--arch",
            "aie2p",
            "--kernel-name",
            "add: two vectors",
            "--kernel-insts",
            "insts:1.bin",
            "--kernel-pdi",
            "design pdi.pdi",
            "--kernel-kernarg",
            "32",
            "--kernel-name",
            "ядро π",
            "--kernel-insts",
            "insts:1.bin",
            "--kernel-pdi",
            "design pdi.pdi",
            "--kernel-cols",
            "+2",
            "--kernel-kernarg",
            "16",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d = run(out.path(), &["dump", "--hsaco", t]);
    assert_eq!(
        stdout(&d),
        "arch section: aie2p\nversion: 1.0\n\
         \x20 kernel add: two vectors: kind=PdiInsts insts=300B pdi=yes kernarg=32 cols=1\n\
         \x20 kernel ядро π: kind=PdiInsts insts=300B pdi=yes kernarg=16 cols=2\n"
    );
    assert_eq!(
        run(out.path(), &["check", "--hsaco", t, "--arch", "aie2p"])
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn dump_prints_the_reference_dumper_text() {
    let json = vectors_json();
    for (name, v) in json.as_object().unwrap() {
        let Some(expected) = v["checks"].get("dump") else {
            continue;
        };
        let file = v["commands"][0][1].as_str().unwrap();
        let o = run(&vector(name), &["dump", "--hsaco", file]);
        assert_eq!(
            i64::from(o.status.code().unwrap()),
            expected[0].as_i64().unwrap(),
            "{name}"
        );
        assert_eq!(stdout(&o), expected[1].as_str().unwrap(), "{name}");
    }
}

#[test]
fn check_exit_status_is_rocrs_verdict() {
    let json = vectors_json();
    for (name, v) in json.as_object().unwrap() {
        for (key, expected) in v["checks"].as_object().unwrap() {
            let Some(agent) = key.strip_prefix("rocr_") else {
                continue;
            };
            let (arch, cols) = agent.split_once("_cols").unwrap();
            let file = v["commands"][0][1].as_str().unwrap();
            let o = run(
                &vector(name),
                &["check", "--hsaco", file, "--arch", arch, "--cols", cols],
            );
            assert_eq!(
                i64::from(o.status.code().unwrap()),
                expected[0].as_i64().unwrap(),
                "{name} {key}"
            );
            assert_eq!(stdout(&o), expected[1].as_str().unwrap(), "{name} {key}");
            if expected[0].as_i64() != Some(0) {
                assert_fails(&o, 1, &[file]);
            }
        }
    }
    // Default agent columns: 8 for aie2p.
    let o = run(
        &vector("01_doc_example"),
        &["check", "--hsaco", "t.hsaco", "--arch", "aie2p"],
    );
    assert_eq!(o.status.code(), Some(0));
    let o = run(
        &vector("01_doc_example"),
        &[
            "check", "--hsaco", "t.hsaco", "--arch", "aie2p", "--cols", "2",
        ],
    );
    assert_fails(
        &o,
        1,
        &[
            "kernel 'k1'",
            "num_cols 4 exceeds the agent's 2 columns",
            "HSA_STATUS_ERROR_INVALID_CODE_OBJECT",
        ],
    );
}

#[test]
fn several_architectures_in_one_file_and_replacing_one() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("multi.hsaco");
    let t = target.to_str().unwrap();
    let v02 = vector("02_pdi_insts_basic");
    let pack = |arch: &str, spec: &str| {
        run(
            &v02,
            &["pack", "--hsaco", t, "--arch", arch, "--kernel", spec],
        )
    };
    assert_eq!(
        pack("aie2p", "vsadd:insts.bin:design.pdi:32:1")
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        pack("aie2", "npu1_add:insts.bin:design.pdi:16:1")
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        pack("aie2p", "renamed:insts.bin:design.pdi:48:4")
            .status
            .code(),
        Some(0)
    );
    let d = run(out.path(), &["dump", "--hsaco", t]);
    assert_eq!(
        stdout(&d),
        "arch section: aie2\nversion: 1.0\n  kernel npu1_add: kind=PdiInsts insts=300B pdi=yes kernarg=16 cols=1\n\
         arch section: aie2p\nversion: 1.0\n  kernel renamed: kind=PdiInsts insts=300B pdi=yes kernarg=48 cols=4\n"
    );
    assert_eq!(
        run(out.path(), &["check", "--hsaco", t, "--arch", "aie2"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        run(out.path(), &["check", "--hsaco", t, "--arch", "aie2p"])
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn python_style_numbers_are_accepted() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("n.hsaco");
    let o = run(
        &vector("02_pdi_insts_basic"),
        &[
            "pack",
            "--hsaco",
            target.to_str().unwrap(),
            "--arch",
            "aie2p",
            "--kernel",
            "vsadd:insts.bin:design.pdi: 3_2:+1",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(read(&target) == read(vector("02_pdi_insts_basic/vsadd.hsaco")));
}

#[test]
fn external_variables_are_reported() {
    // Vector 09's ELF with argument symbol "1" renamed to "x" and its scheme set to Address64:
    // the control code now relocates against an external variable.
    let mut elf = read(vector("09_fullelf_basic/aie.elf"));
    assert_eq!(&elf[0x358..0x364], b"\0.pdi.1\x000\x001\0");
    elf[0x358 + 10] = b'x';
    assert_eq!(elf[0x3a8 + 24 + 4], 5);
    elf[0x3a8 + 24 + 4] = 8;
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("ext.elf"), &elf).unwrap();
    let o = run(
        out.path(),
        &[
            "pack",
            "--hsaco",
            "ext.hsaco",
            "--arch",
            "aie2p",
            "--kernel",
            "elf:ext.elf",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "kernel 'main:sequence' needs external variable 'x' (0 bytes): define it before loading\n"
    );
    let d = run(out.path(), &["dump", "--hsaco", "ext.hsaco"]);
    assert!(
        stdout(&d)
            .contains("kernel main:sequence: kind=FullElf insts=1432B pdi=no kernarg=16 cols=1"),
        "{}",
        stdout(&d)
    );
}

/// Every grammar and input error: one line on stderr, non-zero status, no file written.
#[test]
fn errors_are_one_line_and_write_nothing() {
    let v02 = vector("02_pdi_insts_basic");
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("never.hsaco");
    let t = target.to_str().unwrap();
    let base = ["pack", "--hsaco", t, "--arch", "aie2p"];
    let cases: Vec<(Vec<&str>, i32, Vec<&str>)> = vec![
        (vec!["--kernel", "a:b"], 2, vec!["bad --kernel spec 'a:b'"]),
        (vec!["--kernel", "xclbin:a:b"], 2, vec!["bad --kernel spec"]),
        (
            vec!["--kernel", "elf:a:1:2:3"],
            2,
            vec!["bad --kernel spec"],
        ),
        (
            vec!["--kernel-insts", "insts.bin"],
            2,
            vec!["--kernel-insts given before any --kernel-name or --kernel-elf"],
        ),
        (
            vec![
                "--kernel-name",
                "k",
                "--kernel-insts",
                "insts.bin",
                "--kernel-insts",
                "insts.bin",
            ],
            2,
            vec!["--kernel-name 'k': --kernel-insts given twice"],
        ),
        (
            vec!["--kernel-elf", "x.elf", "--kernel-insts", "insts.bin"],
            2,
            vec!["--kernel-elf takes no --kernel-insts"],
        ),
        (
            vec!["--kernel-name", "k", "--kernel-pdi", "design.pdi"],
            2,
            vec!["--kernel-name 'k' needs --kernel-insts"],
        ),
        (
            vec![
                "--kernel-name",
                "k",
                "--kernel-insts",
                "insts.bin",
                "--kernel-pdi",
                "design.pdi",
                "--kernel-xclbin",
                "x",
            ],
            2,
            vec!["not both"],
        ),
        (vec![], 2, vec!["no kernels"]),
        (
            vec!["--kernel", "k:insts.bin:design.pdi:abc:1"],
            2,
            vec!["KERNARG_SIZE", "'abc'"],
        ),
        (
            vec!["--kernel", "k:insts.bin:design.pdi:-1:1"],
            2,
            vec!["'-1'"],
        ),
        (
            vec!["--kernel", "k:insts.bin:design.pdi:0:4294967296"],
            2,
            vec!["NUM_COLS", "4294967296"],
        ),
        (
            vec![
                "--kernel-name",
                "k",
                "--kernel-insts",
                "insts.bin",
                "--kernel-pdi",
                "design.pdi",
                "--kernel-cols",
                "0x4",
            ],
            2,
            vec!["--kernel-cols", "'0x4'"],
        ),
        (
            vec!["--kernel", "k:missing.bin:design.pdi:0:1"],
            1,
            vec!["missing.bin", "No such file"],
        ),
        (
            vec!["--kernel", "k:insts.bin:0:1"],
            1,
            vec!["kernel 'k'", "needs a PDI", "was not written"],
        ),
        (
            vec!["--kernel", "k:design.pdi:insts.bin:0:0"],
            1,
            vec!["kernel 'k'", "num_cols is 0"],
        ),
        (
            vec![
                "--kernel",
                "k:insts.bin:design.pdi:0:1",
                "--kernel",
                "k:insts.bin:design.pdi:0:1",
            ],
            1,
            vec!["kernel 'k'", "duplicate kernel name"],
        ),
        (
            vec!["--kernel", "elf:insts.bin"],
            1,
            vec!["insts.bin", "not a little-endian ELF32"],
        ),
        (
            vec!["--kernel", "xclbin:k:design.pdi:insts.bin:0"],
            1,
            vec!["design.pdi", "xclbin", "axlf magic"],
        ),
    ];
    for (extra, code, needles) in cases {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let o = run(&v02, &args);
        assert_fails(&o, code, &needles);
        assert!(!target.exists(), "{extra:?}: no file may be written");
        assert_eq!(
            std::fs::read_dir(out.path()).unwrap().count(),
            0,
            "{extra:?}: no temporary file left"
        );
    }
    // Odd-sized insts: copy 3 bytes of insts into a file.
    std::fs::write(out.path().join("odd.bin"), [1u8, 2, 3]).unwrap();
    let odd = out.path().join("odd.bin");
    let spec = format!("k:{}:design.pdi:0:1", odd.display());
    let o = run(
        &v02,
        &["pack", "--hsaco", t, "--arch", "aie2p", "--kernel", &spec],
    );
    assert_fails(&o, 1, &["kernel 'k'", "3 bytes is not a multiple of 4"]);
    // xclbin column width disagreeing with the user's value.
    let real = fixtures().join("hsaco-real/xdna_emu_npu1");
    let o = run(
        &real,
        &[
            "pack",
            "--hsaco",
            t,
            "--arch",
            "aie2",
            "--kernel",
            "xclbin:K:aie.xclbin:insts.bin:48:2",
        ],
    );
    assert_fails(
        &o,
        1,
        &[
            "aie.xclbin",
            "kernel 'K'",
            "num_cols 2 disagrees with the 1 columns",
        ],
    );
    assert!(!target.exists());
}

#[test]
fn refused_pack_leaves_an_existing_file_untouched() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("t.hsaco");
    std::fs::copy(vector("01_doc_example/t.hsaco"), &target).unwrap();
    let before = read(&target);
    let t = target.to_str().unwrap();
    let o = run(
        &vector("01_doc_example"),
        &[
            "pack",
            "--hsaco",
            t,
            "--arch",
            "aie2p",
            "--kernel",
            "k:insts.bin:main.pdi:0:0",
        ],
    );
    assert_fails(&o, 1, &["num_cols is 0"]);
    assert!(read(&target) == before);
    // An existing file that is not an ELF is not overwritten.
    std::fs::write(
        &target,
        b"precious user data, not an ELF at all; keep it exactly as it is!!",
    )
    .unwrap();
    let o = run(
        &vector("01_doc_example"),
        &[
            "pack",
            "--hsaco",
            t,
            "--arch",
            "aie2p",
            "--kernel",
            "k:insts.bin:main.pdi:16:1",
        ],
    );
    assert_fails(&o, 1, &["not an ELF", "was not written"]);
    assert_eq!(
        read(&target),
        b"precious user data, not an ELF at all; keep it exactly as it is!!"
    );
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
}

#[test]
fn dump_and_check_errors_are_one_line() {
    let out = tempfile::tempdir().unwrap();
    let o = run(out.path(), &["dump", "--hsaco", "missing.hsaco"]);
    assert_fails(&o, 1, &["missing.hsaco"]);
    let o = run(
        out.path(),
        &["check", "--hsaco", "missing.hsaco", "--arch", "aie2"],
    );
    assert_fails(&o, 1, &["missing.hsaco"]);
    std::fs::write(out.path().join("junk"), b"junk").unwrap();
    assert_fails(
        &run(out.path(), &["dump", "--hsaco", "junk"]),
        1,
        &["junk", "not an ELF"],
    );
    let o = run(out.path(), &["check", "--hsaco", "junk", "--arch", "aie2"]);
    assert_fails(&o, 1, &["junk", "not an ELF"]);
    let elf = fixtures().join("hsaco-vectors/09_fullelf_basic/aie.elf");
    let o = run(out.path(), &["dump", "--hsaco", elf.to_str().unwrap()]);
    assert_fails(&o, 1, &["64-bit"]);
    let o = run(
        &vector("01_doc_example"),
        &["check", "--hsaco", "t.hsaco", "--arch", "aie2"],
    );
    assert_fails(
        &o,
        1,
        &[
            "no AIEK section named 'aie2'",
            "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS",
        ],
    );
    // Unknown architecture: rejected by the argument parser.
    let o = run(
        &vector("01_doc_example"),
        &["check", "--hsaco", "t.hsaco", "--arch", "aie3"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown AIE architecture 'aie3'"));
}

// ------------------------------------------------------------ ROCr's verdict, class by class

/// Line `name` of `tests/fixtures/hsaco-classes/classes.tsv`: one crafted file per class of bad
/// hsaco, written by `crates/npu-hsaco/tests/rocr_classes.rs`, with the agent's architecture and
/// columns and what ROCr does with it.
fn class(name: &str) -> (String, String, String) {
    let tsv = String::from_utf8(read(fixtures().join("hsaco-classes/classes.tsv"))).unwrap();
    let line = tsv
        .lines()
        .find(|l| l.split('\t').next() == Some(name))
        .unwrap_or_else(|| panic!("{name} is not in classes.tsv"));
    let fields: Vec<&str> = line.split('\t').collect();
    (
        fields[1].to_string(),
        fields[2].to_string(),
        fields[3].to_string(),
    )
}

/// `hsaco check` on the class's file: the exit status is ROCr's verdict, the report is the
/// library's, and a refusal ROCr would not make says so and why.
fn check_class(name: &str) {
    let (arch, cols, rocr) = class(name);
    let dir = fixtures().join("hsaco-classes");
    let file = format!("{name}.hsaco");
    let o = run(
        &dir,
        &["check", "--hsaco", &file, "--arch", &arch, "--cols", &cols],
    );
    let report = npu_hsaco::check_bytes(
        &read(dir.join(&file)),
        arch.parse().unwrap(),
        cols.parse().unwrap(),
    );
    assert_eq!(stdout(&o), report.to_string(), "{name}");
    let result = stdout(&o).lines().last().unwrap().to_string();
    let needles: &[&str] = match rocr.as_str() {
        "loads" => {
            assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
            assert!(o.stderr.is_empty(), "{name}: {}", stderr(&o));
            assert!(result.starts_with("RESULT: accepted"), "{name}: {result}");
            return;
        }
        "refuses" => &["HSA_STATUS_ERROR_"],
        "crashes" => &["ROCr crashes or throws on this file"],
        "undetermined" => &["refused here, ROCr may accept it: ", ", because "],
        "loads-stricter-here" => &["refused here, ROCr accepts it: ", ", because "],
        other => panic!("{name}: unknown verdict {other}"),
    };
    let mut on_stderr = vec![file.as_str()];
    on_stderr.extend_from_slice(needles);
    assert_fails(&o, 1, &on_stderr);
    for n in needles {
        assert!(result.contains(n), "{name}: {result} should contain {n:?}");
    }
}

macro_rules! class_checks {
    ($($name:ident),* $(,)?) => {
        const CLASSES: &[&str] = &[$(stringify!($name)),*];
        mod rocr_class {
            $(
                #[test]
                fn $name() {
                    super::check_class(stringify!($name));
                }
            )*
        }
    };
}

class_checks!(
    ei_version,
    phoff_at_end,
    aie_section_symtab,
    aie_section_rel,
    aie_section_group,
    shstrtab_unreadable,
    null_section_after_0,
    rela_unreadable,
    demangle_length_wraps,
    name_not_utf8,
    shared_elf_sizes,
    ctrltext_in_two_groups,
    note_malformed,
    truncated_table,
    shentsize_72,
    name_runs_past_shstrtab,
    duplicate_group_name,
    empty_name,
    kernarg_not_buffers,
    too_many_columns,
);

#[test]
fn every_class_of_the_fixtures_is_checked() {
    let tsv = String::from_utf8(read(fixtures().join("hsaco-classes/classes.tsv"))).unwrap();
    let names: Vec<&str> = tsv.lines().filter_map(|l| l.split('\t').next()).collect();
    assert_eq!(names, CLASSES);
}

/// `hsaco pack` refuses what `hsaco check` refuses with the default agent: an empty name, more
/// columns than the architecture's agents have, kernarg sizes that are not 16 bytes for each of
/// 1 to 16 buffers; nothing is written.
#[test]
fn pack_refuses_what_check_refuses() {
    let v02 = vector("02_pdi_insts_basic");
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("never.hsaco");
    let t = target.to_str().unwrap();
    let cases: Vec<(&str, &str, Vec<&str>)> = vec![
        (
            "aie2p",
            ":insts.bin:design.pdi:32:1",
            vec!["the kernel name is empty", "ROCr accepts it"],
        ),
        (
            "aie2p",
            "k:insts.bin:design.pdi:32:9",
            vec!["kernel 'k'", "num_cols 9 exceeds the agent's 8 columns"],
        ),
        (
            "aie2",
            "k:insts.bin:design.pdi:32:5",
            vec!["kernel 'k'", "num_cols 5 exceeds the agent's 4 columns"],
        ),
        (
            "aie2p",
            "k:insts.bin:design.pdi:0:1",
            vec!["kernel 'k'", "kernarg_size 0 is not 16 bytes"],
        ),
        (
            "aie2p",
            "k:insts.bin:design.pdi:4:1",
            vec!["kernarg_size 4 is not 16 bytes"],
        ),
        (
            "aie2p",
            "k:insts.bin:design.pdi:17:1",
            vec!["kernarg_size 17 is not 16 bytes"],
        ),
        (
            "aie2p",
            "k:insts.bin:design.pdi:272:1",
            vec!["kernarg_size 272 is not 16 bytes for each of 1 to 16"],
        ),
    ];
    for (arch, spec, needles) in cases {
        let o = run(
            &v02,
            &["pack", "--hsaco", t, "--arch", arch, "--kernel", spec],
        );
        let mut all = needles.clone();
        all.push("was not written");
        assert_fails(&o, 1, &all);
        assert!(!target.exists(), "{spec}: no file may be written");
    }
    // The limits themselves pack, and check accepts the result with the default agent.
    for (arch, spec) in [
        ("aie2p", "k:insts.bin:design.pdi:256:8"),
        ("aie2", "k:insts.bin:design.pdi:16:4"),
    ] {
        let o = run(
            &v02,
            &["pack", "--hsaco", t, "--arch", arch, "--kernel", spec],
        );
        assert_eq!(o.status.code(), Some(0), "{spec}: {}", stderr(&o));
        let o = run(&v02, &["check", "--hsaco", t, "--arch", arch]);
        assert_eq!(o.status.code(), Some(0), "{spec}: {}", stdout(&o));
        std::fs::remove_file(&target).unwrap();
    }
}

/// Packing into an existing file that ROCr crashes on is refused, and the file is kept.
#[test]
fn pack_refuses_an_existing_file_rocr_crashes_on() {
    let out = tempfile::tempdir().unwrap();
    for class in ["null_section_after_0", "rela_unreadable"] {
        let target = out.path().join(format!("{class}.hsaco"));
        std::fs::copy(
            fixtures().join(format!("hsaco-classes/{class}.hsaco")),
            &target,
        )
        .unwrap();
        let before = read(&target);
        let o = run(
            &vector("02_pdi_insts_basic"),
            &[
                "pack",
                "--hsaco",
                target.to_str().unwrap(),
                "--arch",
                "aie2p",
                "--kernel",
                "k:insts.bin:design.pdi:32:1",
            ],
        );
        assert_fails(
            &o,
            1,
            &[
                "ROCr would not load the file with the new section",
                "was not written",
            ],
        );
        assert!(read(&target) == before, "{class}: untouched");
    }
}
