//! The reference packer's vectors (tests/fixtures/hsaco-vectors) and the real npu1 artifacts
//! (tests/fixtures/hsaco-real), reproduced byte for byte; dumper output and ROCr verdicts asserted.

mod common;

use std::path::Path;

use common::{assert_bytes_eq, read, real_dir, rebase, sha256_hex, vectors_dir, vectors_json};
use npu_hsaco::pack::{Inputs, pack_file, resolve};
use npu_hsaco::section::{Validation, build_section_with};
use npu_hsaco::spec::{KernelOption, KernelSource, sources_from_options};
use npu_hsaco::{Arch, Kernel, Rule, build_section, check, container, dump, parse, xclbin};

/// A recorded `aie-hsaco` command line: output file, arch and kernel sources (paths rebased).
struct Command {
    hsaco: String,
    arch: Arch,
    sources: Vec<KernelSource>,
}

fn command(dir: &Path, argv: &[serde_json::Value]) -> Command {
    let argv: Vec<&str> = argv
        .iter()
        .map(|v| v.as_str().expect("argv strings"))
        .collect();
    let mut hsaco = None;
    let mut arch = None;
    let mut options = Vec::new();
    for pair in argv.chunks(2) {
        match pair {
            ["--hsaco", v] => hsaco = Some(v.to_string()),
            ["--arch", v] => arch = Some(v.parse().expect("known arch")),
            ["--kernel", v] => options.push(KernelOption::Spec(v.to_string())),
            other => panic!("unexpected argument pair {other:?} in vectors.json"),
        }
    }
    let sources = sources_from_options(&options).expect("recorded specs parse");
    Command {
        hsaco: hsaco.expect("--hsaco"),
        arch: arch.expect("--arch"),
        sources: sources.into_iter().map(|s| rebase(s, dir)).collect(),
    }
}

#[test]
fn reference_files_are_the_recorded_ones() {
    let json = vectors_json();
    for (name, vector) in json.as_object().expect("object") {
        for (file, meta) in vector["files"].as_object().expect("files") {
            let bytes = read(vectors_dir().join(name).join(file));
            assert_eq!(
                bytes.len() as u64,
                meta["size"].as_u64().unwrap(),
                "{name}/{file} size"
            );
            assert_eq!(
                sha256_hex(&bytes),
                meta["sha256"].as_str().unwrap(),
                "{name}/{file} sha256"
            );
        }
    }
}

#[test]
fn every_packed_vector_is_reproduced_byte_for_byte() {
    let json = vectors_json();
    let mut reproduced = 0;
    for (name, vector) in json.as_object().expect("object") {
        let Some(argv) = vector["commands"][0].as_array() else {
            continue;
        };
        let dir = vectors_dir().join(name);
        let cmd = command(&dir, argv);

        // In memory: section, then container.
        let inputs = Inputs::read(&cmd.sources).unwrap();
        let kernels: Vec<Kernel<'_>> = resolve(&inputs, &cmd.sources)
            .unwrap()
            .into_iter()
            .map(|r| r.kernel)
            .collect();
        let section = build_section(cmd.arch, &kernels).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected_section = read(dir.join(format!("section_{}.bin", cmd.arch)));
        assert_bytes_eq(&section, &expected_section, &format!("{name}: section"));
        let expected_file = read(dir.join(&cmd.hsaco));
        assert_eq!(
            container::new_with_section(cmd.arch, &section),
            expected_file,
            "{name}: container bytes"
        );

        // Through the file API, into a directory where the file does not exist yet.
        let out = tempfile::tempdir().unwrap();
        let target = out.path().join(&cmd.hsaco);
        let outcome = pack_file(&target, cmd.arch, &cmd.sources).unwrap();
        assert_bytes_eq(
            &read(&target),
            &expected_file,
            &format!("{name}: written file"),
        );
        assert_eq!(outcome.file_size, expected_file.len());
        assert_eq!(
            std::fs::read_dir(out.path()).unwrap().count(),
            1,
            "{name}: no temporary file left"
        );
        reproduced += 1;
    }
    assert_eq!(reproduced, 5, "five vectors carry a command line");
}

#[test]
fn python_api_vector_14_is_reproduced_with_format_rules_and_refused_as_unloadable() {
    let dir = vectors_dir().join("14_python_api_section");
    let (k0_insts, k0_pdi, k1_insts) = (
        read(dir.join("k0_insts.bin")),
        read(dir.join("k0.pdi")),
        read(dir.join("k1_insts.bin")),
    );
    let k0 = Kernel::pdi_insts("api_k0", &k0_insts[..], &k0_pdi[..], 16, 2);
    let k1 = Kernel {
        pdi: None,
        ..Kernel::pdi_insts("api_k1", &k1_insts[..], &[][..], 0, 1)
    };
    let kernels = [k0, k1];
    let section = build_section_with(Arch::Aie2, &kernels, Validation::Format).unwrap();
    assert_bytes_eq(
        &section,
        &read(dir.join("section_aie2.bin")),
        "vector 14 section",
    );
    // The same input with an empty (rather than absent) PDI yields the same bytes.
    let k1_empty = Kernel::pdi_insts("api_k1", &k1_insts[..], &[][..], 0, 1);
    let again = build_section_with(
        Arch::Aie2,
        &[kernels[0].clone(), k1_empty],
        Validation::Format,
    )
    .unwrap();
    assert_eq!(again, section);

    let err = build_section(Arch::Aie2, &kernels).unwrap_err();
    let v = err.violation().expect("a rule");
    assert_eq!(v.rule, Rule::MissingPdi);
    assert_eq!(v.kernel.as_deref(), Some("api_k1"));
}

#[test]
fn dumper_output_matches_the_reference_dumper() {
    let json = vectors_json();
    let mut compared = 0;
    for (name, vector) in json.as_object().unwrap() {
        let Some(expected) = vector["checks"].get("dump") else {
            continue;
        };
        let argv = vector["commands"][0].as_array().unwrap();
        let file = read(vectors_dir().join(name).join(argv[1].as_str().unwrap()));
        let d = dump(&parse(&file).unwrap());
        assert_eq!(
            u64::from(d.exit_code()),
            expected[0].as_u64().unwrap(),
            "{name}: exit status"
        );
        assert_eq!(
            d.stdout,
            expected[1].as_str().unwrap(),
            "{name}: dumper stdout"
        );
        compared += 1;
    }
    assert_eq!(compared, 5);
}

#[test]
fn rocr_verdicts_match_the_reference_loader() {
    let json = vectors_json();
    let mut compared = 0;
    for (name, vector) in json.as_object().unwrap() {
        for (key, expected) in vector["checks"].as_object().unwrap() {
            let Some(agent) = key.strip_prefix("rocr_") else {
                continue;
            };
            let (arch, cols) = agent.split_once("_cols").unwrap();
            let (arch, cols): (Arch, u32) = (arch.parse().unwrap(), cols.parse().unwrap());
            let argv = vector["commands"][0].as_array().unwrap();
            let file = read(vectors_dir().join(name).join(argv[1].as_str().unwrap()));
            let report = check(&parse(&file).unwrap(), arch, cols);
            let accepted = expected[0].as_u64().unwrap() == 0;
            assert_eq!(
                report.accepted(),
                accepted,
                "{name} {key}: verdict {:?}",
                report.verdict
            );
            assert_eq!(
                report.to_string(),
                expected[1].as_str().unwrap(),
                "{name} {key}: report"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 7, "seven recorded loader runs");
}

#[test]
fn real_npu1_xclbin_yields_the_recorded_pdi_and_width() {
    let dir = real_dir();
    let xclbin_bytes = read(dir.join("aie.xclbin"));
    let partition = xclbin::partition(&xclbin_bytes).unwrap();
    assert_eq!(partition.pdi, read(dir.join("main.pdi")).as_slice());
    assert_eq!(partition.num_cols, 1);
}

#[test]
fn real_npu1_kernel_packs_from_xclbin_and_from_pdi_to_the_recorded_files() {
    let dir = real_dir();
    let expected_section = read(dir.join("section_aie2.bin"));
    for (spec, file) in [
        (
            "xclbin:MLIR_AIE:aie.xclbin:insts.bin:48:1",
            "from_xclbin.hsaco",
        ),
        ("MLIR_AIE:insts.bin:main.pdi:48:1", "from_pdi.hsaco"),
        // The newer grammar: the column count comes from the xclbin.
        (
            "xclbin:MLIR_AIE:aie.xclbin:insts.bin:48",
            "from_xclbin.hsaco",
        ),
    ] {
        let sources = vec![rebase(
            npu_hsaco::spec::parse_kernel_spec(spec).unwrap(),
            &dir,
        )];
        let inputs = Inputs::read(&sources).unwrap();
        let kernels: Vec<Kernel<'_>> = resolve(&inputs, &sources)
            .unwrap()
            .into_iter()
            .map(|r| r.kernel)
            .collect();
        let section = build_section(Arch::Aie2, &kernels).unwrap();
        assert_bytes_eq(&section, &expected_section, &format!("{spec}: section"));
        let out = tempfile::tempdir().unwrap();
        let target = out.path().join(file);
        pack_file(&target, Arch::Aie2, &sources).unwrap();
        assert_bytes_eq(
            &read(&target),
            &read(dir.join(file)),
            &format!("{spec}: file"),
        );
    }
    let hsaco = read(dir.join("from_xclbin.hsaco"));
    let parsed = parse(&hsaco).unwrap();
    assert_eq!(
        dump(&parsed).stdout,
        "arch section: aie2\nversion: 1.0\n  kernel MLIR_AIE: kind=PdiInsts insts=328B pdi=yes kernarg=48 cols=1\n"
    );
    assert!(check(&parsed, Arch::Aie2, 4).accepted());
}

#[test]
fn full_elf_vectors_report_what_the_loader_derives() {
    let elf = read(vectors_dir().join("10_fullelf_abi1_multi/multi.elf"));
    let kernels = npu_hsaco::kernels_from_full_elf(&elf, None).unwrap();
    let names: Vec<&str> = kernels.iter().map(|k| k.name()).collect();
    assert_eq!(names, ["vecadd:inst_a", "vecadd:inst_b"]);
    assert_eq!(kernels[0].kernarg_size(), 32);
    assert_eq!(kernels[1].kernarg_size(), 48);
    assert_eq!(kernels[0].num_cols, Some(4));
    assert!(kernels.iter().all(|k| k.external_variables().is_empty()));
    // Omitted kernarg stores the derived value; 0 stores 0 (ROCr derives it); others must agree.
    assert_eq!(kernels[1].to_kernel(None, None).unwrap().kernarg_size, 48);
    assert_eq!(
        kernels[1].to_kernel(Some(0), Some(4)).unwrap().kernarg_size,
        0
    );
    let err = kernels[1].to_kernel(Some(32), None).unwrap_err();
    assert_eq!(
        err.violation().unwrap().rule,
        Rule::KernargMismatch {
            stored: 32,
            derived: 48
        }
    );
    let err = kernels[1].to_kernel(None, Some(2)).unwrap_err();
    assert!(matches!(
        err.violation().unwrap().rule,
        Rule::ColumnsMismatch {
            given: 2,
            derived: 4,
            ..
        }
    ));

    let only_b = npu_hsaco::kernels_from_full_elf(&elf, Some(&["vecadd:inst_b"])).unwrap();
    assert_eq!(only_b.len(), 1);
    assert_eq!(only_b[0].name(), "vecadd:inst_b");
    let err = npu_hsaco::kernels_from_full_elf(&elf, Some(&["main:sequence"])).unwrap_err();
    assert!(
        err.to_string().contains("vecadd:inst_a, vecadd:inst_b"),
        "{err}"
    );
}
