//! The full-ELF reader (ROCr's rules) and the xclbin reader, on synthetic inputs.

mod common;

use common::elf_builder::{FullElfSpec, Instance, Reloc, xclbin};
use common::{pseudo_random, read, vectors_dir};
use npu_hsaco::full_elf::{FullElf, Site, demangle_kernel_name};
use npu_hsaco::{
    Arch, FullElfError, Kernel, Rule, XclbinError, build_section, check, kernels_from_full_elf,
    parse, xclbin,
};

fn vsadd(relocs: Vec<Reloc>) -> FullElfSpec {
    FullElfSpec::new("_Z4mainPcPcPc", vec![Instance::new("sequence", 96, relocs)])
}

fn basic() -> Vec<Reloc> {
    vec![
        Reloc::pdi(16, ".pdi.0"),
        Reloc::arg(32, 0, 0),
        Reloc::arg(48, 1, 0),
    ]
}

fn parse_err(spec: &FullElfSpec) -> FullElfError {
    FullElf::parse(&spec.build()).expect_err("the reader refuses it")
}

#[test]
fn builder_output_reads_like_the_reference_vector() {
    let ours = FullElf::parse(&vsadd(basic()).build()).unwrap();
    let reference = FullElf::parse(&read(vectors_dir().join("09_fullelf_basic/aie.elf"))).unwrap();
    assert_eq!(ours.kernel_names(), reference.kernel_names());
    let (a, b) = (&ours.kernels[0], &reference.kernels[0]);
    assert_eq!(
        (a.args, a.kernarg_size, a.ctrl_code_size, &a.arg_sites),
        (b.args, b.kernarg_size, b.ctrl_code_size, &b.arg_sites)
    );
    assert_eq!(ours.num_cols, Some(1));
}

#[test]
fn abi_version_1_packs_scheme_and_addend_into_r_addend() {
    let mut spec = vsadd(vec![
        Reloc::pdi(16, ".pdi.0"),
        Reloc::arg(32, 0, 0x40),
        Reloc::arg(64, 0, 0x100),
    ]);
    spec.abi_version = 1;
    let elf = FullElf::parse(&spec.build()).unwrap();
    assert_eq!(
        elf.kernels[0].arg_sites,
        vec![vec![
            Site {
                offset: 32,
                addend: 0x40
            },
            Site {
                offset: 64,
                addend: 0x100
            }
        ]]
    );
}

#[test]
fn external_variables_are_reported_with_size_and_sites() {
    let mut relocs = basic();
    relocs.push(Reloc::external(72, "scratch-pad-ctrl", 8192));
    relocs.push(Reloc::external(80, "scratch-pad-ctrl", 8192));
    let bytes = vsadd(relocs).build();
    let kernels = kernels_from_full_elf(&bytes, None).unwrap();
    let vars = kernels[0].external_variables();
    assert_eq!(vars.len(), 1);
    assert_eq!(
        (
            vars[0].name.as_str(),
            vars[0].size,
            vars[0].scheme,
            vars[0].sites.as_slice()
        ),
        ("scratch-pad-ctrl", 8192, 8, &[72, 80][..])
    );
    // Packs, and the loader check lists it.
    let k = kernels[0].to_kernel(None, None).unwrap();
    assert_eq!(k.kernarg_size, 32);
    let file = npu_hsaco::pack::pack(None, Arch::Aie2p, &[k]).unwrap();
    let report = check(&parse(&file).unwrap(), Arch::Aie2p, 8);
    assert!(report.accepted());
    assert!(
        report
            .to_string()
            .contains("    extern[0] scratch-pad-ctrl size=8192 sites: 72 80\n"),
        "{report}"
    );
}

#[test]
fn external_variables_need_address64() {
    let mut relocs = basic();
    relocs.push(Reloc {
        scheme: 5,
        ..Reloc::external(72, "scratch-pad-ctrl", 64)
    });
    assert_eq!(
        parse_err(&vsadd(relocs)),
        FullElfError::ExternalScheme {
            symbol: "scratch-pad-ctrl".into(),
            scheme: 5
        }
    );
}

#[test]
fn header_rules() {
    let elf64 = read(vectors_dir().join("01_doc_example/t.hsaco"));
    assert_eq!(
        FullElf::parse(&elf64).unwrap_err(),
        FullElfError::NotElf32Le
    );
    assert_eq!(
        FullElf::parse(b"\x7fELF").unwrap_err(),
        FullElfError::NotElf32Le
    );
    let mut spec = vsadd(basic());
    spec.osabi = 0;
    assert_eq!(parse_err(&spec), FullElfError::WrongOsAbi(0));
    let mut bytes = vsadd(basic()).build();
    bytes[46] = 41; // e_shentsize
    assert!(matches!(
        FullElf::parse(&bytes).unwrap_err(),
        FullElfError::MalformedSectionHeaders(_)
    ));
    let mut bytes = vsadd(basic()).build();
    bytes[50] = 200; // e_shstrndx
    assert!(matches!(
        FullElf::parse(&bytes).unwrap_err(),
        FullElfError::MalformedSectionHeaders(_)
    ));
}

#[test]
fn group_rules() {
    let mut spec = vsadd(basic());
    spec.comdat = false;
    assert!(matches!(parse_err(&spec), FullElfError::NotComdat { .. }));
    assert_eq!(
        parse_err(&FullElfSpec::new("_Z4mainv", vec![])),
        FullElfError::NoGroups
    );
    let mut no_ctrl = vsadd(basic());
    no_ctrl.instances[0].has_ctrl = false;
    assert_eq!(parse_err(&no_ctrl), FullElfError::NoDispatchableKernels);
    // A group without control code is skipped when another one has some.
    let mut mixed = vsadd(basic());
    let mut idle = Instance::new("idle", 16, vec![]);
    idle.has_ctrl = false;
    mixed.instances.push(idle);
    assert_eq!(
        FullElf::parse(&mixed.build()).unwrap().kernel_names(),
        ["main:sequence"]
    );
    let twins = FullElfSpec::new(
        "_Z4mainv",
        vec![
            Instance::new("s", 32, basic_small()),
            Instance::new("s", 32, basic_small()),
        ],
    );
    // ROCr keeps the first group of a name; the reader notes it and packing refuses it.
    let twins = twins.build();
    let parsed = FullElf::parse(&twins).unwrap();
    assert_eq!(parsed.kernel_names(), ["main:s"]);
    assert_eq!(
        parsed.stricter,
        Some(FullElfError::DuplicateKernel("main:s".into()))
    );
    assert!(
        kernels_from_full_elf(&twins, None)
            .unwrap_err()
            .to_string()
            .contains("two groups both define kernel main:s")
    );
    let mut empty = vsadd(vec![]);
    empty.instances[0].ctrl.clear();
    assert_eq!(
        parse_err(&empty),
        FullElfError::EmptyControlCode("main:sequence".into())
    );
}

fn basic_small() -> Vec<Reloc> {
    vec![Reloc::pdi(8, ".pdi.0")]
}

#[test]
fn relocation_rules() {
    let with = |r: Reloc| parse_err(&vsadd(vec![r]));
    assert_eq!(
        with(Reloc {
            scheme: 5,
            ..Reloc::pdi(16, ".pdi.0")
        }),
        FullElfError::PdiScheme {
            symbol: ".pdi.0".into(),
            scheme: 5
        }
    );
    assert_eq!(
        with(Reloc::pdi(16, ".pdi.9")),
        FullElfError::PdiSectionNotFound(".pdi.9".into())
    );
    assert_eq!(
        with(Reloc {
            scheme: 8,
            ..Reloc::arg(32, 0, 0)
        }),
        FullElfError::ArgumentScheme {
            symbol: "0".into(),
            scheme: 8
        }
    );
    assert_eq!(
        with(Reloc::arg(32, 4096, 0)),
        FullElfError::ArgumentIndexOutOfRange("4096".into())
    );
    assert_eq!(
        with(Reloc::pdi(0, ".pdi.0")),
        FullElfError::PdiSiteAtZero("main:sequence".into())
    );
    assert!(matches!(
        with(Reloc::pdi(92, ".pdi.0")),
        FullElfError::PdiSiteOutOfBounds {
            offset: 92,
            size: 96,
            ..
        }
    ));
    assert!(matches!(
        with(Reloc::pdi(18, ".pdi.0")),
        FullElfError::PdiSiteOutOfBounds { offset: 18, .. }
    ));
    assert!(matches!(
        with(Reloc::arg(88, 0, 0)),
        FullElfError::ArgumentSiteOutOfBounds { offset: 88, .. }
    ));
    let mut ambiguous = vsadd(basic());
    ambiguous
        .pdis
        .push((".pdi.0".into(), pseudo_random(99, 256)));
    assert_eq!(
        parse_err(&ambiguous),
        FullElfError::AmbiguousPdi(".pdi.0".into())
    );
    // The same name twice with the same bytes is fine, and equal PDIs share one entry.
    let mut repeated = vsadd(vec![
        Reloc::pdi(16, ".pdi.0"),
        Reloc::pdi(24, ".pdi.1"),
        Reloc::pdi(40, ".pdi.2"),
    ]);
    let p0 = repeated.pdis[0].1.clone();
    repeated.pdis.push((".pdi.0".into(), p0.clone()));
    repeated.pdis.push((".pdi.1".into(), p0));
    repeated.pdis.push((".pdi.2".into(), pseudo_random(5, 128)));
    let k = &FullElf::parse(&repeated.build()).unwrap().kernels[0];
    assert_eq!(k.pdis.len(), 2);
    assert_eq!(k.pdis[0].sites, [16, 24]);
    assert_eq!((k.pdis[1].size, k.args, k.kernarg_size), (128, 0, 0));
}

#[test]
fn argument_count_is_highest_index_plus_one() {
    let k = &FullElf::parse(&vsadd(vec![Reloc::pdi(16, ".pdi.0"), Reloc::arg(32, 2, 0)]).build())
        .unwrap()
        .kernels[0];
    assert_eq!((k.args, k.kernarg_size), (3, 48));
    assert!(k.arg_sites[0].is_empty() && k.arg_sites[1].is_empty());
}

#[test]
fn demangling_follows_rocr() {
    assert_eq!(demangle_kernel_name(b"_Z4mainPcPcPc"), b"main");
    assert_eq!(demangle_kernel_name(b"_Z6vecaddPiS_"), b"vecadd");
    assert_eq!(demangle_kernel_name(b"_Z0x"), b"_Z0x");
    assert_eq!(demangle_kernel_name(b"_Z9ab"), b"_Z9ab");
    assert_eq!(demangle_kernel_name(b"_Zmain"), b"_Zmain");
    assert_eq!(
        demangle_kernel_name("_Z٣abc".as_bytes()),
        "_Z٣abc".as_bytes(),
        "only ASCII digits"
    );
    assert_eq!(
        demangle_kernel_name(b"_Z99999999999999999999999x"),
        b"_Z99999999999999999999999x"
    );
    assert_eq!(demangle_kernel_name(b"plain"), b"plain");
}

#[test]
fn column_count_comes_from_the_note() {
    let mut spec = vsadd(basic());
    spec.num_cols = Some(4);
    let bytes = spec.build();
    let k = &kernels_from_full_elf(&bytes, None).unwrap()[0];
    assert_eq!(k.to_kernel(None, None).unwrap().num_cols, 4);
    assert!(matches!(
        k.to_kernel(None, Some(1))
            .unwrap_err()
            .violation()
            .unwrap()
            .rule,
        Rule::ColumnsMismatch {
            given: 1,
            derived: 4,
            ..
        }
    ));
    spec.num_cols = None;
    let bytes = spec.build();
    let k = &kernels_from_full_elf(&bytes, None).unwrap()[0];
    assert_eq!(k.to_kernel(None, Some(2)).unwrap().num_cols, 2);
    assert_eq!(k.to_kernel(None, None).unwrap().num_cols, 1);
    spec.num_cols = Some(0);
    let bytes = spec.build();
    let k = &kernels_from_full_elf(&bytes, None).unwrap()[0];
    assert_eq!(
        k.to_kernel(None, None)
            .unwrap_err()
            .violation()
            .unwrap()
            .rule,
        Rule::ZeroColumns
    );
}

#[test]
fn full_elf_loadability_is_checked_at_pack_time() {
    let no_pdi = vsadd(vec![Reloc::arg(32, 0, 0)]).build();
    let k = Kernel::full_elf("main:sequence", &no_pdi[..], 0, 1);
    assert_eq!(
        build_section(Arch::Aie2p, &[k])
            .unwrap_err()
            .violation()
            .unwrap()
            .rule,
        Rule::NoPdiSite
    );
    let elf = vsadd(basic()).build();
    let wrong_name = Kernel::full_elf("main:other", &elf[..], 0, 1);
    assert!(matches!(
        build_section(Arch::Aie2p, &[wrong_name])
            .unwrap_err()
            .violation()
            .unwrap()
            .rule,
        Rule::NotInFullElf { .. }
    ));
    let wrong_kernarg = Kernel::full_elf("main:sequence", &elf[..], 16, 1);
    assert_eq!(
        build_section(Arch::Aie2p, &[wrong_kernarg])
            .unwrap_err()
            .violation()
            .unwrap()
            .rule,
        Rule::KernargMismatch {
            stored: 16,
            derived: 32
        }
    );
    let on_aie2 = Kernel::full_elf("main:sequence", &elf[..], 0, 1);
    assert_eq!(
        build_section(Arch::Aie2, std::slice::from_ref(&on_aie2))
            .unwrap_err()
            .violation()
            .unwrap()
            .rule,
        Rule::FullElfArch(Arch::Aie2)
    );
    let mut bad = elf.clone();
    bad[7] = 0;
    let broken = Kernel::full_elf("main:sequence", &bad[..], 0, 1);
    assert_eq!(
        build_section(Arch::Aie2p, &[broken])
            .unwrap_err()
            .violation()
            .unwrap()
            .rule,
        Rule::FullElf(FullElfError::WrongOsAbi(0))
    );
    assert!(build_section(Arch::Aie2p, &[on_aie2]).is_ok());
}

#[test]
fn xclbin_rules() {
    let pdi = pseudo_random(1, 200);
    let ok = xclbin(&[&pdi], 4, 1);
    let p = xclbin::partition(&ok).unwrap();
    assert_eq!((p.pdi, p.num_cols), (&pdi[..], 4));
    assert_eq!(
        xclbin::partition(b"xclbin1\0........").unwrap_err(),
        XclbinError::BadMagic
    );
    assert!(matches!(
        xclbin::partition(&ok[..450]).unwrap_err(),
        XclbinError::Truncated(_)
    ));
    assert!(matches!(
        xclbin::partition(&ok[..ok.len() - 1]).unwrap_err(),
        XclbinError::SectionOutOfFile { index: 1, .. }
    ));
    assert_eq!(
        xclbin::partition(&xclbin(&[&pdi], 4, 0)).unwrap_err(),
        XclbinError::NoAiePartition
    );
    assert_eq!(
        xclbin::partition(&xclbin(&[&pdi], 4, 2)).unwrap_err(),
        XclbinError::SeveralAiePartitions(2)
    );
    assert_eq!(
        xclbin::partition(&xclbin(&[&pdi, &pdi], 4, 1)).unwrap_err(),
        XclbinError::PdiCount(2)
    );
    assert_eq!(
        xclbin::partition(&xclbin(&[], 4, 1)).unwrap_err(),
        XclbinError::PdiCount(0)
    );
    assert_eq!(
        xclbin::partition(&xclbin(&[&[]], 4, 1)).unwrap_err(),
        XclbinError::EmptyPdi
    );
    assert_eq!(
        xclbin::partition(&xclbin(&[&pdi], 0, 1)).unwrap_err(),
        XclbinError::ZeroColumnWidth
    );
}
