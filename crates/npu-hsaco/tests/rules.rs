//! One test per rule: what packing refuses, what the loader check names, what the dumper
//! reports, and the names ROCr and the dumper accept.

mod common;

use common::pseudo_random;
use npu_hsaco::container::new_with_section;
use npu_hsaco::section::{Validation, build_section_with};
use npu_hsaco::{Arch, HsaStatus, Kernel, Rule, build_section, check, check_bytes, dump, parse};

fn insts(seed: u64) -> Vec<u8> {
    pseudo_random(seed, 64)
}

fn pdi(seed: u64) -> Vec<u8> {
    pseudo_random(seed + 100, 96)
}

/// The rule (and kernel) that packing `kernels` for `arch` breaks.
fn refused(arch: Arch, kernels: &[Kernel<'_>]) -> (Rule, Option<String>) {
    let err = build_section(arch, kernels).expect_err("packing must be refused");
    let v = err
        .violation()
        .unwrap_or_else(|| panic!("expected a rule, got {err}"))
        .clone();
    // The message names the kernel and the rule.
    if let Some(k) = &v.kernel {
        assert!(err.to_string().contains(&format!("kernel '{k}'")), "{err}");
    }
    (v.rule, v.kernel)
}

// ---------------------------------------------------------------- pack-time refusals

#[test]
fn pack_refuses_pdi_insts_without_pdi() {
    let i = insts(1);
    let k = Kernel {
        pdi: None,
        ..Kernel::pdi_insts("k", &i[..], &[][..], 0, 1)
    };
    assert_eq!(
        refused(Arch::Aie2p, &[k]),
        (Rule::MissingPdi, Some("k".into()))
    );
}

#[test]
fn pack_refuses_insts_that_are_not_whole_words() {
    let (i, p) = (pseudo_random(1, 10), pdi(1));
    assert_eq!(
        refused(
            Arch::Aie2,
            &[Kernel::pdi_insts("odd", &i[..], &p[..], 0, 1)]
        )
        .0,
        Rule::InstsNotWordMultiple(10)
    );
}

#[test]
fn pack_refuses_zero_columns() {
    let (i, p) = (insts(1), pdi(1));
    assert_eq!(
        refused(Arch::Aie2p, &[Kernel::pdi_insts("z", &i[..], &p[..], 0, 0)]).0,
        Rule::ZeroColumns
    );
}

#[test]
fn pack_refuses_duplicate_names() {
    let (i, p) = (insts(1), pdi(1));
    let k = Kernel::pdi_insts("same", &i[..], &p[..], 0, 1);
    assert_eq!(
        refused(Arch::Aie2p, &[k.clone(), k]),
        (Rule::DuplicateName, Some("same".into()))
    );
}

#[test]
fn pack_refuses_empty_insts_even_with_format_rules() {
    let p = pdi(1);
    let k = Kernel::pdi_insts("e", &[][..], &p[..], 0, 1);
    assert_eq!(
        refused(Arch::Aie2p, std::slice::from_ref(&k)).0,
        Rule::EmptyInsts
    );
    let err = build_section_with(Arch::Aie2p, &[k], Validation::Format).unwrap_err();
    assert_eq!(err.violation().unwrap().rule, Rule::EmptyInsts);
}

#[test]
fn pack_refuses_a_nul_in_a_name() {
    let (i, p) = (insts(1), pdi(1));
    assert_eq!(
        refused(
            Arch::Aie2p,
            &[Kernel::pdi_insts("a\0b", &i[..], &p[..], 0, 1)]
        )
        .0,
        Rule::NameHasNul
    );
}

#[test]
fn pack_refuses_no_kernels() {
    assert_eq!(refused(Arch::Aie2p, &[]).0, Rule::NoKernels);
    // The reference API's empty section is still available with format rules.
    assert_eq!(
        build_section_with(Arch::Aie2p, &[], Validation::Format)
            .unwrap()
            .len(),
        48
    );
}

#[test]
fn pack_refuses_a_full_elf_kernel_with_a_pdi() {
    let elf = common::elf_builder::FullElfSpec::new("_Z4mainv", vec![]).build();
    let p = pdi(1);
    let k = Kernel {
        pdi: Some(p[..].into()),
        ..Kernel::full_elf("main:x", &elf[..], 0, 1)
    };
    let err = build_section_with(Arch::Aie2p, &[k], Validation::Format).unwrap_err();
    assert_eq!(err.violation().unwrap().rule, Rule::FullElfWithPdi);
}

#[test]
fn pack_refuses_a_section_of_4_gib_or_more_without_copying_it() {
    // calloc'ed zero pages: no memory is touched unless the blobs were copied.
    let big_insts = vec![0u8; 1 << 31];
    let big_pdi = vec![0u8; (1 << 31) + 4];
    let k = Kernel::pdi_insts("huge", &big_insts[..], &big_pdi[..], 0, 1);
    match refused(Arch::Aie2p, &[k]).0 {
        Rule::SectionTooLarge(size) => assert!(size > u64::from(u32::MAX)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn equal_blobs_are_stored_once_whatever_their_role() {
    let shared = insts(5);
    let k1 = Kernel::pdi_insts("a", &shared[..], &shared[..], 16, 1);
    let section = build_section(Arch::Aie2p, &[k1]).unwrap();
    assert_eq!(
        section.len(),
        48 + 44 + 2 + shared.len(),
        "insts and PDI share bytes"
    );
    let hsaco = new_with_section(Arch::Aie2p, &section);
    let parsed = parse(&hsaco).unwrap();
    let k = &parsed.kernels(Arch::Aie2p).unwrap()[0];
    assert_eq!(k.entry.insts_offset, k.entry.pdi_offset);
}

// ---------------------------------------------------------------- loader check

/// A valid one-kernel aie2p section and its field offsets.
fn valid_section() -> Vec<u8> {
    let (i, p) = (insts(1), pdi(1));
    build_section(
        Arch::Aie2p,
        &[Kernel::pdi_insts("k", &i[..], &p[..], 16, 2)],
    )
    .unwrap()
}

const ENTRY: usize = 48;

fn patch(section: &mut [u8], at: usize, value: u32) {
    section[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn verdict(section: &[u8], arch: Arch, cols: u32) -> Result<usize, (Rule, HsaStatus)> {
    let file = new_with_section(Arch::Aie2p, section);
    let report = check(&parse(&file).unwrap(), arch, cols);
    report
        .verdict
        .map_err(|r| (r.violation.rule.clone(), r.status().expect("ROCr refuses")))
}

fn rule_after(patches: &[(usize, u32)]) -> Rule {
    let mut s = valid_section();
    for &(at, v) in patches {
        patch(&mut s, at, v);
    }
    let (rule, status) = verdict(&s, Arch::Aie2p, 8).expect_err("ROCr refuses");
    assert_eq!(status, HsaStatus::InvalidCodeObject);
    rule
}

#[test]
fn check_accepts_the_valid_section_and_counts_kernels() {
    assert_eq!(verdict(&valid_section(), Arch::Aie2p, 8), Ok(1));
}

#[test]
fn check_names_each_section_parse_rule() {
    let s = valid_section();
    let size = s.len() as u64;
    let u16_patch = {
        let mut v = s.clone();
        v[4..6].copy_from_slice(&2u16.to_le_bytes());
        verdict(&v, Arch::Aie2p, 8).unwrap_err().0
    };
    assert_eq!(u16_patch, Rule::VersionMajor(2));
    assert_eq!(rule_after(&[(8, 40)]), Rule::HeaderSize(40));
    assert_eq!(rule_after(&[(16, 40)]), Rule::EntrySize(40));
    assert_eq!(
        rule_after(&[(12, 1000)]),
        Rule::KernelTableOutOfSection {
            offset: 48,
            count: 1000,
            entry_size: 44,
            size
        }
    );
    assert_eq!(
        rule_after(&[(20, 60)]),
        Rule::StringTableOverlapsKernelTable {
            offset: 60,
            table_end: 92
        }
    );
    assert_eq!(
        rule_after(&[(24, 100_000)]),
        Rule::StringTableOutOfSection {
            offset: 92,
            size: 100_000,
            section_size: size
        }
    );
    assert_eq!(
        rule_after(&[(28, 93)]),
        Rule::PoolOverlapsStringTable {
            offset: 93,
            strings_end: 94
        }
    );
    assert_eq!(
        rule_after(&[(28, 100_000)]),
        Rule::PoolOutOfSection {
            offset: 100_000,
            size
        }
    );
    assert_eq!(rule_after(&[(12, 0)]), Rule::NoKernels);
}

#[test]
fn check_names_each_entry_rule() {
    let e = ENTRY;
    assert_eq!(rule_after(&[(e + 8, 0)]), Rule::EmptyInsts);
    assert_eq!(rule_after(&[(e + 8, 6)]), Rule::InstsNotWordMultiple(6));
    assert_eq!(
        rule_after(&[(e + 4, 10)]),
        Rule::InstsOutsidePool {
            offset: 10,
            size: 64
        }
    );
    assert_eq!(
        rule_after(&[(e + 12, 10)]),
        Rule::PdiOutsidePool {
            offset: 10,
            size: 96
        }
    );
    assert_eq!(rule_after(&[(e + 16, 0)]), Rule::PdiOffsetWithoutPdi(158));
    assert_eq!(
        rule_after(&[(e + 28, 1)]).to_string(),
        "a FullElf kernel must not carry a PDI blob (its PDIs live in the ELF)"
    );
    assert_eq!(
        rule_after(&[(e, 2)]),
        Rule::NameOffsetOutOfTable { offset: 2, size: 2 }
    );
    // Name offset 1 points at the terminating NUL of "k": an empty name, which is fine; make
    // the table one byte shorter instead so that no NUL follows.
    assert_eq!(rule_after(&[(24, 1), (28, 93)]), Rule::NameNotTerminated);
    assert_eq!(rule_after(&[(e + 28, 2)]), Rule::InvalidKind(2));
    assert_eq!(rule_after(&[(e + 24, 0)]), Rule::ZeroColumns);
}

#[test]
fn check_names_duplicate_names_in_a_file() {
    let (i, p) = (insts(1), pdi(1));
    let mut s = build_section(
        Arch::Aie2p,
        &[
            Kernel::pdi_insts("ab", &i[..], &p[..], 16, 1),
            Kernel::pdi_insts("ac", &i[..], &p[..], 16, 1),
        ],
    )
    .unwrap();
    let names = 48 + 2 * 44;
    s[names + 4] = b'b';
    let (rule, _) = verdict(&s, Arch::Aie2p, 8).unwrap_err();
    assert_eq!(rule, Rule::DuplicateName);
}

#[test]
fn check_applies_agent_columns_and_architecture() {
    assert_eq!(
        verdict(&valid_section(), Arch::Aie2p, 1).unwrap_err().0,
        Rule::TooManyColumns { cols: 2, agent: 1 }
    );
    assert_eq!(
        verdict(&valid_section(), Arch::Aie2, 4).unwrap_err(),
        (
            Rule::NoArchSection(Arch::Aie2),
            HsaStatus::IncompatibleArguments
        )
    );
}

#[test]
fn check_refuses_pdi_insts_without_pdi_in_a_file() {
    let i = insts(1);
    let k = Kernel {
        pdi: None,
        ..Kernel::pdi_insts("nopdi", &i[..], &[][..], 0, 1)
    };
    let s = build_section_with(Arch::Aie2p, &[k], Validation::Format).unwrap();
    assert_eq!(verdict(&s, Arch::Aie2p, 8).unwrap_err().0, Rule::MissingPdi);
}

#[test]
fn check_names_container_rules() {
    let file = new_with_section(Arch::Aie2p, &valid_section());
    assert_eq!(
        check_bytes(b"garbage", Arch::Aie2p, 8)
            .verdict
            .unwrap_err()
            .violation
            .rule,
        Rule::NotElf
    );
    let mut v0 = file.clone();
    v0[0x14] = 0;
    assert_eq!(
        check_bytes(&v0, Arch::Aie2p, 8)
            .verdict
            .unwrap_err()
            .violation
            .rule,
        Rule::ElfVersion(0)
    );
    let mut no_magic = file.clone();
    no_magic[0x51] = b'X';
    assert_eq!(
        check_bytes(&no_magic, Arch::Aie2p, 8)
            .verdict
            .unwrap_err()
            .violation
            .rule,
        Rule::NotAieCodeObject
    );
    let mut bad_names = file.clone();
    bad_names[0x3e] = 7;
    assert_eq!(
        check_bytes(&bad_names, Arch::Aie2p, 8)
            .verdict
            .unwrap_err()
            .violation
            .rule,
        Rule::BadShstrndx(7)
    );
}

#[test]
fn check_uses_the_first_usable_section_of_the_agent_name() {
    use common::elf_builder::{SHT_PROGBITS, Sec, write_elf64};
    let good = valid_section();
    let mut broken = good.clone();
    patch(&mut broken, 48 + 8, 6); // insts not whole words
    let file = |sections: &[&[u8]]| {
        let secs: Vec<Sec> = sections
            .iter()
            .map(|d| Sec::new("aie2p", SHT_PROGBITS, d.to_vec()))
            .collect();
        write_elf64(1, 0, 0, &secs, &[])
    };
    // Two sections with the agent's name: the first usable one wins, even when broken.
    let first_broken = check_bytes(&file(&[&broken, &good]), Arch::Aie2p, 8);
    assert_eq!(
        first_broken.verdict.unwrap_err().violation.rule,
        Rule::InstsNotWordMultiple(6)
    );
    assert!(check_bytes(&file(&[&good, &broken]), Arch::Aie2p, 8).accepted());
    // A section too small to hold a header, or without the magic, is skipped.
    assert!(check_bytes(&file(&[b"AIEK", &good]), Arch::Aie2p, 8).accepted());
    let mut no_magic = broken.clone();
    no_magic[0] = b'X';
    assert!(check_bytes(&file(&[&no_magic, &good]), Arch::Aie2p, 8).accepted());
    // The dumper reads the first section of the name, whatever it holds.
    let d = dump(&parse(&file(&[&no_magic, &good])).unwrap());
    assert_eq!(
        d.errors,
        ["aie2p: the section does not start with the AIEK magic"]
    );
}

// ---------------------------------------------------------------- dumper

#[test]
fn dumper_reports_damaged_sections_and_keeps_printing_others() {
    let mut broken = valid_section();
    patch(&mut broken, 48 + 28, 5);
    let one = new_with_section(Arch::Aie2p, &broken);
    let (i, p) = (insts(2), pdi(2));
    let good = build_section(
        Arch::Aie2,
        &[Kernel::pdi_insts("fine", &i[..], &p[..], 16, 1)],
    )
    .unwrap();
    let two = npu_hsaco::container::replace_section(&one, Arch::Aie2, &good).unwrap();
    let d = dump(&parse(&two).unwrap());
    assert_eq!(
        d.stdout,
        "arch section: aie2\nversion: 1.0\n  kernel fine: kind=PdiInsts insts=64B pdi=yes kernarg=16 cols=1\n"
    );
    assert_eq!(
        d.errors,
        ["aie2p: kernel 'k': kind 5 is not a kernel kind (0 = PdiInsts, 1 = FullElf)"]
    );
    assert_eq!(d.exit_code(), 1);
}

#[test]
fn dumper_is_laxer_than_rocr_where_the_reference_is() {
    // Duplicate names, missing PDI, zero columns, odd insts: printed by the dumper.
    let odd = pseudo_random(3, 6);
    let k = Kernel {
        pdi: None,
        ..Kernel::pdi_insts("x", &odd[..], &[][..], 0, 0)
    };
    let s = build_section_with(Arch::Aie2p, &[k], Validation::Format).unwrap();
    let file = new_with_section(Arch::Aie2p, &s);
    let d = dump(&parse(&file).unwrap());
    assert_eq!(
        d.stdout,
        "arch section: aie2p\nversion: 1.0\n  kernel x: kind=PdiInsts insts=6B pdi=no kernarg=0 cols=0\n"
    );
    assert!(!check_bytes(&file, Arch::Aie2p, 8).accepted());
}

#[test]
fn dumper_refuses_non_utf8_names_and_reports_missing_sections() {
    let mut s = valid_section();
    s[48 + 44] = 0xFF;
    let d = dump(&parse(&new_with_section(Arch::Aie2p, &s)).unwrap());
    assert_eq!(
        d.errors,
        ["aie2p: kernel '\u{FFFD}': the name is not valid UTF-8"]
    );
    let gpu = common::elf_builder::gpu_like_code_object();
    assert_eq!(
        dump(&parse(&gpu).unwrap()).errors,
        ["no aie2/aie2p section found"]
    );
}

// ---------------------------------------------------------------- names

#[test]
fn names_with_spaces_colons_and_non_ascii_round_trip() {
    let (i, p) = (insts(9), pdi(9));
    let names = ["my kernel", "a:b:c", "ядро-π", "カーネル 1", "\u{feff}"];
    let kernels: Vec<Kernel<'_>> = names
        .iter()
        .map(|n| Kernel::pdi_insts(*n, &i[..], &p[..], 32, 1))
        .collect();
    let section = build_section(Arch::Aie2p, &kernels).unwrap();
    let file = new_with_section(Arch::Aie2p, &section);
    let parsed = parse(&file).unwrap();
    let read: Vec<String> = parsed
        .kernels(Arch::Aie2p)
        .unwrap()
        .iter()
        .map(|k| k.name_lossy())
        .collect();
    assert_eq!(read, names);
    let d = dump(&parsed);
    for n in names {
        assert!(d.stdout.contains(&format!(
            "  kernel {n}: kind=PdiInsts insts=64B pdi=yes kernarg=32 cols=1\n"
        )));
    }
    assert_eq!(check(&parsed, Arch::Aie2p, 1).verdict, Ok(5));
}
