//! One crafted file per class of bad hsaco on which this crate and ROCr once disagreed (issue 17,
//! item 10): the loader check must give ROCr's verdict, and where this crate stays stricter it
//! must say that ROCr accepts the file, and why.
//!
//! Each file is built here with the test ELF builders; the same bytes are kept in
//! `tests/fixtures/hsaco-classes/` (with `classes.tsv`, the verdicts) so that the command line and
//! the software HSA agent are tested on exactly these files. `NPU_HSACO_WRITE_CLASSES=1` rewrites
//! the fixtures from the builders; otherwise a fixture that differs from its builder fails.

mod common;

use std::path::PathBuf;

use common::elf_builder::{
    FullElfSpec, Instance, Reloc, SHT_GROUP, SHT_PROGBITS, SHT_REL, SHT_RELA, SHT_STRTAB,
    SHT_SYMTAB, Sec, move_to_end_elf32, section_index_elf32, write_elf64,
};
use common::pseudo_random;
use npu_hsaco::check::Stage;
use npu_hsaco::container::new_with_section;
use npu_hsaco::section::{Validation, build_section_with};
use npu_hsaco::{Arch, FullElfError, Kernel, RocrVerdict, Rule, check_bytes, pack};

/// What ROCr does with a class's file, and what the software HSA agent (its stand-in) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rocr {
    /// ROCr loads it, and so does the check.
    Loads,
    /// ROCr refuses it with a status.
    Refuses,
    /// ROCr crashes or throws on it.
    Crashes,
    /// ROCr's verdict depends on the order of its kernel hash map.
    Undetermined,
    /// ROCr loads it; the check refuses it and says so.
    LoadsStricterHere,
}

impl Rocr {
    fn word(self) -> &'static str {
        match self {
            Rocr::Loads => "loads",
            Rocr::Refuses => "refuses",
            Rocr::Crashes => "crashes",
            Rocr::Undetermined => "undetermined",
            Rocr::LoadsStricterHere => "loads-stricter-here",
        }
    }

    fn of(verdict: RocrVerdict) -> Rocr {
        match verdict {
            RocrVerdict::Refuses(_) => Rocr::Refuses,
            RocrVerdict::Faults => Rocr::Crashes,
            RocrVerdict::Accepts { .. } => Rocr::LoadsStricterHere,
            RocrVerdict::Undetermined { .. } => Rocr::Undetermined,
        }
    }
}

struct Class {
    bytes: Vec<u8>,
    arch: Arch,
    cols: u32,
    rocr: Rocr,
    /// Whether the check's rule is the expected one (`None` for files ROCr loads).
    rule: Option<fn(&Rule) -> bool>,
    /// Whether the software HSA agent loads the file.
    agent_loads: bool,
}

fn insts() -> Vec<u8> {
    pseudo_random(1, 64)
}

fn pdi() -> Vec<u8> {
    pseudo_random(2, 96)
}

/// A valid aie2p table with one PdiInsts kernel `k` (254 bytes: no multiple of 4, 16 or 24).
fn table() -> Vec<u8> {
    let (i, p) = (insts(), pdi());
    let t = npu_hsaco::build_section(
        Arch::Aie2p,
        &[Kernel::pdi_insts("k", &i[..], &p[..], 32, 1)],
    )
    .unwrap();
    assert_eq!(t.len(), 254);
    t
}

/// A table of `kernels` with the reference packer's rules only (so it may break ROCr's).
fn loose_table(kernels: &[Kernel<'_>]) -> Vec<u8> {
    build_section_with(Arch::Aie2p, kernels, Validation::Format).unwrap()
}

/// An ELF64 container (from the independent builder) whose sections are `sections`, placed
/// from index 2 (0 is null, 1 `.shstrtab`).
fn container(sections: &[Sec]) -> Vec<u8> {
    write_elf64(1, 0, 0, sections, &[])
}

fn aie2p(sh_type: u32, data: Vec<u8>) -> Sec {
    Sec::new("aie2p", sh_type, data)
}

/// Offset of section `index`'s header in an ELF64 file.
fn shdr(file: &[u8], index: usize) -> usize {
    u64::from_le_bytes(file[0x28..0x30].try_into().unwrap()) as usize + 64 * index
}

fn set_u64(file: &mut [u8], at: usize, value: u64) {
    file[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// Replaces the only occurrence of `from` in `bytes` by `to` (same length).
fn replace_once(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let hits: Vec<usize> = (0..=bytes.len() - from.len())
        .filter(|&i| &bytes[i..i + from.len()] == from)
        .collect();
    assert_eq!(hits.len(), 1, "{from:?} occurs once");
    bytes[hits[0]..hits[0] + to.len()].copy_from_slice(to);
}

fn basic() -> Vec<Reloc> {
    vec![
        Reloc::pdi(16, ".pdi.0"),
        Reloc::arg(32, 0, 0),
        Reloc::arg(48, 1, 0),
    ]
}

fn full_elf(kernel_symbol: &str, instances: Vec<Instance>) -> FullElfSpec {
    FullElfSpec::new(kernel_symbol, instances)
}

/// A full ELF with one kernel, `main:sequence`.
fn one_instance_elf() -> Vec<u8> {
    full_elf("_Z4mainPcPc", vec![Instance::new("sequence", 96, basic())]).build()
}

/// A full ELF with two instances of `main`, each with a PDI and two arguments.
fn two_instance_elf(a: &str, b: &str) -> Vec<u8> {
    let instances = vec![Instance::new(a, 96, basic()), Instance::new(b, 96, basic())];
    full_elf("_Z4mainPcPc", instances).build()
}

/// An aie2p container holding FullElf entries `names` for `elf` (kernarg 0: ROCr derives it).
fn full_elf_hsaco(elf: &[u8], names: &[&str]) -> Vec<u8> {
    let kernels: Vec<Kernel<'_>> = names
        .iter()
        .map(|n| Kernel::full_elf(*n, elf, 0, 1))
        .collect();
    new_with_section(Arch::Aie2p, &loose_table(&kernels))
}

fn refuses(rule: fn(&Rule) -> bool, agent_loads: bool, bytes: Vec<u8>) -> Class {
    Class {
        bytes,
        arch: Arch::Aie2p,
        cols: 8,
        rocr: Rocr::Refuses,
        rule: Some(rule),
        agent_loads,
    }
}

fn with(rocr: Rocr, rule: fn(&Rule) -> bool, agent_loads: bool, bytes: Vec<u8>) -> Class {
    Class {
        rocr,
        ..refuses(rule, agent_loads, bytes)
    }
}

/// A class ROCr loads and the check refuses on purpose.
fn stricter(rule: fn(&Rule) -> bool, agent_loads: bool, bytes: Vec<u8>) -> Class {
    with(Rocr::LoadsStricterHere, rule, agent_loads, bytes)
}

/// A class ROCr crashes on.
fn crashes(rule: fn(&Rule) -> bool, bytes: Vec<u8>) -> Class {
    with(Rocr::Crashes, rule, false, bytes)
}

fn loads(bytes: Vec<u8>) -> Class {
    Class {
        bytes,
        arch: Arch::Aie2p,
        cols: 8,
        rocr: Rocr::Loads,
        rule: None,
        agent_loads: true,
    }
}

/// The file of each class.
fn class(name: &str) -> Class {
    let valid = || container(&[aie2p(SHT_PROGBITS, table())]);
    match name {
        // --- the container, as ROCr's ELF image reader and libelf see it ---
        "ei_version" => {
            let mut f = valid();
            f[6] = 0; // e_ident[EI_VERSION]; e_version stays 1
            refuses(|r| *r == Rule::IdentVersion(0), false, f)
        }
        "phoff_at_end" => {
            let mut f = valid();
            let len = f.len() as u64;
            set_u64(&mut f, 0x20, len); // e_phoff
            f[0x36..0x38].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
            f[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
            refuses(
                |r| matches!(r, Rule::ProgramHeaders { count: 1, .. }),
                false,
                f,
            )
        }
        // The AIEK table in a section whose type makes libelf read it as 24-, 16- or 4-byte
        // entries, none of which divides its 254 bytes: ROCr sees an empty section.
        "aie_section_symtab" => {
            let sec = Sec {
                link: 1, // .shstrtab, a string table: only the size is wrong
                ..aie2p(SHT_SYMTAB, table())
            };
            refuses(
                |r| matches!(r, Rule::UnreadableAieSection { entry_size: 24, .. }),
                false,
                container(&[sec]),
            )
        }
        "aie_section_rel" => refuses(
            |r| matches!(r, Rule::UnreadableAieSection { entry_size: 16, .. }),
            false,
            container(&[aie2p(SHT_REL, table())]),
        ),
        "aie_section_group" => refuses(
            |r| matches!(r, Rule::UnreadableAieSection { entry_size: 4, .. }),
            false,
            container(&[aie2p(SHT_GROUP, table())]),
        ),
        "shstrtab_unreadable" => {
            let mut f = valid();
            let len = f.len() as u64;
            let at = shdr(&f, 1) + 24; // .shstrtab's sh_offset
            set_u64(&mut f, at, len + 100);
            crashes(|r| *r == Rule::UnreadableShstrtab(1), f)
        }
        "null_section_after_0" => crashes(
            |r| *r == Rule::NullSection(3),
            container(&[aie2p(SHT_PROGBITS, table()), Sec::new("", 0, Vec::new())]),
        ),
        "rela_unreadable" => {
            let sections = [
                aie2p(SHT_PROGBITS, table()),
                Sec::new(".strtab", SHT_STRTAB, b"\0".to_vec()),
                Sec {
                    link: 3,
                    entsize: 24,
                    ..Sec::new(".symtab", SHT_SYMTAB, vec![0; 24])
                },
                // 25 bytes: not a whole number of 24-byte Elf64_Rela.
                Sec {
                    link: 4,
                    entsize: 24,
                    ..Sec::new(".rela.data", SHT_RELA, vec![0; 25])
                },
            ];
            crashes(
                |r| *r == Rule::UnreadableRelocations(5),
                container(&sections),
            )
        }
        // --- names and nested full ELFs ---
        "demangle_length_wraps" => {
            // 18446744073709551620 = 2^64 + 4: ROCr's size_t wraps to 4, so the kernel is "main".
            let elf = full_elf(
                "_Z18446744073709551620mainPcPc",
                vec![Instance::new("sequence", 96, basic())],
            )
            .build();
            let kernels = npu_hsaco::kernels_from_full_elf(&elf, None).unwrap();
            assert_eq!(kernels[0].name(), "main:sequence");
            let k = kernels[0].to_kernel(None, None).unwrap();
            loads(pack::pack(None, Arch::Aie2p, &[k]).unwrap())
        }
        "name_not_utf8" => {
            // A FullElf kernel whose instance name is not UTF-8, and a PdiInsts kernel likewise.
            let mut inst = Instance::new("", 96, basic());
            inst.name = b"seq\xff".to_vec();
            let elf = full_elf("_Z4mainPcPc", vec![inst]).build();
            let (i, p) = (insts(), pdi());
            let mut t = loose_table(&[
                Kernel::full_elf("main:seq?", &elf[..], 0, 1),
                Kernel::pdi_insts("pdi?", &i[..], &p[..], 32, 1),
            ]);
            replace_once(&mut t, b"main:seq?", b"main:seq\xff");
            replace_once(&mut t, b"pdi?", b"pdi\xfe");
            loads(new_with_section(Arch::Aie2p, &t))
        }
        "shared_elf_sizes" => {
            // Two entries share one ELF; one gives it a size that cuts off its section headers.
            let elf = two_instance_elf("a", "b");
            let mut t = loose_table(&[
                Kernel::full_elf("main:a", &elf[..], 0, 1),
                Kernel::full_elf("main:b", &elf[..], 0, 1),
            ]);
            let entry_b = 48 + 44;
            t[entry_b + 8..entry_b + 12].copy_from_slice(&64u32.to_le_bytes());
            with(
                Rocr::Undetermined,
                |r| matches!(r, Rule::SharedElfSizes { .. }),
                false,
                new_with_section(Arch::Aie2p, &t),
            )
        }
        "ctrltext_in_two_groups" => {
            // Both groups list .ctrltext.0; ROCr relocates it for the later group only, so the
            // earlier one has no PDI site.
            let mut second = Instance::new("second", 96, Vec::new());
            second.ctrl_of = Some(0);
            let elf = full_elf(
                "_Z4mainPcPc",
                vec![Instance::new("first", 96, basic()), second],
            )
            .build();
            refuses(
                |r| *r == Rule::NoPdiSite,
                false,
                full_elf_hsaco(&elf, &["main:first", "main:second"]),
            )
        }
        // --- stricter than ROCr, on purpose ---
        "note_malformed" => {
            let mut elf = one_instance_elf();
            // descsz 4 -> 2: the column count is no longer a u32.
            replace_once(
                &mut elf,
                b"\x04\0\0\0\x04\0\0\0\x06\0\0\0XRT\0",
                b"\x04\0\0\0\x02\0\0\0\x06\0\0\0XRT\0",
            );
            stricter(
                |r| matches!(r, Rule::FullElf(FullElfError::BadConfigurationNote(_))),
                true,
                full_elf_hsaco(&elf, &["main:sequence"]),
            )
        }
        "truncated_table" => {
            let mut elf = one_instance_elf();
            // .rela.dyn (3 entries) moved last and declared 4 bytes longer: its partial fourth
            // entry runs past the end of the file.
            let rela = section_index_elf32(&elf, ".rela.dyn");
            move_to_end_elf32(&mut elf, rela, 4);
            stricter(
                |r| matches!(r, Rule::FullElf(FullElfError::TruncatedTable(_))),
                true,
                full_elf_hsaco(&elf, &["main:sequence"]),
            )
        }
        "shentsize_72" => {
            let mut f = valid();
            f[0x3a] = 72;
            stricter(|r| *r == Rule::ShentSize(72), true, f)
        }
        "name_runs_past_shstrtab" => {
            // The name table is "\0.shstrtab\0aie2p\0"; cut its last byte off.
            let mut f = valid();
            let at = shdr(&f, 1) + 32; // .shstrtab's sh_size
            set_u64(&mut f, at, 16);
            stricter(|r| *r == Rule::UnterminatedSectionName(2), false, f)
        }
        "duplicate_group_name" => {
            let elf = two_instance_elf("s", "s");
            stricter(
                |r| matches!(r, Rule::FullElf(FullElfError::DuplicateKernel(_))),
                true,
                full_elf_hsaco(&elf, &["main:s"]),
            )
        }
        "empty_name" => {
            let (i, p) = (insts(), pdi());
            let t = loose_table(&[Kernel::pdi_insts("", &i[..], &p[..], 32, 1)]);
            stricter(
                |r| *r == Rule::EmptyName,
                true,
                new_with_section(Arch::Aie2p, &t),
            )
        }
        "kernarg_not_buffers" => {
            let (i, p) = (insts(), pdi());
            let t = loose_table(&[Kernel::pdi_insts("k", &i[..], &p[..], 4, 1)]);
            stricter(
                |r| *r == Rule::KernargSize(4),
                true,
                new_with_section(Arch::Aie2p, &t),
            )
        }
        "too_many_columns" => {
            let (i, p) = (insts(), pdi());
            let t = loose_table(&[Kernel::pdi_insts("k", &i[..], &p[..], 32, 9)]);
            refuses(
                |r| *r == Rule::TooManyColumns { cols: 9, agent: 8 },
                false,
                new_with_section(Arch::Aie2p, &t),
            )
        }
        other => panic!("no class {other}"),
    }
}

fn fixtures_dir() -> PathBuf {
    common::fixtures_dir().join("hsaco-classes")
}

/// `classes.tsv`: `name arch cols rocr agent`, one line per class in `CLASSES` order.
fn manifest_line(name: &str, c: &Class) -> String {
    let agent = if c.agent_loads { "loads" } else { "refuses" };
    format!("{name}\t{}\t{}\t{}\t{agent}", c.arch, c.cols, c.rocr.word())
}

fn writing() -> bool {
    std::env::var_os("NPU_HSACO_WRITE_CLASSES").is_some()
}

/// The check's verdict on the class's file is ROCr's, and the fixture holds the same bytes.
fn verify(name: &str) {
    let c = class(name);
    let report = check_bytes(&c.bytes, c.arch, c.cols);
    let text = report.to_string();
    match (&report.verdict, c.rule) {
        (Ok(_), None) => assert_eq!(c.rocr, Rocr::Loads, "{name}: {text}"),
        (Err(r), Some(rule)) => {
            assert!(rule(&r.violation.rule), "{name}: {text}");
            assert_eq!(Rocr::of(r.rocr()), c.rocr, "{name}: {text}");
            let result = text.lines().last().unwrap();
            let expected = match c.rocr {
                Rocr::Refuses => "-> HSA_STATUS_ERROR_",
                Rocr::Crashes => "-> no status: ROCr crashes or throws on this file",
                Rocr::Undetermined => "RESULT: refused here, ROCr may accept it: ",
                Rocr::LoadsStricterHere => "RESULT: refused here, ROCr accepts it: ",
                Rocr::Loads => unreachable!("a refusal"),
            };
            assert!(result.contains(expected), "{name}: {result}");
            if matches!(c.rocr, Rocr::Undetermined | Rocr::LoadsStricterHere) {
                assert!(result.contains(", because "), "{name}: {result}");
            }
        }
        (verdict, _) => panic!("{name}: expected ROCr to {:?}, got {verdict:?}", c.rocr),
    }
    let path = fixtures_dir().join(format!("{name}.hsaco"));
    if writing() {
        std::fs::create_dir_all(fixtures_dir()).unwrap();
        std::fs::write(&path, &c.bytes).unwrap();
    } else {
        assert!(
            common::read(&path) == c.bytes,
            "{} differs from its builder (NPU_HSACO_WRITE_CLASSES=1 rewrites it)",
            path.display()
        );
    }
}

macro_rules! classes {
    ($($name:ident),* $(,)?) => {
        const CLASSES: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                verify(stringify!($name));
            }
        )*
    };
}

classes!(
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
fn the_manifest_lists_every_class_with_its_verdicts() {
    let expected: String = CLASSES
        .iter()
        .map(|name| manifest_line(name, &class(name)) + "\n")
        .collect();
    let path = fixtures_dir().join("classes.tsv");
    if writing() {
        std::fs::create_dir_all(fixtures_dir()).unwrap();
        std::fs::write(&path, &expected).unwrap();
    }
    assert_eq!(String::from_utf8(common::read(&path)).unwrap(), expected);
}

// ---------------------------------------------------------------- the classes' neighbours

#[test]
fn program_headers_that_fit_or_are_absent_are_fine_and_a_truncated_table_is_not() {
    let base = container(&[aie2p(SHT_PROGBITS, table())]);
    let with_phdrs = |offset: u64, count: u16| {
        let mut f = base.clone();
        set_u64(&mut f, 0x20, offset);
        f[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        f[0x38..0x3a].copy_from_slice(&count.to_le_bytes());
        check_bytes(&f, Arch::Aie2p, 8)
            .verdict
            .map_err(|r| r.violation.rule)
    };
    // e_phoff 0: libelf counts no program headers.
    assert_eq!(with_phdrs(0, 3), Ok(1));
    // Inside the file (the table's bytes need not mean anything to ROCr).
    assert_eq!(with_phdrs(64, 1), Ok(1));
    let len = base.len() as u64;
    // One header fits, the second runs past the end: gelf_getphdr fails.
    assert!(matches!(
        with_phdrs(len - 60, 2),
        Err(Rule::ProgramHeaders { count: 2, .. })
    ));
    // Fewer than 56 bytes left: elf_getphdrnum trims the count to 0 and nothing is read.
    assert_eq!(with_phdrs(len - 50, 2), Ok(1));
}

#[test]
fn an_aie_section_of_another_type_is_seen_when_its_size_is_whole_entries() {
    // The 254-byte table padded to 256 bytes: whole 16-byte Elf64_Rel and 4-byte group words.
    let mut padded = table();
    padded.extend_from_slice(&[0, 0]);
    for sh_type in [SHT_REL, SHT_GROUP] {
        let f = container(&[aie2p(sh_type, padded.clone())]);
        assert_eq!(check_bytes(&f, Arch::Aie2p, 8).verdict, Ok(1), "{sh_type}");
    }
    // 264 bytes = 11 Elf64_Sym, but a symbol table must link to a string table (the hardened
    // image reader; the older one indexes past its section list when the link is absent).
    padded.resize(264, 0);
    let f = container(&[aie2p(SHT_SYMTAB, padded)]);
    assert_eq!(
        check_bytes(&f, Arch::Aie2p, 8)
            .verdict
            .unwrap_err()
            .violation
            .rule,
        Rule::SymbolTableLink {
            section: 2,
            link: 0
        }
    );
}

#[test]
fn wrapping_lengths_demangle_as_rocr_does() {
    use npu_hsaco::full_elf::demangle_kernel_name;
    // 2^64 + 4 wraps to 4.
    assert_eq!(
        demangle_kernel_name(b"_Z18446744073709551620mainPc"),
        b"main"
    );
    // 2^64 - 1: the end wraps below the symbol's size, and substr takes the rest.
    assert_eq!(demangle_kernel_name(b"_Z18446744073709551615abc"), b"abc");
    // 2^64 wraps to 0: unchanged.
    assert_eq!(
        demangle_kernel_name(b"_Z18446744073709551616abc"),
        b"_Z18446744073709551616abc"
    );
}

#[test]
fn entries_sharing_an_elf_with_sizes_that_agree_on_the_verdict_are_judged() {
    // The ELF with 8 bytes of padding: without them it still holds everything ROCr reads.
    let mut elf = two_instance_elf("a", "b");
    elf.extend_from_slice(&[0; 8]);
    let with_sizes = |size_a: u32, size_b: u32| {
        let mut t = loose_table(&[
            Kernel::full_elf("main:a", &elf[..], 0, 1),
            Kernel::full_elf("main:b", &elf[..], 0, 1),
        ]);
        for (entry, size) in [(48, size_a), (48 + 44, size_b)] {
            t[entry + 8..entry + 12].copy_from_slice(&size.to_le_bytes());
        }
        check_bytes(&new_with_section(Arch::Aie2p, &t), Arch::Aie2p, 8).verdict
    };
    let len = elf.len() as u32;
    // Both sizes load: whichever entry ROCr visits first, it loads the file.
    assert_eq!(with_sizes(len, len - 8), Ok(2));
    // Both sizes cut the section headers off: ROCr refuses whatever its order.
    let r = with_sizes(60, 64).unwrap_err();
    assert!(
        matches!(
            r.violation.rule,
            Rule::FullElf(FullElfError::MalformedSectionHeaders(_))
        ),
        "{r}"
    );
    assert_eq!(r.stage, Stage::Kernel);
    // One of each: the verdict depends on ROCr's order.
    assert!(matches!(
        with_sizes(len, 64).unwrap_err().violation.rule,
        Rule::SharedElfSizes { .. }
    ));
}

#[test]
fn only_the_later_group_gets_a_shared_control_code() {
    let mut second = Instance::new("second", 96, Vec::new());
    second.ctrl_of = Some(0);
    let elf = full_elf(
        "_Z4mainPcPc",
        vec![Instance::new("first", 96, basic()), second],
    )
    .build();
    // Without the earlier group's entry, ROCr loads the later one, with the relocations.
    let file = full_elf_hsaco(&elf, &["main:second"]);
    let report = check_bytes(&file, Arch::Aie2p, 8);
    assert!(report.accepted(), "{report}");
    assert!(
        report
            .to_string()
            .contains("args=2, effective kernarg=32, pdis=1"),
        "{report}"
    );
    // Packing the whole ELF is refused: its first kernel has no PDI site.
    let kernels = npu_hsaco::kernels_from_full_elf(&elf, None).unwrap();
    let entries: Vec<Kernel<'_>> = kernels
        .iter()
        .map(|k| k.to_kernel(None, None).unwrap())
        .collect();
    let err = pack::pack(None, Arch::Aie2p, &entries).unwrap_err();
    assert_eq!(err.violation().unwrap().rule, Rule::NoPdiSite);
    assert_eq!(
        err.violation().unwrap().kernel.as_deref(),
        Some("main:first")
    );
}
