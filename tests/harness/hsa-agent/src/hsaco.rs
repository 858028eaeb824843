//! The agent's own small reader of AIE hsaco files — independent of the driver's hsaco crate,
//! so a bug there cannot hide behind the same bug here. It applies ROCr's load rules: what
//! ROCr's ELF image reader (`amd_elf_image.cpp` over libelf) refuses or crashes on, the arch
//! section found by name among the sections libelf can read, the AIEK header, table and bounds,
//! PdiInsts with a PDI and whole 32-bit words, the column count, and for FullElf the instance's
//! control code found through the ELF32's COMDAT groups as ROCr's `aie_elf::Parse` finds it.
//! The rules and their sources are listed in `tests/harness/README.md`.

use std::collections::HashMap;
use std::collections::HashSet;

const AIEK_MAGIC: u32 = 0x4B45_4941;
const HEADER_SIZE: u32 = 48;
const ENTRY_SIZE: u32 = 44;
const KIND_PDI_INSTS: u32 = 0;
const KIND_FULL_ELF: u32 = 1;
const OSABI_AIE2P: u8 = 0x45;
const GRP_COMDAT: u32 = 1;
const SHT_NULL: u32 = 0;
const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_RELA: u32 = 4;
const SHT_NOBITS: u32 = 8;
const SHT_DYNSYM: u32 = 11;
const SHT_GROUP: u32 = 17;
const SHF_COMPRESSED: u64 = 0x800;

/// Why a code object was refused, and the HSA status ROCr would return.
#[derive(Debug)]
pub struct Refusal {
    pub incompatible: bool,
    pub rule: String,
}

fn invalid(rule: impl Into<String>) -> Refusal {
    Refusal {
        incompatible: false,
        rule: rule.into(),
    }
}

/// What the kernel runs: the harness decodes its program from this.
#[derive(Debug, Clone)]
pub enum Code {
    /// The instruction stream of a PdiInsts kernel.
    Insts(Vec<u8>),
    /// The control code of a full-ELF kernel instance.
    Control(Vec<u8>),
}

impl Code {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Code::Insts(b) | Code::Control(b) => b,
        }
    }
}

/// An external variable a full-ELF kernel relocates against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalVariable {
    pub name: String,
    pub size: u64,
}

/// One kernel of the agent's arch section, checked.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The name (invalid UTF-8 replaced; ROCr compares bytes, the agent's symbol table text).
    pub name: String,
    pub code: Code,
    pub pdi_size: usize,
    /// PdiInsts: where the PDI lies in the blob pool (kernels sharing one PDI share it).
    pub pdi_offset: Option<usize>,
    pub kernarg_size: u32,
    /// For FullElf: the argument count the control code's relocations imply.
    pub elf_args: Option<u32>,
    pub variables: Vec<ExternalVariable>,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off.checked_add(4)?)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    b.get(off..off.checked_add(2)?)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from(u32_at(b, off)?) | u64::from(u32_at(b, off + 4)?) << 32)
}

fn slice(b: &[u8], off: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(off).ok()?;
    b.get(start..start.checked_add(usize::try_from(len).ok()?)?)
}

/// The bytes up to the first NUL of `b`, if it has one.
fn c_string(b: &[u8]) -> Option<&[u8]> {
    b.iter().position(|&c| c == 0).map(|n| &b[..n])
}

/// Reads the kernels of the `arch` section of `hsaco` for an agent with `columns` columns.
pub fn read(hsaco: &[u8], arch: &str, columns: u32) -> Result<Vec<Kernel>, Refusal> {
    let section = arch_section(hsaco, arch)?;
    let entries = parse_section(section)?;
    entries
        .into_iter()
        .map(|e| load_entry(section, e, arch, columns))
        .collect()
}

/// An ELF64 section header, as ROCr's libelf reads it (64 bytes apart, whatever
/// `e_shentsize` says).
struct Shdr {
    name: u32,
    kind: u32,
    flags: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
}

/// The entry sizes libelf divides a section's size by, per section type, for ELF64
/// (`elf_getdata.c`: `shtype_map`, `__libelf_type_sizes`); other types are bytes.
const LIBELF_ENTRY_SIZES: [(u32, u64); 17] = [
    (2, 24),           // SHT_SYMTAB
    (4, 24),           // SHT_RELA
    (5, 4),            // SHT_HASH (8 on Alpha and S/390, not AIE hosts)
    (6, 16),           // SHT_DYNAMIC
    (9, 16),           // SHT_REL
    (11, 24),          // SHT_DYNSYM
    (14, 8),           // SHT_INIT_ARRAY
    (15, 8),           // SHT_FINI_ARRAY
    (16, 8),           // SHT_PREINIT_ARRAY
    (17, 4),           // SHT_GROUP
    (18, 4),           // SHT_SYMTAB_SHNDX
    (0x6fff_fff7, 20), // SHT_GNU_LIBLIST
    (0x6fff_fffa, 16), // SHT_SUNW_move
    (0x6fff_fffc, 4),  // SHT_SUNW_syminfo
    (0x6fff_fffe, 16), // SHT_GNU_verneed
    (0x6fff_ffff, 2),  // SHT_GNU_versym
    (7, 1),            // SHT_NOTE
];

/// The section's bytes when libelf can read it (`elf_getdata` succeeds), empty for an empty
/// or `SHT_NOBITS` section (whose size libelf still reports).
fn libelf_data<'a>(hsaco: &'a [u8], s: &Shdr) -> Option<&'a [u8]> {
    if s.size == 0 || s.kind == SHT_NOBITS {
        return Some(&[]);
    }
    let entry = if s.flags & SHF_COMPRESSED != 0 {
        1
    } else {
        LIBELF_ENTRY_SIZES
            .iter()
            .find(|(kind, _)| *kind == s.kind)
            .map_or(1, |(_, size)| *size)
    };
    if !s.size.is_multiple_of(entry) {
        return None;
    }
    slice(hsaco, s.offset, s.size)
}

/// The first section named `arch` that ROCr's `FindArchSection` accepts, after the checks
/// ROCr's ELF image reader makes while opening the file.
fn arch_section<'a>(hsaco: &'a [u8], arch: &str) -> Result<&'a [u8], Refusal> {
    if hsaco.len() < 64 || !hsaco.starts_with(b"\x7fELF") {
        return Err(invalid("the code object is not an ELF file"));
    }
    if hsaco[4] != 2 || hsaco[5] != 1 {
        return Err(invalid(
            "the hsaco container must be a little-endian ELF64 file",
        ));
    }
    if hsaco[6] != 1 {
        return Err(invalid(
            "e_ident[EI_VERSION] must be 1: libelf does not open the file otherwise",
        ));
    }
    let field16 = |off| u16_at(hsaco, off).unwrap_or(0);
    let (phoff, shoff) = (
        u64_at(hsaco, 32).unwrap_or(0),
        u64_at(hsaco, 40).unwrap_or(0),
    );
    let (phnum, shentsize, shnum, shstrndx) = (field16(56), field16(58), field16(60), field16(62));
    let table = slice(hsaco, shoff, 64 * u64::from(shnum))
        .ok_or_else(|| invalid("the section header table lies outside the file"))?;
    let shdrs: Vec<Shdr> = table
        .chunks_exact(64)
        .map(|h| Shdr {
            name: u32_at(h, 0).unwrap_or(0),
            kind: u32_at(h, 4).unwrap_or(0),
            flags: u64_at(h, 8).unwrap_or(0),
            offset: u64_at(h, 24).unwrap_or(0),
            size: u64_at(h, 32).unwrap_or(0),
            link: u32_at(h, 40).unwrap_or(0),
            info: u32_at(h, 44).unwrap_or(0),
        })
        .collect();
    let names_index = usize::from(shstrndx);
    if names_index >= shdrs.len() {
        return Err(invalid("e_shstrndx is not a section index"));
    }
    // The image reader walks every section from index 1 but the name table.
    let walked = || (1..shdrs.len()).filter(|&i| i != names_index);
    if let Some(i) = walked().find(|&i| shdrs[i].kind == SHT_NULL) {
        return Err(invalid(format!(
            "section {i} has type SHT_NULL: ROCr's ELF reader dereferences a null section for it"
        )));
    }
    // Links are 16-bit there; section 0 is a null object unless it is the name table.
    let linked_type = |link: u32| {
        let i = usize::from(link as u16);
        shdrs
            .get(i)
            .filter(|s| i != 0 || names_index == 0 || s.kind != SHT_NULL)
            .map(|s| s.kind)
    };
    for i in walked() {
        let s = &shdrs[i];
        if matches!(s.kind, SHT_SYMTAB | SHT_DYNSYM) && linked_type(s.link) != Some(SHT_STRTAB) {
            return Err(invalid(format!(
                "symbol table {i} does not link to a string table"
            )));
        }
    }
    for i in walked().filter(|&i| shdrs[i].kind == SHT_RELA) {
        let s = &shdrs[i];
        if s.info as usize >= shdrs.len()
            || !matches!(linked_type(s.link), Some(SHT_SYMTAB | SHT_DYNSYM))
        {
            return Err(invalid(format!(
                "relocation section {i} does not name a symbol table and a section"
            )));
        }
        if libelf_data(hsaco, s).is_none() {
            return Err(invalid(format!(
                "relocation section {i} cannot be read: ROCr's ELF reader dereferences its missing data"
            )));
        }
    }
    let phnum = if phnum == 0xffff {
        shdrs.first().map_or(0, |s| u64::from(s.info))
    } else {
        u64::from(phnum)
    };
    let len = hsaco.len() as u64;
    if phoff != 0 && phnum != 0 {
        let room = len.saturating_sub(phoff);
        if phoff >= len || (room >= 56 && phnum * 56 > room) {
            return Err(invalid(
                "the program header table does not fit in the file (libelf refuses it)",
            ));
        }
    }
    if u32_at(hsaco, 20) != Some(1) {
        return Err(invalid(
            "e_version must be 1: ROCr sizes the image as 0 otherwise and finds no section",
        ));
    }
    // ROCr's `ElfSize`: the end of the section at the largest offset past the header table.
    let mut image = (shoff, shoff + u64::from(shentsize) * u64::from(shnum));
    for s in &shdrs {
        if s.offset > image.0 {
            let end = if s.kind == SHT_NOBITS { 0 } else { s.size };
            image = (s.offset, s.offset.saturating_add(end));
        }
    }
    let names = libelf_data(hsaco, &shdrs[names_index])
        .filter(|t| !t.is_empty() && shdrs[names_index].kind != SHT_NOBITS)
        .ok_or_else(|| invalid("the section-name table cannot be read: ROCr throws"))?;
    let mut any = false;
    for (i, s) in shdrs.iter().enumerate() {
        let size = libelf_data(hsaco, s).map_or(0, |_| s.size);
        let Some(bytes) = slice(hsaco, s.offset, s.size) else {
            continue;
        };
        if size < u64::from(HEADER_SIZE)
            || s.offset > image.1
            || size > image.1 - s.offset
            || u32_at(bytes, 0) != Some(AIEK_MAGIC)
        {
            continue;
        }
        any = true;
        let name = names
            .get(s.name as usize..)
            .ok_or_else(|| invalid(format!("section {i}'s name lies outside the name table")))?;
        let name = c_string(name).ok_or_else(|| {
            invalid(format!(
                "section {i}'s name is not terminated inside the name table"
            ))
        })?;
        if name == arch.as_bytes() {
            return Ok(bytes);
        }
    }
    if !any {
        return Err(invalid(
            "no section libelf can read carries the AIEK magic: not an AIE code object",
        ));
    }
    Err(Refusal {
        incompatible: true,
        rule: format!("the code object has no AIE section for this agent's arch {arch:?}"),
    })
}

struct Entry {
    name: Vec<u8>,
    insts: (usize, usize),
    pdi: (usize, usize),
    kernarg_size: u32,
    num_cols: u32,
    kind: u32,
}

fn parse_section(s: &[u8]) -> Result<Vec<Entry>, Refusal> {
    let field = |off: usize| u32_at(s, off).unwrap_or(0);
    let size = s.len() as u64;
    if u16_at(s, 4) != Some(1) {
        return Err(invalid("AIE section: version_major must be 1"));
    }
    let (header_size, count, entry_size) = (field(8), field(12), field(16));
    let (st_off, st_size, pool_off) = (field(20), field(24), field(28));
    if header_size < HEADER_SIZE || entry_size < ENTRY_SIZE {
        return Err(invalid(
            "AIE section: header or entry size below 48/44 bytes",
        ));
    }
    let table_end = u64::from(header_size) + u64::from(count) * u64::from(entry_size);
    if table_end > size {
        return Err(invalid(
            "AIE section: the kernel table runs past the section",
        ));
    }
    let st_end = u64::from(st_off) + u64::from(st_size);
    if u64::from(st_off) < table_end || st_end > size {
        return Err(invalid("AIE section: the string table is out of place"));
    }
    if u64::from(pool_off) < st_end || u64::from(pool_off) > size {
        return Err(invalid("AIE section: the blob pool is out of place"));
    }
    if count == 0 {
        return Err(invalid("AIE section: it holds no kernels"));
    }
    let strings = &s[st_off as usize..st_end as usize];
    let in_pool = |off: u32, len: u32| {
        u64::from(off) >= u64::from(pool_off) && u64::from(off) + u64::from(len) <= size
    };
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    for i in 0..count as usize {
        let e = header_size as usize + i * entry_size as usize;
        let f = |k: usize| field(e + 4 * k);
        let (name_off, insts_off, insts_size, pdi_off, pdi_size) = (f(0), f(1), f(2), f(3), f(4));
        let (kernarg_size, num_cols, kind) = (f(5), f(6), f(7));
        let rest = strings
            .get(name_off as usize..)
            .ok_or_else(|| invalid(format!("AIE section: kernel {i} names no string")))?;
        let name = c_string(rest)
            .ok_or_else(|| invalid(format!("AIE section: kernel {i}'s name has no NUL")))?
            .to_vec();
        let shown = String::from_utf8_lossy(&name).into_owned();
        if insts_size == 0 {
            return Err(invalid(format!(
                "kernel {shown:?}: empty instruction stream"
            )));
        }
        if kind == KIND_PDI_INSTS && insts_size % 4 != 0 {
            return Err(invalid(format!(
                "kernel {shown:?}: PdiInsts instructions must be whole 32-bit words, got {insts_size} bytes"
            )));
        }
        if !in_pool(insts_off, insts_size) {
            return Err(invalid(format!(
                "kernel {shown:?}: instructions outside the blob pool"
            )));
        }
        if pdi_size != 0 && !in_pool(pdi_off, pdi_size) {
            return Err(invalid(format!(
                "kernel {shown:?}: PDI outside the blob pool"
            )));
        }
        if pdi_size == 0 && pdi_off != 0 {
            return Err(invalid(format!(
                "kernel {shown:?}: pdi_offset set without a PDI"
            )));
        }
        if kind == KIND_FULL_ELF && pdi_size != 0 {
            return Err(invalid(format!(
                "kernel {shown:?}: a FullElf kernel carries no PDI"
            )));
        }
        if !seen.insert(name.clone()) {
            return Err(invalid(format!(
                "kernel {shown:?} appears twice in the section"
            )));
        }
        entries.push(Entry {
            name,
            insts: (insts_off as usize, insts_size as usize),
            pdi: (pdi_off as usize, pdi_size as usize),
            kernarg_size,
            num_cols,
            kind,
        });
    }
    Ok(entries)
}

fn load_entry(section: &[u8], e: Entry, arch: &str, columns: u32) -> Result<Kernel, Refusal> {
    let name = String::from_utf8_lossy(&e.name).into_owned();
    if e.kind > KIND_FULL_ELF {
        return Err(invalid(format!("kernel {name:?}: unknown kind {}", e.kind)));
    }
    if e.num_cols == 0 || e.num_cols > columns {
        return Err(invalid(format!(
            "kernel {name:?} needs {} columns; this agent has {columns} (must be 1..={columns})",
            e.num_cols
        )));
    }
    let insts = section[e.insts.0..e.insts.0 + e.insts.1].to_vec();
    if e.kind == KIND_PDI_INSTS {
        if e.pdi.1 == 0 {
            return Err(invalid(format!(
                "kernel {name:?}: a PdiInsts kernel needs a PDI"
            )));
        }
        return Ok(Kernel {
            name,
            code: Code::Insts(insts),
            pdi_size: e.pdi.1,
            pdi_offset: Some(e.pdi.0),
            kernarg_size: e.kernarg_size,
            elf_args: None,
            variables: Vec::new(),
        });
    }
    if arch != "aie2p" {
        return Err(invalid(format!(
            "kernel {name:?}: no full-ELF format for arch {arch}"
        )));
    }
    // Each entry is read with its own size. ROCr reads an ELF shared by several entries once,
    // with the size of whichever entry it meets first, so entries whose sizes give different
    // answers are refused here whichever ROCr would have met first.
    let instance = full_elf_instance(&insts, &e.name)
        .map_err(|rule| invalid(format!("kernel {name:?}: full ELF: {rule}")))?;
    let computed = 16 * instance.args;
    if e.kernarg_size != 0 && e.kernarg_size != computed {
        return Err(invalid(format!(
            "kernel {name:?}: kernarg_size {} does not match the {} arguments its control code patches",
            e.kernarg_size, instance.args
        )));
    }
    if instance.pdi_bytes == 0 {
        return Err(invalid(format!(
            "kernel {name:?}: its control code loads no PDI"
        )));
    }
    Ok(Kernel {
        name,
        code: Code::Control(instance.control),
        pdi_size: instance.pdi_bytes,
        pdi_offset: None,
        kernarg_size: computed,
        elf_args: Some(instance.args),
        variables: instance.variables,
    })
}

struct Instance {
    control: Vec<u8>,
    args: u32,
    pdi_bytes: usize,
    variables: Vec<ExternalVariable>,
}

/// `_Z<len><name>...` → `<name>`, as ROCr's `KernelNameFromSymbol` computes it: the length in
/// a wrapping 64-bit `size_t`, the symbol unchanged when the length is 0 or its (wrapping) end
/// lies past the symbol, else at most the rest of the symbol.
fn demangle(symbol: &[u8]) -> &[u8] {
    if !symbol.starts_with(b"_Z") {
        return symbol;
    }
    let mut i = 2usize;
    let mut len = 0u64;
    while let Some(d) = symbol.get(i).filter(|d| d.is_ascii_digit()) {
        len = len.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
        i += 1;
    }
    let rest = &symbol[i..];
    if len == 0 || (i as u64).wrapping_add(len) > symbol.len() as u64 {
        return symbol;
    }
    &rest[..rest.len().min(usize::try_from(len).unwrap_or(usize::MAX))]
}

/// An ELF32 section header: `[name, type, flags, addr, offset, size, link, info, align,
/// entsize]`.
type Shdr32 = [u32; 10];

/// The ELF32 section headers and bytes, with ROCr's way of reading strings and tables.
struct Elf32<'a> {
    bytes: &'a [u8],
    shdrs: Vec<Shdr32>,
    names: Vec<Option<&'a [u8]>>,
}

impl<'a> Elf32<'a> {
    /// The NUL-terminated string at `offset` of string table `table`, which must hold it.
    fn string(&self, table: usize, offset: u32) -> Option<&'a [u8]> {
        let t = self.shdrs.get(table)?;
        let data = slice(self.bytes, u64::from(t[4]), u64::from(t[5]))?;
        c_string(data.get(offset as usize..)?)
    }

    /// Section `index`'s whole entries of `size` bytes (a partial last one is ignored).
    fn table(&self, index: usize, size: u32) -> Option<&'a [u8]> {
        let s = &self.shdrs[index];
        slice(self.bytes, u64::from(s[4]), u64::from(s[5] / size * size))
    }

    fn data(&self, index: usize) -> Option<&'a [u8]> {
        let s = self.shdrs.get(index)?;
        slice(self.bytes, u64::from(s[4]), u64::from(s[5]))
    }

    /// The last section of this name, as ROCr's scan keeps the last match.
    fn last(&self, name: &str) -> Option<usize> {
        self.names.iter().rposition(|n| *n == Some(name.as_bytes()))
    }

    /// The section a table's `sh_link` names (non-zero and in range).
    fn link(&self, index: usize) -> Option<usize> {
        let link = self.shdrs[index][6] as usize;
        (link != 0 && link < self.shdrs.len()).then_some(link)
    }
}

/// A symbol: `(name offset, size, section index field)`.
fn symbol(table: &[u8], index: u32) -> Option<(u32, u32, u32)> {
    let at = index as usize * 16;
    Some((
        u32_at(table, at)?,
        u32_at(table, at + 8)?,
        u32::from(u16_at(table, at + 14)?),
    ))
}

/// Reads the full ELF as ROCr's `aie_elf::Parse` does and returns the control code, argument
/// count, PDI bytes and external variables of the instance whose kernel name is `wanted`.
fn full_elf_instance(bytes: &[u8], wanted: &[u8]) -> Result<Instance, String> {
    if bytes.len() < 52 || !bytes.starts_with(b"\x7fELF") || bytes[4] != 1 || bytes[5] != 1 {
        return Err("not a little-endian ELF32".into());
    }
    if bytes[7] != OSABI_AIE2P {
        return Err("not an aie2p AIE ELF (EI_OSABI must be 0x45)".into());
    }
    let h16 = |off| u16_at(bytes, off).unwrap_or(0);
    let (shoff, shentsize, shnum, shstrndx) = (
        u32_at(bytes, 32).unwrap_or(0),
        h16(46),
        usize::from(h16(48)),
        usize::from(h16(50)),
    );
    let table = (shentsize == 40 && shnum > 0 && shstrndx < shnum)
        .then(|| slice(bytes, u64::from(shoff), 40 * shnum as u64))
        .flatten()
        .ok_or("malformed section headers")?;
    let shdrs: Vec<Shdr32> = table
        .chunks_exact(40)
        .map(|h| std::array::from_fn(|k| u32_at(h, 4 * k).unwrap_or(0)))
        .collect();
    let mut elf = Elf32 {
        bytes,
        shdrs,
        names: Vec::new(),
    };
    elf.names = (0..shnum)
        .map(|i| elf.string(shstrndx, elf.shdrs[i][0]))
        .collect();

    let symtab = elf.last(".symtab");
    let strtab = symtab.and_then(|i| elf.link(i));
    let (Some(symtab), Some(strtab)) = (symtab, strtab) else {
        return Err("missing or malformed .symtab".into());
    };
    if elf.shdrs[symtab][9] != 16 {
        return Err("missing or malformed .symtab".into());
    }
    let syms = elf.table(symtab, 16).ok_or("malformed .symtab")?;
    let count = (syms.len() / 16) as u32;

    // Groups in section order: name and control code; members map to the last group naming
    // them (ROCr's sec2grp).
    let mut groups: Vec<(usize, Vec<u8>, usize)> = Vec::new();
    let mut group_of: HashMap<usize, usize> = HashMap::new();
    for g in (0..shnum).filter(|&i| elf.shdrs[i][1] == SHT_GROUP) {
        let info = elf.shdrs[g][7];
        let (inst_name, _, kernel_index) = (info < count)
            .then(|| symbol(syms, info))
            .flatten()
            .ok_or("bad group signature symbol")?;
        let instance = elf
            .string(strtab, inst_name)
            .filter(|_| kernel_index < count)
            .ok_or("bad group signature symbol")?;
        let kernel = symbol(syms, kernel_index)
            .and_then(|(n, _, _)| elf.string(strtab, n))
            .ok_or("bad kernel symbol")?;
        let words: Vec<u32> = elf
            .table(g, 4)
            .filter(|w| !w.is_empty())
            .ok_or("malformed group section")?
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        if words[0] & GRP_COMDAT == 0 {
            return Err("group is not a COMDAT group".into());
        }
        let mut ctrl = 0;
        for &m in &words[1..] {
            let m = m as usize;
            if m >= shnum {
                return Err("group member out of range".into());
            }
            group_of.insert(m, g);
            if elf.names[m].is_some_and(|n| n.starts_with(b".ctrltext")) {
                if elf.shdrs[m][1] != SHT_PROGBITS {
                    return Err("control code section holds no data".into());
                }
                ctrl = m;
            }
        }
        let mut name = demangle(kernel).to_vec();
        name.push(b':');
        name.extend_from_slice(instance);
        groups.push((g, name, ctrl));
    }
    if groups.is_empty() {
        return Err("no COMDAT groups: not a group ELF".into());
    }
    let sites = relocations(&elf, &groups, &group_of)?;

    // Every instance's control code and sites are checked, as ROCr builds every kernel; the
    // first group of a name is the kernel of that name.
    let mut found = None;
    for (g, name, ctrl) in groups.iter().filter(|(_, _, ctrl)| *ctrl != 0) {
        let control = elf.data(*ctrl).ok_or("section extends past end of file")?;
        if control.is_empty() {
            return Err("empty control code".into());
        }
        let fits =
            |off: u32, need: usize| off.is_multiple_of(4) && off as usize + need <= control.len();
        let mine = sites.iter().filter(|s| s.group == *g);
        let (mut args, mut pdi_bytes, mut variables) = (0u32, 0usize, Vec::new());
        let mut pdis = HashSet::new();
        for s in mine {
            match &s.what {
                Patch::Pdi(section, size) => {
                    if !fits(s.offset, 8) || s.offset == 0 {
                        return Err("PDI patch site does not fit the control code".into());
                    }
                    if pdis.insert(*section) {
                        pdi_bytes += size;
                    }
                }
                Patch::Argument(index) => {
                    if !fits(s.offset, 12) {
                        return Err("argument patch site does not fit the control code".into());
                    }
                    args = args.max(index + 1);
                }
                Patch::Variable(v) => {
                    if !fits(s.offset, 8) {
                        return Err("external variable site does not fit the control code".into());
                    }
                    if !variables.contains(v) {
                        variables.push(v.clone());
                    }
                }
            }
        }
        if found.is_none() && name.as_slice() == wanted {
            found = Some(Instance {
                control: control.to_vec(),
                args,
                pdi_bytes,
                variables,
            });
        }
    }
    found.ok_or_else(|| {
        format!(
            "no kernel instance named {:?}",
            String::from_utf8_lossy(wanted)
        )
    })
}

enum Patch {
    /// The PDI section's index and size.
    Pdi(usize, usize),
    Argument(u32),
    Variable(ExternalVariable),
}

struct Site {
    group: usize,
    offset: u32,
    what: Patch,
}

/// Every `.rela.dyn` entry against the control code of the group that lists its section last.
fn relocations(
    elf: &Elf32<'_>,
    groups: &[(usize, Vec<u8>, usize)],
    group_of: &HashMap<usize, usize>,
) -> Result<Vec<Site>, String> {
    let (Some(rela), Some(dynsym)) = (elf.last(".rela.dyn"), elf.last(".dynsym")) else {
        return Ok(Vec::new());
    };
    let Some(dynstr) = elf.link(dynsym) else {
        return Ok(Vec::new());
    };
    if elf.shdrs[rela][9] != 12 || elf.shdrs[dynsym][9] != 16 {
        return Err("malformed .rela.dyn".into());
    }
    let (Some(entries), Some(syms)) = (elf.table(rela, 12), elf.table(dynsym, 16)) else {
        return Err("malformed .rela.dyn".into());
    };
    let abi_version_1 = elf.bytes[8] == 1;
    let mut out = Vec::new();
    for r in entries.chunks_exact(12) {
        let (offset, info, addend) = (
            u32_at(r, 0).unwrap_or(0),
            u32_at(r, 4).unwrap_or(0),
            u32_at(r, 8).unwrap_or(0),
        );
        let (name, size, shndx) = symbol(syms, info >> 8)
            .filter(|_| (info >> 8) < (syms.len() / 16) as u32)
            .ok_or("relocation symbol out of range")?;
        let name = elf
            .string(dynstr, name)
            .ok_or("bad relocation symbol name")?;
        let shndx = shndx as usize;
        let Some(&group) = group_of.get(&shndx) else {
            continue;
        };
        if groups
            .iter()
            .find(|(g, _, _)| *g == group)
            .map(|(_, _, c)| *c)
            != Some(shndx)
        {
            continue;
        }
        let scheme = if abi_version_1 {
            addend & 0xF
        } else {
            info & 0xFF
        };
        let what = if name.starts_with(b".pdi") {
            if scheme != 8 {
                return Err("unexpected patch scheme for PDI symbol".into());
            }
            let sections: Vec<usize> = (1..elf.shdrs.len())
                .filter(|&i| elf.names[i] == Some(name))
                .collect();
            let first = *sections.first().ok_or("PDI section not found")?;
            let data = elf.data(first);
            if data.is_none() || sections.iter().any(|&i| elf.data(i) != data) {
                return Err("ambiguous PDI: sections of one name differ".into());
            }
            Patch::Pdi(first, data.map_or(0, <[u8]>::len))
        } else if !name.is_empty() && name.iter().all(u8::is_ascii_digit) {
            let index: u32 = std::str::from_utf8(name)
                .ok()
                .and_then(|n| n.parse().ok())
                .filter(|&i| i <= 4095)
                .ok_or("kernel argument index out of range")?;
            if scheme != 5 {
                return Err("unsupported patch scheme for a kernel argument".into());
            }
            Patch::Argument(index)
        } else {
            let name = std::str::from_utf8(name)
                .ok()
                .filter(|n| !n.is_empty())
                .ok_or("unsupported relocation symbol")?;
            Patch::Variable(ExternalVariable {
                name: name.to_owned(),
                size: u64::from(size),
            })
        };
        out.push(Site {
            group,
            offset,
            what,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangling_takes_the_length_prefixed_name_as_rocr_computes_it() {
        assert_eq!(demangle(b"_Z4mainPcPcPc"), b"main");
        assert_eq!(demangle(b"_Z0x"), b"_Z0x");
        assert_eq!(demangle(b"_Z9ab"), b"_Z9ab");
        assert_eq!(demangle(b"plain"), b"plain");
        // The length wraps in a 64-bit size_t: 2^64 + 4 is 4, 2^64 - 1 takes the rest.
        assert_eq!(demangle(b"_Z18446744073709551620mainPc"), b"main");
        assert_eq!(demangle(b"_Z18446744073709551615abc"), b"abc");
    }

    #[test]
    fn non_elf_input_is_refused() {
        let err = read(
            b"not an elf at all, just some bytes that are long enough to look",
            "aie2p",
            8,
        )
        .unwrap_err();
        assert!(err.rule.contains("not an ELF"), "{}", err.rule);
    }

    /// The crafted file of each class of bad hsaco (`tests/fixtures/hsaco-classes`, written by
    /// npu-hsaco's `rocr_classes` tests): the agent loads exactly the files `classes.tsv` says
    /// it loads — every file ROCr loads, none that ROCr refuses, crashes on or may refuse.
    #[test]
    fn the_agent_gives_rocrs_verdict_on_every_class_of_bad_hsaco() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hsaco-classes");
        let tsv = std::fs::read_to_string(dir.join("classes.tsv")).expect("the fixtures exist");
        let mut seen = 0;
        for line in tsv.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let (name, arch, cols, rocr, agent) = (f[0], f[1], f[2], f[3], f[4]);
            let bytes = std::fs::read(dir.join(format!("{name}.hsaco"))).unwrap();
            let verdict = read(&bytes, arch, cols.parse().unwrap());
            match agent {
                "loads" => assert!(verdict.is_ok(), "{name}: {:?}", verdict.err()),
                _ => assert!(verdict.is_err(), "{name}: the agent loaded it"),
            }
            // A stand-in that loads what ROCr refuses would hide a bug.
            if matches!(rocr, "refuses" | "crashes" | "undetermined") {
                assert_eq!(agent, "refuses", "{name}");
            }
            if rocr == "loads" {
                assert_eq!(agent, "loads", "{name}");
            }
            seen += 1;
        }
        assert_eq!(seen, 20);
    }

    #[test]
    fn entries_sharing_one_elf_are_each_read_with_their_own_size() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hsaco-classes");
        let bytes = std::fs::read(dir.join("shared_elf_sizes.hsaco")).unwrap();
        let err = read(&bytes, "aie2p", 8).unwrap_err();
        assert!(err.rule.contains("main:b") && err.rule.contains("malformed section headers"));
    }
}
