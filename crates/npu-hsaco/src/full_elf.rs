//! Reader for AIE "full ELFs" (aiecc `--get-full-elf`, aie2p only), following the rules of
//! ROCr's own reader so that a file this module accepts is one ROCr accepts.
//!
//! A full ELF is a little-endian ELF32 with `EI_OSABI` 0x45. Each COMDAT group is one kernel
//! instance: the group's `sh_info` names the instance symbol in `.symtab`, whose `st_shndx` is
//! (unusually) the `.symtab` index of the kernel symbol; the kernel name is
//! `<demangled kernel symbol>:<instance>`. The group's `.ctrltext*` member is the control code.
//! `.rela.dyn` entries against `.dynsym` symbols patch that control code at load time: symbols
//! named `.pdi*` receive the address of the section of that name (scheme 8, `Address64`), decimal
//! names are buffer arguments (scheme 5, `ShimDma48`), and any other name is an *external
//! variable* (for example `scratch-pad-ctrl`) that the runtime must define before loading.
//! `.note.xrt.configuration` records the partition's column count.

use std::collections::HashMap;

use object::LittleEndian as LE;
use object::elf::{
    ELFCLASS32, ELFDATA2LSB, ELFMAG, FileHeader32, GRP_COMDAT, NoteHeader32, Rela32, SHT_GROUP,
    SHT_PROGBITS, SectionHeader32, Sym32,
};
use object::pod::{Pod, from_bytes};

use crate::error::{Error, FullElfError, Result, Rule, Violation};
use crate::section::Kernel;

/// `EI_OSABI` of an aie2p AIE ELF.
pub const OSABI_AIE2P: u8 = 0x45;
/// Patch scheme `Address64`: a 64-bit device address stored at the site.
pub const SCHEME_ADDRESS64: u32 = 8;
/// Patch scheme `ShimDma48`: a buffer address added into a shim DMA descriptor.
pub const SCHEME_SHIM_DMA48: u32 = 5;
/// The highest buffer-argument index ROCr accepts.
pub const MAX_ARGUMENT_INDEX: u32 = 4095;
/// The note section that records the partition width.
pub const CONFIGURATION_NOTE: &str = ".note.xrt.configuration";
/// The note type of the column count in [`CONFIGURATION_NOTE`].
pub const NOTE_PARTITION_SIZE: u32 = 6;

type FullResult<T> = std::result::Result<T, FullElfError>;

/// One place in the control code that the runtime patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    /// Byte offset in the control code.
    pub offset: u32,
    /// The value added to the patched address.
    pub addend: i64,
}

/// A PDI the control code loads, with every site that receives its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdiUse {
    /// The relocation symbol (= section name) that first named it.
    pub section: String,
    /// PDI size in bytes.
    pub size: u64,
    /// Offsets in the control code, in relocation order.
    pub sites: Vec<u32>,
}

/// A symbol the control code relocates against that is neither a PDI nor an argument: the
/// runtime must define it (with at least `size` bytes) before loading the code object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalVariable {
    /// The dynamic symbol's name, e.g. `scratch-pad-ctrl`.
    pub name: String,
    /// The dynamic symbol's `st_size`.
    pub size: u32,
    /// The patch scheme (always [`SCHEME_ADDRESS64`] in a file this module accepts).
    pub scheme: u32,
    /// Offsets in the control code.
    pub sites: Vec<u32>,
}

/// One dispatchable kernel instance of a full ELF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfKernel {
    /// `<demangled kernel>:<instance>`: the HSA symbol name ROCr looks up.
    pub name: String,
    /// The kernel symbol as stored (e.g. `_Z4mainPcPcPc`).
    pub kernel_symbol: String,
    /// The instance symbol (e.g. `sequence`).
    pub instance: String,
    /// Section index of the control code.
    pub ctrl_section: usize,
    /// Control code size in bytes.
    pub ctrl_code_size: u64,
    /// Number of buffer arguments: highest referenced index + 1.
    pub args: u32,
    /// The kernarg size ROCr derives: 16 bytes per argument.
    pub kernarg_size: u32,
    /// Distinct PDIs (by content) in order of first use.
    pub pdis: Vec<PdiUse>,
    /// Patch sites per argument index (`args` lists; unreferenced indices are empty).
    pub arg_sites: Vec<Vec<Site>>,
    /// External variables in order of first use.
    pub external_variables: Vec<ExternalVariable>,
}

/// A parsed full ELF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullElf {
    /// Kernels sorted by name.
    pub kernels: Vec<ElfKernel>,
    /// Column count from `.note.xrt.configuration`, when the file has one.
    pub num_cols: Option<u32>,
    /// `EI_ABIVERSION`, which selects the relocation encoding.
    pub abi_version: u8,
}

fn pod_at<T: Pod>(bytes: &[u8], offset: u64) -> Option<&T> {
    let start = usize::try_from(offset).ok()?;
    from_bytes::<T>(bytes.get(start..)?).ok().map(|(v, _)| v)
}

fn range(bytes: &[u8], offset: u64, size: u64) -> Option<&[u8]> {
    let end = offset.checked_add(size)?;
    bytes.get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
}

fn cstr_at(table: &[u8], offset: u32) -> Option<&[u8]> {
    let tail = table.get(offset as usize..)?;
    let nul = tail.iter().position(|&b| b == 0)?;
    Some(&tail[..nul])
}

fn utf8(bytes: &[u8]) -> FullResult<String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| FullElfError::NameNotUtf8(String::from_utf8_lossy(bytes).into_owned()))
}

/// Turns `_Z<len><name>...` into `<name>`; anything else (including non-ASCII digits, a zero
/// or too long length) is returned unchanged, as ROCr does.
pub fn demangle_kernel_name(symbol: &[u8]) -> &[u8] {
    let Some(rest) = symbol.strip_prefix(b"_Z") else {
        return symbol;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return symbol;
    }
    let mut len: usize = 0;
    for &d in &rest[..digits] {
        match len
            .checked_mul(10)
            .and_then(|l| l.checked_add(usize::from(d - b'0')))
        {
            Some(l) => len = l,
            None => return symbol,
        }
    }
    let name = &rest[digits..];
    if len == 0 || len > name.len() {
        return symbol;
    }
    &name[..len]
}

/// The symbol table `.symtab` or `.dynsym` with its string table.
struct SymbolTable<'a> {
    entries: &'a [u8],
    strings: &'a [u8],
}

impl<'a> SymbolTable<'a> {
    fn count(&self) -> u32 {
        (self.entries.len() / 16) as u32
    }

    fn get(&self, index: u32) -> Option<&'a Sym32<LE>> {
        pod_at(self.entries, u64::from(index) * 16)
    }

    fn name(&self, sym: &Sym32<LE>) -> Option<&'a [u8]> {
        cstr_at(self.strings, sym.st_name.get(LE))
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    shdrs: Vec<&'a SectionHeader32<LE>>,
    names: Vec<&'a [u8]>,
}

impl<'a> Reader<'a> {
    fn data(&self, index: usize) -> Option<&'a [u8]> {
        let s = self.shdrs.get(index)?;
        range(
            self.bytes,
            u64::from(s.sh_offset.get(LE)),
            u64::from(s.sh_size.get(LE)),
        )
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| *n == name.as_bytes())
    }

    fn sh_type(&self, index: usize) -> u32 {
        self.shdrs[index].sh_type.get(LE).0
    }
}

struct Group {
    name: String,
    kernel_symbol: String,
    instance: String,
    ctrl: Option<usize>,
}

enum Target {
    Pdi(String),
    Argument(u32),
    External(String, u32),
}

struct Relocation {
    ctrl: usize,
    offset: u32,
    scheme: u32,
    addend: i64,
    target: Target,
}

impl FullElf {
    /// Parses `bytes` with ROCr's full-ELF rules; the error is the first one broken.
    pub fn parse(bytes: &[u8]) -> FullResult<FullElf> {
        let header: &FileHeader32<LE> = pod_at(bytes, 0).ok_or(FullElfError::NotElf32Le)?;
        let ident = &header.e_ident;
        if ident.magic != ELFMAG || ident.class != ELFCLASS32 || ident.data != ELFDATA2LSB {
            return Err(FullElfError::NotElf32Le);
        }
        if ident.os_abi.0 != OSABI_AIE2P {
            return Err(FullElfError::WrongOsAbi(ident.os_abi.0));
        }
        let reader = read_sections(bytes, header)?;
        let symtab = symbol_table(&reader)?;
        let groups = read_groups(&reader, &symtab)?;
        let relocations = read_relocations(&reader, &groups, ident.abi_version)?;
        let num_cols = configuration_columns(&reader)?;

        let mut kernels: Vec<ElfKernel> = Vec::new();
        for group in groups {
            let Some(ctrl) = group.ctrl else { continue };
            kernels.push(build_kernel(&reader, group, ctrl, &relocations)?);
        }
        if kernels.is_empty() {
            return Err(FullElfError::NoDispatchableKernels);
        }
        kernels.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(w) = kernels.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(FullElfError::DuplicateKernel(w[0].name.clone()));
        }
        Ok(FullElf {
            kernels,
            num_cols,
            abi_version: ident.abi_version,
        })
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Option<&ElfKernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// All kernel names, sorted.
    pub fn kernel_names(&self) -> Vec<&str> {
        self.kernels.iter().map(|k| k.name.as_str()).collect()
    }
}

fn read_sections<'a>(bytes: &'a [u8], header: &'a FileHeader32<LE>) -> FullResult<Reader<'a>> {
    let bad = FullElfError::MalformedSectionHeaders;
    if header.e_shentsize.get(LE) != 40 {
        return Err(bad("e_shentsize is not 40"));
    }
    let count = header.e_shnum.get(LE);
    if count == 0 {
        return Err(bad("e_shnum is 0"));
    }
    let table = range(
        bytes,
        u64::from(header.e_shoff.get(LE)),
        u64::from(count) * 40,
    )
    .ok_or(bad("the section header table lies outside the file"))?;
    let shstrndx = header.e_shstrndx.get(LE).0;
    if shstrndx >= count {
        return Err(bad("e_shstrndx is not a section index"));
    }
    let shdrs: Vec<&SectionHeader32<LE>> = (0..u64::from(count))
        .map(|i| pod_at(table, i * 40).expect("table bounds checked"))
        .collect();
    let strtab = shdrs[usize::from(shstrndx)];
    let names_table = range(
        bytes,
        u64::from(strtab.sh_offset.get(LE)),
        u64::from(strtab.sh_size.get(LE)),
    )
    .ok_or(bad("the section-name table lies outside the file"))?;
    let names = shdrs
        .iter()
        .map(|s| cstr_at(names_table, s.sh_name.get(LE)).unwrap_or(b""))
        .collect();
    Ok(Reader {
        bytes,
        shdrs,
        names,
    })
}

fn linked_symbols<'a>(reader: &Reader<'a>, index: usize) -> Option<(u32, &'a [u8])> {
    let link = reader.shdrs[index].sh_link.get(LE);
    (link != 0 && (link as usize) < reader.shdrs.len())
        .then_some(link)
        .map(|l| (l, reader.data(l as usize).unwrap_or(b"")))
}

fn symbol_table<'a>(reader: &Reader<'a>) -> FullResult<SymbolTable<'a>> {
    let index = reader
        .find(".symtab")
        .ok_or(FullElfError::MissingSymtab("no .symtab section"))?;
    let (link, _) = linked_symbols(reader, index)
        .ok_or(FullElfError::MissingSymtab("its sh_link names no section"))?;
    if reader.shdrs[index].sh_entsize.get(LE) != 16 {
        return Err(FullElfError::MissingSymtab("sh_entsize is not 16"));
    }
    let entries = reader.data(index).ok_or(FullElfError::MalformedSymtab)?;
    let strings = reader
        .data(link as usize)
        .ok_or(FullElfError::MalformedSymtab)?;
    Ok(SymbolTable { entries, strings })
}

fn read_groups(reader: &Reader<'_>, symtab: &SymbolTable<'_>) -> FullResult<Vec<Group>> {
    let mut groups = Vec::new();
    for section in 0..reader.shdrs.len() {
        if reader.sh_type(section) != SHT_GROUP.0 {
            continue;
        }
        let signature = FullElfError::BadGroupSignature { section };
        let info = reader.shdrs[section].sh_info.get(LE);
        if info >= symtab.count() {
            return Err(signature);
        }
        let instance_sym = symtab.get(info).ok_or(signature.clone())?;
        let instance = symtab.name(instance_sym).ok_or(signature.clone())?;
        let kernel_index = u32::from(instance_sym.st_shndx.get(LE).0);
        if kernel_index >= symtab.count() {
            return Err(signature);
        }
        let kernel_sym = symtab
            .get(kernel_index)
            .ok_or(FullElfError::BadKernelSymbol { section })?;
        let kernel_symbol = symtab
            .name(kernel_sym)
            .ok_or(FullElfError::BadKernelSymbol { section })?;
        let words = reader
            .data(section)
            .filter(|d| d.len() >= 4)
            .ok_or(FullElfError::MalformedGroup { section })?;
        let word =
            |i: usize| u32::from_le_bytes(words[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        if word(0) & GRP_COMDAT.0 == 0 {
            return Err(FullElfError::NotComdat { section });
        }
        let mut ctrl = None;
        for i in 1..words.len() / 4 {
            let member = word(i);
            if member as usize >= reader.shdrs.len() {
                return Err(FullElfError::GroupMemberOutOfRange { section, member });
            }
            if reader.names[member as usize].starts_with(b".ctrltext") {
                if reader.sh_type(member as usize) != SHT_PROGBITS.0 {
                    return Err(FullElfError::ControlCodeNotProgbits {
                        section: member as usize,
                    });
                }
                ctrl = Some(member as usize);
            }
        }
        let kernel_symbol = utf8(kernel_symbol)?;
        let instance = utf8(instance)?;
        let demangled = utf8(demangle_kernel_name(kernel_symbol.as_bytes()))?;
        groups.push(Group {
            name: format!("{demangled}:{instance}"),
            kernel_symbol,
            instance,
            ctrl,
        });
    }
    if groups.is_empty() {
        return Err(FullElfError::NoGroups);
    }
    Ok(groups)
}

fn read_relocations(
    reader: &Reader<'_>,
    groups: &[Group],
    abi_version: u8,
) -> FullResult<Vec<Relocation>> {
    let (Some(rela), Some(dynsym)) = (reader.find(".rela.dyn"), reader.find(".dynsym")) else {
        return Ok(Vec::new());
    };
    let Some((dynstr, _)) = linked_symbols(reader, dynsym) else {
        return Ok(Vec::new());
    };
    let bad = FullElfError::MalformedRelaDyn;
    if reader.shdrs[rela].sh_entsize.get(LE) != 12 {
        return Err(bad(".rela.dyn sh_entsize is not 12"));
    }
    if reader.shdrs[dynsym].sh_entsize.get(LE) != 16 {
        return Err(bad(".dynsym sh_entsize is not 16"));
    }
    let entries = reader
        .data(rela)
        .ok_or(bad(".rela.dyn lies outside the file"))?;
    let symbols = SymbolTable {
        entries: reader
            .data(dynsym)
            .ok_or(bad(".dynsym lies outside the file"))?,
        strings: reader
            .data(dynstr as usize)
            .ok_or(bad("the .dynsym string table lies outside the file"))?,
    };
    let ctrl_sections: Vec<usize> = groups.iter().filter_map(|g| g.ctrl).collect();
    let mut out = Vec::new();
    for i in 0..entries.len() / 12 {
        let r: &Rela32<LE> = pod_at(entries, i as u64 * 12).expect("in bounds");
        let sym_index = r.r_sym(LE);
        if sym_index >= symbols.count() {
            return Err(FullElfError::RelocationSymbolOutOfRange(sym_index));
        }
        let sym = symbols.get(sym_index).expect("index checked");
        let name = symbols
            .name(sym)
            .ok_or(FullElfError::BadRelocationSymbolName(sym_index))?;
        let target_section = usize::from(sym.st_shndx.get(LE).0);
        if !ctrl_sections.contains(&target_section) {
            continue;
        }
        let raw_addend = r.r_addend.get(LE);
        let (scheme, addend) = if abi_version == 1 {
            (
                (raw_addend as u32) & 0xF,
                i64::from((raw_addend as u32) >> 4),
            )
        } else {
            (r.r_info.get(LE) & 0xFF, i64::from(raw_addend))
        };
        let symbol = String::from_utf8_lossy(name).into_owned();
        let target = if name.starts_with(b".pdi") {
            if scheme != SCHEME_ADDRESS64 {
                return Err(FullElfError::PdiScheme { symbol, scheme });
            }
            Target::Pdi(symbol)
        } else if !name.is_empty() && name.iter().all(u8::is_ascii_digit) {
            if scheme != SCHEME_SHIM_DMA48 {
                return Err(FullElfError::ArgumentScheme { symbol, scheme });
            }
            match symbol.parse::<u32>() {
                Ok(index) if index <= MAX_ARGUMENT_INDEX => Target::Argument(index),
                _ => return Err(FullElfError::ArgumentIndexOutOfRange(symbol)),
            }
        } else {
            if scheme != SCHEME_ADDRESS64 {
                return Err(FullElfError::ExternalScheme { symbol, scheme });
            }
            Target::External(symbol, sym.st_size.get(LE))
        };
        out.push(Relocation {
            ctrl: target_section,
            offset: r.r_offset.get(LE),
            scheme,
            addend,
            target,
        });
    }
    Ok(out)
}

/// The bytes of the PDI section(s) named `name`; several must be identical.
fn pdi_bytes<'a>(reader: &Reader<'a>, name: &str) -> FullResult<&'a [u8]> {
    let mut found: Option<&[u8]> = None;
    for (index, section_name) in reader.names.iter().enumerate() {
        if *section_name != name.as_bytes() {
            continue;
        }
        let data = reader
            .data(index)
            .ok_or(FullElfError::SectionPastEnd(index))?;
        match found {
            Some(previous) if previous != data => {
                return Err(FullElfError::AmbiguousPdi(name.to_string()));
            }
            _ => found = Some(data),
        }
    }
    found.ok_or_else(|| FullElfError::PdiSectionNotFound(name.to_string()))
}

fn build_kernel(
    reader: &Reader<'_>,
    group: Group,
    ctrl: usize,
    relocations: &[Relocation],
) -> FullResult<ElfKernel> {
    let code = reader
        .data(ctrl)
        .ok_or(FullElfError::SectionPastEnd(ctrl))?;
    if code.is_empty() {
        return Err(FullElfError::EmptyControlCode(group.name));
    }
    let size = code.len() as u64;
    let fits =
        |offset: u32, need: u64| offset.is_multiple_of(4) && u64::from(offset) + need <= size;
    let mut pdis: Vec<PdiUse> = Vec::new();
    let mut pdi_contents: Vec<&[u8]> = Vec::new();
    let mut arg_sites: Vec<Vec<Site>> = Vec::new();
    let mut externals: Vec<ExternalVariable> = Vec::new();
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for r in relocations.iter().filter(|r| r.ctrl == ctrl) {
        match &r.target {
            Target::Pdi(symbol) => {
                if !fits(r.offset, 8) {
                    return Err(FullElfError::PdiSiteOutOfBounds {
                        kernel: group.name,
                        offset: r.offset,
                        size,
                    });
                }
                if r.offset == 0 {
                    return Err(FullElfError::PdiSiteAtZero(group.name));
                }
                let bytes = pdi_bytes(reader, symbol)?;
                match pdi_contents.iter().position(|c| *c == bytes) {
                    Some(i) => pdis[i].sites.push(r.offset),
                    None => {
                        pdi_contents.push(bytes);
                        pdis.push(PdiUse {
                            section: symbol.clone(),
                            size: bytes.len() as u64,
                            sites: vec![r.offset],
                        });
                    }
                }
            }
            Target::Argument(index) => {
                if !fits(r.offset, 12) {
                    return Err(FullElfError::ArgumentSiteOutOfBounds {
                        kernel: group.name,
                        offset: r.offset,
                        size,
                    });
                }
                let index = *index as usize;
                if arg_sites.len() <= index {
                    arg_sites.resize(index + 1, Vec::new());
                }
                arg_sites[index].push(Site {
                    offset: r.offset,
                    addend: r.addend,
                });
            }
            Target::External(symbol, symbol_size) => {
                if !fits(r.offset, 8) {
                    return Err(FullElfError::ExternalSiteOutOfBounds {
                        kernel: group.name,
                        symbol: symbol.clone(),
                        offset: r.offset,
                        size,
                    });
                }
                match by_name.get(symbol.as_str()) {
                    Some(&i) => externals[i].sites.push(r.offset),
                    None => {
                        by_name.insert(symbol, externals.len());
                        externals.push(ExternalVariable {
                            name: symbol.clone(),
                            size: *symbol_size,
                            scheme: r.scheme,
                            sites: vec![r.offset],
                        });
                    }
                }
            }
        }
    }
    let args = arg_sites.len() as u32;
    Ok(ElfKernel {
        name: group.name,
        kernel_symbol: group.kernel_symbol,
        instance: group.instance,
        ctrl_section: ctrl,
        ctrl_code_size: size,
        args,
        kernarg_size: args * 16,
        pdis,
        arg_sites,
        external_variables: externals,
    })
}

/// The column count in `.note.xrt.configuration` (owner `XRT`, type 6, one u32), if present.
fn configuration_columns(reader: &Reader<'_>) -> FullResult<Option<u32>> {
    let bad = FullElfError::BadConfigurationNote;
    let Some(index) = reader.find(CONFIGURATION_NOTE) else {
        return Ok(None);
    };
    let data = reader.data(index).ok_or(bad("it lies outside the file"))?;
    let mut at = 0u64;
    while at + 12 <= data.len() as u64 {
        let note: &NoteHeader32<LE> = pod_at(data, at).expect("in bounds");
        let namesz = u64::from(note.n_namesz.get(LE));
        let descsz = u64::from(note.n_descsz.get(LE));
        let name_at = at + 12;
        let desc_at = name_at + namesz.next_multiple_of(4);
        let next = desc_at + descsz.next_multiple_of(4);
        let name = range(data, name_at, namesz).ok_or(bad("a note runs past the section end"))?;
        let desc = range(data, desc_at, descsz).ok_or(bad("a note runs past the section end"))?;
        if name == b"XRT\0" && note.n_type.get(LE).0 == NOTE_PARTITION_SIZE {
            let cols: [u8; 4] = desc
                .try_into()
                .map_err(|_| bad("the column-count descriptor is not 4 bytes"))?;
            return Ok(Some(u32::from_le_bytes(cols)));
        }
        at = next;
    }
    Err(bad("no XRT partition-size note (owner XRT, type 6)"))
}

/// One kernel of a full ELF, ready to pack: the ELF bytes plus what was derived from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullElfKernel<'a> {
    /// The whole ELF (embedded unchanged, shared by every kernel of the file).
    pub elf: &'a [u8],
    /// What the ELF says about this kernel (name, derived kernarg size, PDIs, arguments,
    /// external variables).
    pub info: ElfKernel,
    /// The partition width from `.note.xrt.configuration`, if the file records it.
    pub num_cols: Option<u32>,
}

impl<'a> FullElfKernel<'a> {
    /// The kernel name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The kernarg size derived from the ELF (16 × argument count).
    pub fn kernarg_size(&self) -> u32 {
        self.info.kernarg_size
    }

    /// External variables the runtime must define before loading.
    pub fn external_variables(&self) -> &[ExternalVariable] {
        &self.info.external_variables
    }

    /// The entry to pack. `kernarg_size`: `None` stores the derived value, `Some(0)` stores 0
    /// (ROCr then derives it, as the reference packer's default does), any other value must equal
    /// the derived one. `num_cols`: the ELF's note wins and a different user value is refused;
    /// without a note the user value is used, else 1 (the reference packer's default).
    pub fn to_kernel(
        &self,
        kernarg_size: Option<u32>,
        num_cols: Option<u32>,
    ) -> Result<Kernel<'a>> {
        let refuse = |rule| Error::Refused(Violation::new(rule).kernel(self.name()));
        let derived = self.info.kernarg_size;
        let kernarg = match kernarg_size {
            None => derived,
            Some(v) if v == 0 || v == derived => v,
            Some(v) => return Err(refuse(Rule::KernargMismatch { stored: v, derived })),
        };
        let cols = match (self.num_cols, num_cols) {
            (Some(note), Some(given)) if given != note => {
                return Err(refuse(Rule::ColumnsMismatch {
                    given,
                    derived: note,
                    source_kind: "full ELF's .note.xrt.configuration",
                }));
            }
            (Some(note), _) => note,
            (None, given) => given.unwrap_or(1),
        };
        if cols == 0 {
            return Err(refuse(Rule::ZeroColumns));
        }
        Ok(Kernel::full_elf(
            self.info.name.clone(),
            self.elf,
            kernarg,
            cols,
        ))
    }
}

/// Parses `elf` and returns its kernels sorted by name, or only those in `names` (in the order
/// given) when a filter is passed; a name the ELF does not define is an error listing the ones
/// it does.
pub fn kernels_from_full_elf<'a>(
    elf: &'a [u8],
    names: Option<&[&str]>,
) -> Result<Vec<FullElfKernel<'a>>> {
    let parsed = FullElf::parse(elf)?;
    let make = |info: &ElfKernel| FullElfKernel {
        elf,
        info: info.clone(),
        num_cols: parsed.num_cols,
    };
    match names {
        None => Ok(parsed.kernels.iter().map(make).collect()),
        Some(names) => names
            .iter()
            .map(|name| {
                parsed.kernel(name).map(make).ok_or_else(|| {
                    Error::Refused(
                        Violation::new(Rule::NotInFullElf {
                            available: parsed.kernel_names().join(", "),
                        })
                        .kernel(*name),
                    )
                })
            })
            .collect(),
    }
}
