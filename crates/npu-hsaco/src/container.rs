//! The ELF64 container around the AIE sections: reading it the way ROCr does, creating one, and
//! adding or replacing one architecture's section.
//!
//! The reference packer creates a 208-byte ELF64 (`ET_REL`, `EM_AMDGPU`, a null section and
//! `.shstrtab`) and then runs `llvm-objcopy --remove-section=<arch> --add-section=<arch>=…
//! --set-section-flags=<arch>=noload,readonly`, which rewrites the whole file. For files that
//! hold only simple sections (no program headers, no symbol or relocation tables) this module
//! reproduces llvm-objcopy's output byte for byte: the ELF header, then each section's data in
//! order of its original file offset (new sections last) at its alignment, a rebuilt
//! `.shstrtab` (LLVM's string-table order: names sorted by their reversed bytes, descending,
//! with tail merging), and the section header table at the next 8-aligned offset. The AIE
//! section is `SHT_PROGBITS` with flags 0 and alignment 1.
//!
//! Any other file (a GPU code object with segments, symbols and relocations) is never re-laid
//! out: every byte that a section or segment covers stays where it is, the AIE section and, when
//! a name has to be added, a grown copy of `.shstrtab` are appended, and a new section header
//! table follows. An existing section of the architecture keeps its index and is pointed at the
//! new data, so no section index (and so no symbol or relocation) changes.

use std::borrow::Cow;

use object::LittleEndian as LE;
use object::elf::{
    ELFCLASS64, ELFDATA2LSB, ELFMAG, EV_CURRENT, FileHeader64, SHF_ALLOC, SHN_LORESERVE,
    SHT_NOBITS, SHT_NOTE, SHT_PROGBITS, SHT_STRTAB, SectionHeader64,
};
use object::pod::from_bytes;

use crate::arch::Arch;
use crate::error::{ContainerError, Result, Rule};

/// Size of an ELF64 header.
pub const EHDR_SIZE: usize = 64;
/// Size of an ELF64 section header.
pub const SHDR_SIZE: usize = 64;
/// `EM_AMDGPU`, the machine of a new container.
pub const EM_AMDGPU: u16 = 224;
const ET_REL: u16 = 1;

/// The ELF64 file header fields this crate reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfHeader {
    pub ident: [u8; 16],
    pub e_type: u16,
    pub e_machine: u16,
    pub e_version: u32,
    pub e_entry: u64,
    pub e_phoff: u64,
    pub e_shoff: u64,
    pub e_flags: u32,
    pub e_ehsize: u16,
    pub e_phentsize: u16,
    pub e_phnum: u16,
    pub e_shentsize: u16,
    pub e_shnum: u16,
    pub e_shstrndx: u16,
}

/// An ELF64 section header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SectionHeader {
    pub name: u32,
    pub sh_type: u32,
    pub flags: u64,
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
    pub link: u32,
    pub info: u32,
    pub addralign: u64,
    pub entsize: u64,
}

impl SectionHeader {
    fn from_raw(s: &SectionHeader64<LE>) -> SectionHeader {
        SectionHeader {
            name: s.sh_name.get(LE),
            sh_type: s.sh_type.get(LE).0,
            flags: s.sh_flags.get(LE).0,
            addr: s.sh_addr.get(LE),
            offset: s.sh_offset.get(LE),
            size: s.sh_size.get(LE),
            link: s.sh_link.get(LE),
            info: s.sh_info.get(LE),
            addralign: s.sh_addralign.get(LE),
            entsize: s.sh_entsize.get(LE),
        }
    }

    /// The header of an AIE section as llvm-objcopy writes it for `noload,readonly`.
    fn aie(name: u32, offset: u64, size: u64) -> SectionHeader {
        SectionHeader {
            name,
            sh_type: SHT_PROGBITS.0,
            offset,
            size,
            addralign: 1,
            ..SectionHeader::default()
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.name.to_le_bytes());
        out.extend_from_slice(&self.sh_type.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.addr.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.link.to_le_bytes());
        out.extend_from_slice(&self.info.to_le_bytes());
        out.extend_from_slice(&self.addralign.to_le_bytes());
        out.extend_from_slice(&self.entsize.to_le_bytes());
    }

    /// The section's file range, if it occupies one.
    fn file_range(&self) -> Option<(u64, u64)> {
        (self.sh_type != SHT_NOBITS.0).then(|| (self.offset, self.offset.saturating_add(self.size)))
    }
}

/// A readable ELF64 little-endian file: its header, section headers and section names.
#[derive(Debug, Clone)]
pub struct Container<'a> {
    bytes: &'a [u8],
    /// The file header.
    pub header: ElfHeader,
    /// Section headers in index order (index 0 included).
    pub sections: Vec<SectionHeader>,
    names: Vec<Option<&'a [u8]>>,
    shstrtab_readable: bool,
}

fn range(bytes: &[u8], offset: u64, size: u64) -> Option<&[u8]> {
    let end = offset.checked_add(size)?;
    bytes.get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
}

fn cstr_at(table: &[u8], offset: u32) -> Option<&[u8]> {
    let tail = table.get(offset as usize..)?;
    tail.iter().position(|&b| b == 0).map(|nul| &tail[..nul])
}

impl<'a> Container<'a> {
    /// Reads the header and section table; refuses what no ELF reader could open. The section
    /// headers are read 64 bytes apart whatever `e_shentsize` says, as libelf (and so ROCr)
    /// reads them; callers that write a file refuse another entry size themselves.
    pub fn read(bytes: &'a [u8]) -> Result<Container<'a>, Rule> {
        if bytes.len() < EHDR_SIZE || bytes[..4] != ELFMAG {
            return Err(Rule::NotElf);
        }
        let (h, _) = from_bytes::<FileHeader64<LE>>(bytes).map_err(|()| Rule::NotElf)?;
        if h.e_ident.class != ELFCLASS64 || h.e_ident.data != ELFDATA2LSB {
            return Err(Rule::NotElf64Le {
                class: h.e_ident.class.0,
                data: h.e_ident.data.0,
            });
        }
        let mut ident = [0u8; 16];
        ident.copy_from_slice(&bytes[..16]);
        let header = ElfHeader {
            ident,
            e_type: h.e_type.get(LE).0,
            e_machine: h.e_machine.get(LE).0,
            e_version: h.e_version.get(LE),
            e_entry: h.e_entry.get(LE),
            e_phoff: h.e_phoff.get(LE),
            e_shoff: h.e_shoff.get(LE),
            e_flags: h.e_flags.get(LE).0,
            e_ehsize: h.e_ehsize.get(LE),
            e_phentsize: h.e_phentsize.get(LE),
            e_phnum: h.e_phnum.get(LE),
            e_shentsize: h.e_shentsize.get(LE),
            e_shnum: h.e_shnum.get(LE),
            e_shstrndx: h.e_shstrndx.get(LE).0,
        };
        let count = header.e_shnum;
        let mut sections = Vec::with_capacity(usize::from(count));
        if count > 0 {
            let table = range(bytes, header.e_shoff, u64::from(count) * SHDR_SIZE as u64).ok_or(
                Rule::ShdrsOutOfFile {
                    offset: header.e_shoff,
                    count,
                },
            )?;
            for i in 0..usize::from(count) {
                let (raw, _) = from_bytes::<SectionHeader64<LE>>(&table[i * SHDR_SIZE..])
                    .expect("table bounds checked");
                sections.push(SectionHeader::from_raw(raw));
            }
        }
        let strtab = sections
            .get(usize::from(header.e_shstrndx))
            .filter(|_| header.e_shstrndx != 0)
            .and_then(|s| range(bytes, s.offset, s.size));
        let names = sections
            .iter()
            .map(|s| strtab.and_then(|t| cstr_at(t, s.name)))
            .collect();
        Ok(Container {
            bytes,
            header,
            sections,
            names,
            shstrtab_readable: strtab.is_some(),
        })
    }

    /// The whole file.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Whether `e_shstrndx` names a section-name table inside the file.
    pub fn shstrtab_readable(&self) -> bool {
        self.shstrtab_readable
    }

    /// Section `index`'s name, if it can be read.
    pub fn name(&self, index: usize) -> Option<&'a [u8]> {
        self.names.get(index).copied().flatten()
    }

    /// The bytes at the section's `sh_offset`/`sh_size`, whatever its type (ROCr reads them so),
    /// or `None` when they lie outside the file.
    pub fn raw_data(&self, index: usize) -> Option<&'a [u8]> {
        let s = self.sections.get(index)?;
        range(self.bytes, s.offset, s.size)
    }

    /// The section's contents: empty for `SHT_NOBITS`, as the reference dumper reads it.
    pub fn contents(&self, index: usize) -> Option<&'a [u8]> {
        if self.sections.get(index)?.sh_type == SHT_NOBITS.0 {
            Some(&[])
        } else {
            self.raw_data(index)
        }
    }

    /// ROCr's idea of the image size: the section header table's end, unless a section starts
    /// past `e_shoff`, in which case the end of the section with the largest offset (`SHT_NOBITS`
    /// counted as empty). 0 when `e_version` is not 1.
    pub fn rocr_elf_size(&self) -> u64 {
        if self.header.e_version != u32::from(EV_CURRENT.0) {
            return 0;
        }
        let mut max_offset = self.header.e_shoff;
        let mut total = max_offset
            .saturating_add(u64::from(self.header.e_shentsize) * u64::from(self.header.e_shnum));
        for s in &self.sections {
            if s.offset > max_offset {
                max_offset = s.offset;
                total = if s.sh_type == SHT_NOBITS.0 {
                    s.offset
                } else {
                    s.offset.saturating_add(s.size)
                };
            }
        }
        total
    }

    /// Index of the first section named `name`.
    pub fn find(&self, name: &[u8]) -> Option<usize> {
        (0..self.sections.len()).find(|&i| self.name(i) == Some(name))
    }
}

/// Builds an ELF string table the way LLVM's `StringTableBuilder` does for ELF: a leading NUL,
/// then the distinct strings sorted by their reversed bytes in descending order, a string that
/// is a suffix of the one placed before it sharing that one's tail. Returns the table and each
/// input's offset.
pub fn llvm_string_table(strings: &[&[u8]]) -> (Vec<u8>, Vec<u32>) {
    let mut distinct: Vec<&[u8]> = strings.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    distinct.sort_by(|a, b| b.iter().rev().cmp(a.iter().rev()));
    let mut table = vec![0u8];
    let mut placed: Vec<(&[u8], u32)> = Vec::with_capacity(distinct.len());
    let mut previous: &[u8] = &[];
    for s in distinct {
        if s.is_empty() {
            placed.push((s, 0));
            continue;
        }
        if previous.ends_with(s) {
            placed.push((s, (table.len() - s.len() - 1) as u32));
            continue;
        }
        placed.push((s, table.len() as u32));
        table.extend_from_slice(s);
        table.push(0);
        previous = s;
    }
    let offsets = strings
        .iter()
        .map(|s| {
            placed
                .iter()
                .find(|(p, _)| p == s)
                .expect("every string placed")
                .1
        })
        .collect();
    (table, offsets)
}

/// One section of a file to lay out as llvm-objcopy does.
struct Planned<'a> {
    name: &'a [u8],
    header: SectionHeader,
    data: Cow<'a, [u8]>,
    /// Where the data was in the input (`u64::MAX` for an added section, which goes last).
    original_offset: u64,
}

const NEW_SECTION: u64 = u64::MAX;

/// Lays out `header` and `sections` (index 1.. ; `shstrtab` is the index in `sections` of the
/// section-name table, whose data is rebuilt) as llvm-objcopy writes a file without segments.
fn objcopy_layout(header: &ElfHeader, mut sections: Vec<Planned<'_>>, shstrtab: usize) -> Vec<u8> {
    let names: Vec<&[u8]> = sections.iter().map(|s| s.name).collect();
    let (table, offsets) = llvm_string_table(&names);
    for (s, name) in sections.iter_mut().zip(offsets) {
        s.header.name = name;
    }
    sections[shstrtab].header.size = table.len() as u64;
    sections[shstrtab].data = Cow::Owned(table);

    let mut order: Vec<usize> = (0..sections.len()).collect();
    order.sort_by_key(|&i| sections[i].original_offset);
    let mut offset = EHDR_SIZE as u64;
    for &i in &order {
        let s = &mut sections[i];
        offset = offset.next_multiple_of(s.header.addralign.max(1));
        s.header.offset = offset;
        if s.header.sh_type != SHT_NOBITS.0 {
            offset += s.data.len() as u64;
        }
    }
    let shoff = offset.next_multiple_of(8);
    let shnum = sections.len() + 1;
    let mut out = Vec::with_capacity(shoff as usize + shnum * SHDR_SIZE);
    let mut ident = header.ident;
    ident[6] = EV_CURRENT.0;
    ident[9..].fill(0);
    out.extend_from_slice(&ident);
    out.extend_from_slice(&header.e_type.to_le_bytes());
    out.extend_from_slice(&header.e_machine.to_le_bytes());
    out.extend_from_slice(&u32::from(EV_CURRENT.0).to_le_bytes());
    out.extend_from_slice(&header.e_entry.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // e_phoff: no segments
    out.extend_from_slice(&shoff.to_le_bytes());
    out.extend_from_slice(&header.e_flags.to_le_bytes());
    out.extend_from_slice(&(EHDR_SIZE as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // e_phentsize
    out.extend_from_slice(&0u16.to_le_bytes()); // e_phnum
    out.extend_from_slice(&(SHDR_SIZE as u16).to_le_bytes());
    out.extend_from_slice(&(shnum as u16).to_le_bytes());
    out.extend_from_slice(&((shstrtab + 1) as u16).to_le_bytes());
    for &i in &order {
        let s = &sections[i];
        if s.header.sh_type != SHT_NOBITS.0 {
            out.resize(s.header.offset as usize, 0);
            out.extend_from_slice(&s.data);
        }
    }
    out.resize(shoff as usize, 0);
    SectionHeader::default().write(&mut out);
    for s in &sections {
        s.header.write(&mut out);
    }
    out
}

/// A new container holding only `section` as `arch`, byte-identical to what the reference
/// packer (template plus llvm-objcopy) writes for a file that did not exist.
pub fn new_with_section(arch: Arch, section: &[u8]) -> Vec<u8> {
    let mut ident = [0u8; 16];
    ident[..4].copy_from_slice(&ELFMAG);
    ident[4] = ELFCLASS64.0;
    ident[5] = ELFDATA2LSB.0;
    ident[6] = EV_CURRENT.0;
    let header = ElfHeader {
        ident,
        e_type: ET_REL,
        e_machine: EM_AMDGPU,
        e_version: 1,
        e_entry: 0,
        e_phoff: 0,
        e_shoff: 0,
        e_flags: 0,
        e_ehsize: EHDR_SIZE as u16,
        e_phentsize: 0,
        e_phnum: 0,
        e_shentsize: SHDR_SIZE as u16,
        e_shnum: 0,
        e_shstrndx: 0,
    };
    let shstrtab = Planned {
        name: b".shstrtab",
        header: SectionHeader {
            sh_type: SHT_STRTAB.0,
            addralign: 1,
            ..SectionHeader::default()
        },
        data: Cow::Borrowed(&[]),
        original_offset: EHDR_SIZE as u64,
    };
    let aie = Planned {
        name: arch.name().as_bytes(),
        header: SectionHeader::aie(0, 0, section.len() as u64),
        data: Cow::Borrowed(section),
        original_offset: NEW_SECTION,
    };
    objcopy_layout(&header, vec![shstrtab, aie], 0)
}

/// The largest section alignment a re-laid-out file honours.
const MAX_RELAYOUT_ALIGN: u64 = 1 << 16;

/// Whether llvm-objcopy's layout can be reproduced without touching any cross-reference:
/// no segments, and every section other than the name table is plain data.
fn is_plain(c: &Container<'_>) -> bool {
    let shstrndx = usize::from(c.header.e_shstrndx);
    c.header.e_phnum == 0
        && c.shstrtab_readable
        && c.sections.iter().enumerate().skip(1).all(|(i, s)| {
            let name_ok = c.name(i).is_some();
            // Re-aligning to an absurd boundary would blow the file up; keep such files as they are.
            let sane_align = s.addralign <= MAX_RELAYOUT_ALIGN;
            if i == shstrndx {
                return name_ok
                    && sane_align
                    && s.sh_type == SHT_STRTAB.0
                    && s.flags & SHF_ALLOC.0 == 0;
            }
            let simple_type = [SHT_PROGBITS.0, SHT_NOBITS.0, SHT_NOTE.0].contains(&s.sh_type);
            // SHF_INFO_LINK (0x40), SHF_LINK_ORDER (0x80), SHF_GROUP (0x200) refer to other sections.
            name_ok
                && simple_type
                && sane_align
                && s.link == 0
                && s.info == 0
                && s.flags & 0x2c0 == 0
        })
}

/// Adds `section` as `arch` to the container `existing`, replacing any section of that name;
/// every other section keeps its contents (and, for files with segments or symbol tables, its
/// index and file offset).
pub fn replace_section(existing: &[u8], arch: Arch, section: &[u8]) -> Result<Vec<u8>> {
    let c = Container::read(existing).map_err(ContainerError::Unreadable)?;
    if c.header.e_shnum != 0 && usize::from(c.header.e_shentsize) != SHDR_SIZE {
        return Err(ContainerError::Unreadable(Rule::ShentSize(c.header.e_shentsize)).into());
    }
    if c.header.e_shnum == 0
        || c.header.e_shnum >= SHN_LORESERVE
        || c.header.e_shstrndx >= SHN_LORESERVE
    {
        return Err(if c.header.e_shnum == 0 && c.header.e_shoff != 0 {
            ContainerError::ExtendedNumbering.into()
        } else {
            ContainerError::Unreadable(Rule::BadShstrndx(c.header.e_shstrndx)).into()
        });
    }
    if !c.shstrtab_readable {
        return Err(ContainerError::Unreadable(Rule::BadShstrndx(c.header.e_shstrndx)).into());
    }
    for (i, s) in c.sections.iter().enumerate().skip(1) {
        if s.sh_type != SHT_NOBITS.0 && c.raw_data(i).is_none() {
            return Err(ContainerError::SectionOutOfFile(i).into());
        }
    }
    let name = arch.name().as_bytes();
    if c.name(usize::from(c.header.e_shstrndx)) == Some(name) {
        return Err(ContainerError::NameTableNamedLikeArch(arch).into());
    }
    if is_plain(&c) {
        Ok(relayout(&c, name, section))
    } else {
        Ok(append_preserving(&c, name, section))
    }
}

fn relayout(c: &Container<'_>, name: &[u8], section: &[u8]) -> Vec<u8> {
    let shstrndx = usize::from(c.header.e_shstrndx);
    let mut planned = Vec::new();
    let mut shstrtab = 0;
    for (i, s) in c.sections.iter().enumerate().skip(1) {
        let section_name = c.name(i).expect("plain files have readable names");
        if section_name == name {
            continue;
        }
        if i == shstrndx {
            shstrtab = planned.len();
        }
        let data = if s.sh_type == SHT_NOBITS.0 {
            &[][..]
        } else {
            c.raw_data(i).expect("checked in file")
        };
        planned.push(Planned {
            name: section_name,
            header: *s,
            data: Cow::Borrowed(data),
            original_offset: s.offset,
        });
    }
    planned.push(Planned {
        name,
        header: SectionHeader::aie(0, 0, section.len() as u64),
        data: Cow::Borrowed(section),
        original_offset: NEW_SECTION,
    });
    objcopy_layout(&c.header, planned, shstrtab)
}

fn append_preserving(c: &Container<'_>, name: &[u8], section: &[u8]) -> Vec<u8> {
    let shstrndx = usize::from(c.header.e_shstrndx);
    let target = c.find(name);
    let strtab = c.raw_data(shstrndx).expect("readable");
    let existing_name = (0..strtab.len())
        .find(|&p| strtab[p..].starts_with(name) && strtab.get(p + name.len()) == Some(&0));
    let grow_names = target.is_none() && existing_name.is_none();

    // Keep every byte a segment or a kept section covers; drop an unreferenced tail (the old
    // section header table, and the replaced or regrown data when they were last).
    let mut live_end = EHDR_SIZE as u64;
    let h = &c.header;
    if h.e_phnum > 0 {
        let entry = u64::from(h.e_phentsize);
        live_end = live_end.max(h.e_phoff.saturating_add(u64::from(h.e_phnum) * entry));
        for i in 0..u64::from(h.e_phnum) {
            let at = h.e_phoff.saturating_add(i * entry);
            let ph = usize::try_from(at)
                .ok()
                .and_then(|at| c.bytes.get(at..at.checked_add(56)?));
            if let Some(ph) = ph {
                let offset = u64::from_le_bytes(ph[8..16].try_into().expect("8 bytes"));
                let filesz = u64::from_le_bytes(ph[32..40].try_into().expect("8 bytes"));
                live_end = live_end.max(offset.saturating_add(filesz));
            }
        }
    }
    for (i, s) in c.sections.iter().enumerate().skip(1) {
        if Some(i) == target || (grow_names && i == shstrndx) {
            continue;
        }
        if let Some((_, end)) = s.file_range() {
            live_end = live_end.max(end);
        }
    }
    let live_end = live_end.min(c.bytes.len() as u64) as usize;

    let mut out = c.bytes[..live_end].to_vec();
    let mut headers = c.sections.clone();
    let data_offset = out.len() as u64;
    out.extend_from_slice(section);
    match target {
        Some(i) => {
            let keep_name = headers[i].name;
            headers[i] = SectionHeader::aie(keep_name, data_offset, section.len() as u64);
        }
        None => {
            let name_offset = match existing_name {
                Some(p) => p as u32,
                None => {
                    // Start the name where no existing sh_name points, after a NUL, so that no
                    // other section (e.g. one whose name was unreadable) takes the new name. An
                    // unterminated tail gets a byte no architecture name ends with first, so a
                    // name that was unreadable cannot turn into an architecture name either.
                    let mut grown = strtab.to_vec();
                    if grown.last() != Some(&0) {
                        grown.extend_from_slice(&[1, 0]);
                    }
                    while headers.iter().any(|h| h.name as usize == grown.len()) {
                        grown.push(0);
                    }
                    let name_offset = grown.len() as u32;
                    grown.extend_from_slice(name);
                    grown.push(0);
                    let s = &mut headers[shstrndx];
                    s.offset = out.len() as u64;
                    s.size = grown.len() as u64;
                    out.extend_from_slice(&grown);
                    name_offset
                }
            };
            headers.push(SectionHeader::aie(
                name_offset,
                data_offset,
                section.len() as u64,
            ));
        }
    }
    let shoff = (out.len() as u64).next_multiple_of(8);
    out.resize(shoff as usize, 0);
    for s in &headers {
        s.write(&mut out);
    }
    out[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    out[0x3a..0x3c].copy_from_slice(&(SHDR_SIZE as u16).to_le_bytes());
    out[0x3c..0x3e].copy_from_slice(&(headers.len() as u16).to_le_bytes());
    out
}

/// Packs `section` as `arch` into `existing` (or a new container when there is none).
pub fn with_section(existing: Option<&[u8]>, arch: Arch, section: &[u8]) -> Result<Vec<u8>> {
    match existing {
        None => Ok(new_with_section(arch, section)),
        Some(bytes) => replace_section(bytes, arch, section),
    }
}
