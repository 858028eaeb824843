//! The ELF64 container: several architectures in one file, replacing a section, keeping other
//! sections intact, refusing files that cannot take a section.
//!
//! `tests/fixtures/` holds outputs of the reference packer's own container step, produced with
//! Debian llvm-objcopy 14.0.6 (the version used for the shared vectors) as
//! `llvm-objcopy --remove-section=A --add-section=A=SECTION --set-section-flags=A=noload,readonly IN OUT`:
//! * `two_arch.hsaco` = vector 01's `t.hsaco` plus vector 14's `aie2` section;
//! * `two_arch_aie2p_replaced.hsaco` = that file with `aie2p` replaced by vector 02's section;
//! * `plain_unordered_with_aie2p.elf` = `plain_unordered.elf` (a hand-made ELF64 whose section
//!   data is not in index order and has 4-byte alignment) plus vector 01's `aie2p` section.

mod common;

use common::elf_builder::gpu_like_code_object;
use common::{assert_bytes_eq, read, vectors_dir};
use npu_hsaco::container::{Container, llvm_string_table, new_with_section, replace_section};
use npu_hsaco::error::ContainerError;
use npu_hsaco::{Arch, Error, Rule, check, dump, parse};

fn fixture(name: &str) -> Vec<u8> {
    read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
}

fn section(vector: &str, arch: &str) -> Vec<u8> {
    read(
        vectors_dir()
            .join(vector)
            .join(format!("section_{arch}.bin")),
    )
}

#[test]
fn adding_a_second_architecture_matches_llvm_objcopy() {
    let one = read(vectors_dir().join("01_doc_example/t.hsaco"));
    let two = replace_section(&one, Arch::Aie2, &section("14_python_api_section", "aie2")).unwrap();
    assert_bytes_eq(&two, &fixture("two_arch.hsaco"), "two_arch.hsaco");
    let parsed = parse(&two).unwrap();
    let d = dump(&parsed);
    assert_eq!(d.exit_code(), 0, "{:?}", d.errors);
    assert!(
        d.stdout
            .starts_with("arch section: aie2\nversion: 1.0\n  kernel api_k0:"),
        "{}",
        d.stdout
    );
    assert!(
        d.stdout
            .contains("arch section: aie2p\nversion: 1.0\n  kernel k1:")
    );
    // aie2's api_k1 has no PDI: an aie2 agent refuses, an aie2p agent loads its own section.
    assert!(!check(&parsed, Arch::Aie2, 4).accepted());
    assert!(check(&parsed, Arch::Aie2p, 8).accepted());
}

#[test]
fn replacing_one_architecture_keeps_the_other_and_matches_llvm_objcopy() {
    let two = fixture("two_arch.hsaco");
    let replaced =
        replace_section(&two, Arch::Aie2p, &section("02_pdi_insts_basic", "aie2p")).unwrap();
    assert_bytes_eq(
        &replaced,
        &fixture("two_arch_aie2p_replaced.hsaco"),
        "two_arch_aie2p_replaced.hsaco",
    );
    let parsed = parse(&replaced).unwrap();
    assert_eq!(parsed.aie_sections.len(), 2, "replaced, not appended");
    let aie2 = parsed
        .container
        .raw_data(parsed.section(Arch::Aie2).unwrap().index)
        .unwrap();
    assert_eq!(aie2, section("14_python_api_section", "aie2").as_slice());
    let names: Vec<Vec<u8>> = parsed
        .kernels(Arch::Aie2p)
        .unwrap()
        .iter()
        .map(|k| k.name.to_vec())
        .collect();
    assert_eq!(names, [b"vsadd".to_vec()]);
}

#[test]
fn plain_files_are_laid_out_by_original_offset_like_llvm_objcopy() {
    let out = replace_section(
        &fixture("plain_unordered.elf"),
        Arch::Aie2p,
        &section("01_doc_example", "aie2p"),
    )
    .unwrap();
    assert_bytes_eq(
        &out,
        &fixture("plain_unordered_with_aie2p.elf"),
        "plain_unordered_with_aie2p.elf",
    );
}

#[test]
fn repacking_the_same_section_is_stable() {
    let s = section("06_dedup_order", "aie2p");
    let once = new_with_section(Arch::Aie2p, &s);
    assert_eq!(replace_section(&once, Arch::Aie2p, &s).unwrap(), once);
}

#[test]
fn string_table_follows_llvm_order_and_tail_merging() {
    let (table, offsets) = llvm_string_table(&[b".shstrtab", b"aie2p", b"aie2"]);
    assert_eq!(table, b"\0aie2p\0.shstrtab\0aie2\0");
    assert_eq!(offsets, [7, 1, 17]);
    let (table, offsets) = llvm_string_table(&[b"aie2p", b"2p", b"", b"aie2p"]);
    assert_eq!(table, b"\0aie2p\0");
    assert_eq!(offsets, [1, 4, 0, 1]);
}

/// Every section of `before` other than `arch` must be in `after` with the same header
/// (offset included, for files that are not re-laid out) and the same bytes.
fn assert_sections_kept(before: &[u8], after: &[u8], arch: Arch) {
    let b = Container::read(before).unwrap();
    let a = Container::read(after).unwrap();
    assert_eq!(b.header.e_phnum, a.header.e_phnum);
    let phdrs = usize::from(b.header.e_phnum) * 56;
    let phoff = b.header.e_phoff as usize;
    assert_eq!(
        before[phoff..phoff + phdrs],
        after[phoff..phoff + phdrs],
        "program headers unchanged"
    );
    for i in 1..b.sections.len() {
        if b.name(i) == Some(arch.name().as_bytes()) || i == usize::from(b.header.e_shstrndx) {
            continue;
        }
        assert_eq!(b.sections[i], a.sections[i], "section {i} header");
        assert!(b.contents(i) == a.contents(i), "section {i} bytes differ");
    }
}

#[test]
fn gpu_code_object_keeps_every_section_segment_and_index() {
    let gpu = gpu_like_code_object();
    let s2p = section("02_pdi_insts_basic", "aie2p");
    let with_aie2p = replace_section(&gpu, Arch::Aie2p, &s2p).unwrap();
    assert_sections_kept(&gpu, &with_aie2p, Arch::Aie2p);
    assert_eq!(
        with_aie2p[..0x28],
        gpu[..0x28],
        "GPU header (OSABI, type, machine, phoff) kept"
    );
    assert_eq!(
        with_aie2p[0x30..0x3a],
        gpu[0x30..0x3a],
        "e_flags and sizes kept"
    );

    let s2 = section("14_python_api_section", "aie2");
    let both = replace_section(&with_aie2p, Arch::Aie2, &s2).unwrap();
    assert_sections_kept(&with_aie2p, &both, Arch::Aie2);
    let s06 = section("06_dedup_order", "aie2p");
    let replaced = replace_section(&both, Arch::Aie2p, &s06).unwrap();
    assert_sections_kept(&both, &replaced, Arch::Aie2p);

    let parsed = parse(&replaced).unwrap();
    let c = &parsed.container;
    assert_eq!(
        c.sections.len(),
        Container::read(&gpu).unwrap().sections.len() + 2,
        "replaced in place"
    );
    assert_eq!(
        c.raw_data(parsed.section(Arch::Aie2p).unwrap().index)
            .unwrap(),
        s06.as_slice()
    );
    assert_eq!(
        c.raw_data(parsed.section(Arch::Aie2).unwrap().index)
            .unwrap(),
        s2.as_slice()
    );
    let d = dump(&parsed);
    assert_eq!(d.exit_code(), 0);
    assert!(d.stdout.contains("kernel zeta:") && d.stdout.contains("kernel api_k0:"));
    assert!(check(&parsed, Arch::Aie2p, 8).accepted());
    // The file does not grow without bound when repacked.
    let again = replace_section(&replaced, Arch::Aie2p, &s06).unwrap();
    assert_eq!(again.len(), replaced.len());
}

#[test]
fn files_that_cannot_take_a_section_are_refused() {
    let s = section("01_doc_example", "aie2p");
    let refused = |bytes: &[u8]| match replace_section(bytes, Arch::Aie2p, &s) {
        Err(Error::Container(e)) => e.to_string(),
        other => panic!("expected a container error, got {other:?}"),
    };
    assert!(
        refused(b"not an elf at all, but long enough to hold an ELF header ........")
            .contains("not an ELF")
    );
    let mut elf32 = read(vectors_dir().join("09_fullelf_basic/aie.elf"));
    assert!(refused(&elf32).contains("64-bit little-endian"));
    elf32.truncate(10);
    assert!(refused(&elf32).contains("not an ELF"));

    let good = read(vectors_dir().join("01_doc_example/t.hsaco"));
    let mut bad_shstrndx = good.clone();
    bad_shstrndx[0x3e] = 9;
    assert!(refused(&bad_shstrndx).contains("e_shstrndx 9"));
    let mut truncated = good.clone();
    truncated.truncate(good.len() - 1);
    assert!(refused(&truncated).contains("section header table"));
    let mut out_of_file = good.clone();
    // aie2p section (index 2) header: sh_size at 0xf0 + 2*64 + 32.
    out_of_file[0xf0 + 128 + 32..0xf0 + 128 + 40].copy_from_slice(&0xFFFF_u64.to_le_bytes());
    assert!(refused(&out_of_file).contains("section 2 lies outside the file"));
}

#[test]
fn reader_refuses_what_no_elf_reader_could_open() {
    assert_eq!(Container::read(b"\x7fELF").unwrap_err(), Rule::NotElf);
    let mut elf = read(vectors_dir().join("01_doc_example/t.hsaco"));
    elf[0x3a] = 40;
    // libelf reads the headers 64 bytes apart whatever e_shentsize says, and so does the
    // reader; a file to be rewritten must say 64.
    assert_eq!(Container::read(&elf).unwrap().sections.len(), 3);
    let s = section("01_doc_example", "aie2p");
    assert!(matches!(
        replace_section(&elf, Arch::Aie2p, &s),
        Err(Error::Container(ContainerError::Unreadable(
            Rule::ShentSize(40)
        )))
    ));
    elf[4] = 1;
    assert_eq!(
        Container::read(&elf).unwrap_err(),
        Rule::NotElf64Le { class: 1, data: 1 }
    );
}

#[test]
fn a_new_name_never_renames_sections_whose_names_were_unreadable() {
    // Found by fuzzing: an empty section-name table, so every sh_name is unreadable; appending
    // "aie2" at offset 0 would have named every section "aie2".
    let mut file = read(vectors_dir().join("01_doc_example/t.hsaco"));
    let shstrtab_size = 0xf0 + 64 + 32;
    file[shstrtab_size..shstrtab_size + 8].copy_from_slice(&0u64.to_le_bytes());
    let s = section("14_python_api_section", "aie2");
    let out = replace_section(&file, Arch::Aie2, &s).unwrap();
    let parsed = parse(&out).unwrap();
    assert_eq!(
        parsed.aie_sections.len(),
        1,
        "only the new section is named aie2"
    );
    assert_eq!(
        parsed
            .container
            .raw_data(parsed.aie_sections[0].index)
            .unwrap(),
        s.as_slice()
    );
    assert!(
        check(&parsed, Arch::Aie2, 4).verdict.is_err(),
        "api_k1 has no PDI"
    );
}

#[test]
fn a_new_name_never_completes_an_unterminated_name() {
    // Found by fuzzing: a name table "\0aie2" without its final NUL; terminating it would have
    // named the section pointing at "aie2" like the new one.
    let two = fixture("two_arch.hsaco");
    let mut file = two.clone();
    let shstrtab_size = 0x1b8 + 64 + 32;
    file[shstrtab_size..shstrtab_size + 8].copy_from_slice(&5u64.to_le_bytes());
    // Point section 2 at "aie2" (offset 1 of "\0aie2p...") so it reads "aie2" once terminated.
    let sh_name = 0x1b8 + 2 * 64;
    file[sh_name..sh_name + 4].copy_from_slice(&1u32.to_le_bytes());
    let s = section("14_python_api_section", "aie2");
    let out = replace_section(&file, Arch::Aie2, &s).unwrap();
    let parsed = parse(&out).unwrap();
    assert_eq!(parsed.aie_sections.len(), 1);
    assert_eq!(
        parsed
            .container
            .raw_data(parsed.aie_sections[0].index)
            .unwrap(),
        s.as_slice()
    );
}
