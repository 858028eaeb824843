//! ROCr's view of the ELF64 container: what its ELF image reader refuses or crashes on, which
//! sections it can see, and how it reads their names.
//!
//! ROCr opens an hsaco with `amd::elf::GElfImage::initAsBuffer` (`libamdhsacode/amd_elf_image.cpp`),
//! which hands the bytes to elfutils' libelf (`elf_memory`) and then walks every section in
//! `pullElf`; `AieCode::IsAieCodeObject` and `AieCode::Create` (`core/runtime/amd_aie_code.cpp`)
//! then look for the AIEK section through that image. Versions read: ROCm/rocm-systems
//! `amd_elf_image.cpp` @ 92bf721e ("develop") and the hardened copy in the fork
//! StefanBS/rocm-systems @ b76e4ecb (bounds-checked `sh_link`/`sh_info`, whose
//! `amd_aie_code.cpp` @ 04441d8e is the newest AIE parser found); elfutils `libelf/elf_begin.c`
//! (`determine_kind`, `file_read_elf`), `elf_getphdrnum.c`, `elf32_getphdr.c` and
//! `elf_getdata.c` (`__libelf_set_rawdata_wrlock`). A file either version refuses or crashes on
//! is refused here.
//!
//! What matters, in the order `pullElf` meets it:
//!
//! * libelf only recognises an ELF whose `e_ident[EI_VERSION]` is 1 (`determine_kind`);
//! * the section header table must lie in the file (`file_read_elf`; [`Container::read`]);
//! * `e_shstrndx` must be a section index (`GElfSection::pull` fails otherwise);
//! * a section of type `SHT_NULL` other than section 0 is stored as a null pointer that the next
//!   loop dereferences (a crash);
//! * a symbol table's `sh_link` must name a string table, and a relocation section's `sh_link` a
//!   symbol table and its `sh_info` a section (the hardened `pullData`; "develop" indexes past
//!   its section vector instead);
//! * an `SHT_RELA` section libelf cannot read is dereferenced anyway (`assert(lData)`, compiled
//!   out in release builds: a crash);
//! * a program header table that starts at or past the end of the file, or runs past it, makes
//!   `elf_getphdrnum`/`gelf_getphdr` fail.
//!
//! libelf "cannot read" a section (`elf_getdata` returns NULL) when it is not `SHT_NOBITS`, not
//! empty, and either lies outside the file or its size is not a whole number of the entries its
//! type implies (24 bytes for `SHT_SYMTAB`/`SHT_RELA`, 16 for `SHT_REL`, 4 for `SHT_GROUP`, …).
//! ROCr sees such a section with size 0, so an AIEK table stored in one is invisible.

use object::elf::{
    EV_CURRENT, SHF_COMPRESSED, SHT_DYNAMIC, SHT_DYNSYM, SHT_FINI_ARRAY, SHT_GNU_LIBLIST,
    SHT_GNU_VERNEED, SHT_GNU_VERSYM, SHT_GROUP, SHT_HASH, SHT_INIT_ARRAY, SHT_NOBITS, SHT_NULL,
    SHT_PREINIT_ARRAY, SHT_REL, SHT_RELA, SHT_STRTAB, SHT_SUNW_move as SHT_SUNW_MOVE,
    SHT_SUNW_syminfo as SHT_SUNW_SYMINFO, SHT_SYMTAB, SHT_SYMTAB_SHNDX, SectionType,
};

use crate::container::Container;
use crate::error::Rule;

/// `EI_VERSION`'s index in `e_ident`.
const EI_VERSION: usize = 6;
/// `e_phnum` meaning "the count is in section 0's `sh_info`".
const PN_XNUM: u16 = 0xffff;
/// Size of an ELF64 program header.
const PHDR_SIZE: u64 = 56;
/// `EM_ALPHA` and `EM_S390`, whose ELF64 hash tables have 8-byte entries in libelf.
const EM_ALPHA: u16 = 0x9026;
const EM_S390: u16 = 22;

/// The size libelf requires a section's size to be a multiple of, for an ELF64 file: the size
/// of the entries its type holds (`shtype_map` and `__libelf_type_sizes` in `elf_getdata.c`),
/// 1 for byte data, notes, version definitions, GNU hash tables and compressed sections.
pub fn libelf_entry_size(sh_type: u32, flags: u64, machine: u16) -> u64 {
    if flags & SHF_COMPRESSED.0 != 0 {
        return 1;
    }
    // Everything else, notes, version definitions and (for ELF64) GNU hash tables included, is
    // read as bytes.
    match SectionType(sh_type) {
        SHT_SYMTAB | SHT_DYNSYM | SHT_RELA => 24,
        SHT_HASH if machine == EM_ALPHA || machine == EM_S390 => 8,
        SHT_HASH | SHT_GROUP | SHT_SYMTAB_SHNDX | SHT_SUNW_SYMINFO => 4,
        SHT_DYNAMIC | SHT_REL | SHT_GNU_VERNEED | SHT_SUNW_MOVE => 16,
        SHT_INIT_ARRAY | SHT_FINI_ARRAY | SHT_PREINIT_ARRAY => 8,
        SHT_GNU_VERSYM => 2,
        SHT_GNU_LIBLIST => 20,
        _ => 1,
    }
}

/// What `elf_getdata` returns for section `index`: `None` when it fails, else the size of the
/// data (`sh_size`, also for `SHT_NOBITS`, whose data has no bytes).
pub fn libelf_size(c: &Container<'_>, index: usize) -> Option<u64> {
    let s = c.sections.get(index)?;
    if s.size == 0 || s.sh_type == SHT_NOBITS.0 {
        return Some(s.size);
    }
    let entry = libelf_entry_size(s.sh_type, s.flags, c.header.e_machine);
    let len = c.bytes().len() as u64;
    (s.size.is_multiple_of(entry) && s.offset <= len && len - s.offset >= s.size).then_some(s.size)
}

/// The bytes libelf gives for section `index`, when they are file bytes (`None` when
/// `elf_getdata` fails or the section is `SHT_NOBITS`).
fn libelf_bytes<'a>(c: &Container<'a>, index: usize) -> Option<&'a [u8]> {
    libelf_size(c, index)?;
    if c.sections[index].sh_type == SHT_NOBITS.0 {
        return None;
    }
    c.raw_data(index)
}

/// Applies `GElfImage::initAsBuffer`'s rules (after the section header table, which
/// [`Container::read`] already required to lie in the file); the error is the first rule broken,
/// in the order ROCr meets them.
pub fn open(c: &Container<'_>) -> Result<(), Rule> {
    let ident_version = c.header.ident[EI_VERSION];
    if ident_version != EV_CURRENT.0 {
        return Err(Rule::IdentVersion(ident_version));
    }
    let count = c.sections.len();
    let shstrndx = usize::from(c.header.e_shstrndx);
    if shstrndx >= count {
        return Err(Rule::BadShstrndx(c.header.e_shstrndx));
    }
    // Every section but the name table gets an object; SHT_NULL gets a null pointer, which the
    // first loop over the sections (from index 1) dereferences.
    let others = || (1..count).filter(move |&i| i != shstrndx);
    if let Some(i) = others().find(|&i| c.sections[i].sh_type == SHT_NULL.0) {
        return Err(Rule::NullSection(i));
    }
    // Section links are 16-bit in the image reader (`getStringTable(uint16_t)`).
    let type_at = |link: u32| -> Option<u32> {
        let i = usize::from(link as u16);
        let s = c.sections.get(i)?;
        // Section 0 is stored as a null pointer when it is SHT_NULL (it always is here unless
        // it is the name table itself).
        (i != 0 || shstrndx == 0 || s.sh_type != SHT_NULL.0).then_some(s.sh_type)
    };
    for i in others() {
        let s = &c.sections[i];
        if (s.sh_type == SHT_SYMTAB.0 || s.sh_type == SHT_DYNSYM.0)
            && type_at(s.link) != Some(SHT_STRTAB.0)
        {
            return Err(Rule::SymbolTableLink {
                section: i,
                link: s.link,
            });
        }
    }
    for i in others() {
        let s = &c.sections[i];
        if s.sh_type != SHT_RELA.0 {
            continue;
        }
        let symbols = type_at(s.link);
        if s.info as usize >= count
            || !(symbols == Some(SHT_SYMTAB.0) || symbols == Some(SHT_DYNSYM.0))
        {
            return Err(Rule::RelocationLinks {
                section: i,
                link: s.link,
                info: s.info,
            });
        }
        if libelf_size(c, i).is_none() {
            return Err(Rule::UnreadableRelocations(i));
        }
    }
    program_headers(c)
}

/// `elf_getphdrnum` and one `gelf_getphdr` per header it reports.
fn program_headers(c: &Container<'_>) -> Result<(), Rule> {
    let h = &c.header;
    let mut count = u64::from(h.e_phnum);
    if h.e_phnum == PN_XNUM
        && let Some(first) = c.sections.first()
    {
        count = u64::from(first.info);
    }
    if h.e_phoff == 0 || count == 0 {
        return Ok(());
    }
    let len = c.bytes().len() as u64;
    let refuse = Err(Rule::ProgramHeaders {
        offset: h.e_phoff,
        count,
    });
    if h.e_phoff >= len {
        return refuse;
    }
    // elf_getphdrnum trims the count to what fits; reading any header then needs the whole
    // declared table in the file.
    let fits = (len - h.e_phoff) / PHDR_SIZE;
    if count.min(fits) > 0 && count.saturating_mul(PHDR_SIZE) > len - h.e_phoff {
        return refuse;
    }
    Ok(())
}

/// The size ROCr sees for a section (`Section::size()`, libelf's data size, 0 when libelf
/// cannot read it).
pub fn section_size(c: &Container<'_>, index: usize) -> u64 {
    libelf_size(c, index).unwrap_or(0)
}

/// A section name as `GElfSection::Name()` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name<'a> {
    /// Terminated inside the section-name table.
    Terminated(&'a [u8]),
    /// Not terminated inside the table: ROCr reads on into the following bytes of the file,
    /// which give this name.
    RunsPastTable(&'a [u8]),
}

impl<'a> Name<'a> {
    /// The name ROCr compares.
    pub fn bytes(self) -> &'a [u8] {
        match self {
            Name::Terminated(b) | Name::RunsPastTable(b) => b,
        }
    }
}

/// Section `index`'s name as ROCr reads it: a `std::string` built from the pointer
/// `getString(sh_name)` returns. That pointer is null (ROCr throws) when the table is unreadable
/// or `sh_name` lies outside it; otherwise the string runs to the next NUL, inside the table or
/// not (ROCr faults when none follows in the file).
pub fn section_name<'a>(c: &Container<'a>, index: usize) -> Result<Name<'a>, Rule> {
    let shstrndx = c.header.e_shstrndx;
    let table = libelf_bytes(c, usize::from(shstrndx))
        .filter(|t| !t.is_empty())
        .ok_or(Rule::UnreadableShstrtab(shstrndx))?;
    let offset = c.sections[index].name as usize;
    if offset >= table.len() {
        return Err(Rule::UnreadableSectionName(index));
    }
    if let Some(nul) = table[offset..].iter().position(|&b| b == 0) {
        return Ok(Name::Terminated(&table[offset..offset + nul]));
    }
    let start = c.sections[usize::from(shstrndx)].offset as usize + offset;
    let rest = &c.bytes()[start..];
    let nul = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or(Rule::UnreadableSectionName(index))?;
    Ok(Name::RunsPastTable(&rest[..nul]))
}
