//! Reader for AIE "full ELFs" (aiecc `--get-full-elf`, aie2p only), following the rules of
//! ROCr's own reader (`aie_elf::Parse` in `core/runtime/amd_aie_elf.cpp`, StefanBS/rocm-systems
//! @ 04441d8e) so that a file this module accepts is one ROCr accepts, and the reverse: names are
//! bytes, `.symtab`/`.dynsym`/`.rela.dyn` are the last sections of those names, a section belongs
//! to the last group listing it, tables are read as whole entries, string tables only when a
//! string is needed. What ROCr accepts but this crate refuses is kept in [`FullElf::stricter`].
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

use std::collections::{BTreeMap, HashMap};

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
    /// The value added to the patched address (ROCr reads it as an unsigned 32-bit number).
    pub addend: u32,
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
    /// `<demangled kernel>:<instance>`: the HSA symbol name ROCr looks up. Bytes, as ROCr
    /// compares them: nothing makes a symbol name UTF-8.
    pub name: Vec<u8>,
    /// The kernel symbol as stored (e.g. `_Z4mainPcPcPc`).
    pub kernel_symbol: Vec<u8>,
    /// The instance symbol (e.g. `sequence`).
    pub instance: Vec<u8>,
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

impl ElfKernel {
    /// The name with invalid UTF-8 replaced, for messages.
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
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
    /// The first property of the file that ROCr's reader accepts but this crate refuses (see
    /// [`FullElfError::rocr_accepts`]): a malformed `.note.xrt.configuration`, two groups of
    /// one name, a table whose last entry runs past the end of the file.
    pub stricter: Option<FullElfError>,
}

fn pod_at<T: Pod>(bytes: &[u8], offset: u64) -> Option<&T> {
    let start = usize::try_from(offset).ok()?;
    from_bytes::<T>(bytes.get(start..)?).ok().map(|(v, _)| v)
}

fn range(bytes: &[u8], offset: u64, size: u64) -> Option<&[u8]> {
    let end = offset.checked_add(size)?;
    bytes.get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
}

/// Turns `_Z<len><name>...` into `<name>` exactly as ROCr's `KernelNameFromSymbol` does: the
/// length is accumulated from ASCII digits in a wrapping 64-bit `size_t`, a zero length or one
/// whose end (also wrapping) lies past the symbol returns the symbol unchanged, and otherwise
/// at most the rest of the symbol is taken (`std::string::substr` clamps). So a length that
/// wraps can still name a prefix: `_Z18446744073709551620main` gives `main`.
pub fn demangle_kernel_name(symbol: &[u8]) -> &[u8] {
    let Some(rest) = symbol.strip_prefix(b"_Z") else {
        return symbol;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let len = rest[..digits].iter().fold(0u64, |len, &d| {
        len.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
    });
    let start = 2 + digits as u64;
    let size = symbol.len() as u64;
    if len == 0 || start.wrapping_add(len) > size {
        return symbol;
    }
    let take = len.min(size - start);
    &symbol[start as usize..(start + take) as usize]
}

/// The section headers and names, with ROCr's lookups.
struct Reader<'a> {
    bytes: &'a [u8],
    shdrs: Vec<&'a SectionHeader32<LE>>,
    /// Each section's name when it is terminated inside the section-name table (`StringAt`).
    names: Vec<Option<&'a [u8]>>,
    /// The first table found truncated (its last entry past the end of the file).
    truncated: Option<usize>,
}

impl<'a> Reader<'a> {
    /// The whole section, when it lies in the file.
    fn data(&self, index: usize) -> Option<&'a [u8]> {
        let s = self.shdrs.get(index)?;
        range(
            self.bytes,
            u64::from(s.sh_offset.get(LE)),
            u64::from(s.sh_size.get(LE)),
        )
    }

    /// The section's whole `entry_size`-byte entries, as ROCr reads a table (`Image::As` over
    /// `sh_size / entry_size` entries): `None` when they do not lie in the file. A partial last
    /// entry is ignored, as ROCr ignores it; when it runs past the end of the file the table is
    /// noted as truncated.
    fn entries(&mut self, index: usize, entry_size: u32) -> Option<&'a [u8]> {
        let s = self.shdrs[index];
        let size = s.sh_size.get(LE);
        let whole = range(
            self.bytes,
            u64::from(s.sh_offset.get(LE)),
            u64::from(size / entry_size * entry_size),
        )?;
        if self.data(index).is_none() {
            self.truncated.get_or_insert(index);
        }
        Some(whole)
    }

    /// The last section named `name`, as ROCr's scan (which overwrites earlier matches) finds.
    fn find_last(&self, name: &str) -> Option<usize> {
        self.names.iter().rposition(|n| *n == Some(name.as_bytes()))
    }

    fn sh_type(&self, index: usize) -> u32 {
        self.shdrs[index].sh_type.get(LE).0
    }

    /// The string table a symbol table names through `sh_link` (non-zero, a section index).
    fn linked(&self, table: usize) -> Option<&'a SectionHeader32<LE>> {
        let link = self.shdrs[table].sh_link.get(LE);
        (link != 0)
            .then(|| self.shdrs.get(link as usize).copied())
            .flatten()
    }
}

/// ROCr's `StringAt`: the NUL-terminated string at `offset` in `table`, which must lie in the
/// file and hold the terminator.
fn string_at<'a>(bytes: &'a [u8], table: &SectionHeader32<LE>, offset: u32) -> Option<&'a [u8]> {
    let size = table.sh_size.get(LE);
    if offset >= size {
        return None;
    }
    let data = range(bytes, u64::from(table.sh_offset.get(LE)), u64::from(size))?;
    let tail = &data[offset as usize..];
    tail.iter().position(|&b| b == 0).map(|nul| &tail[..nul])
}

/// A symbol table with the string table its `sh_link` names.
struct SymbolTable<'a> {
    entries: &'a [u8],
    strings: &'a SectionHeader32<LE>,
}

impl<'a> SymbolTable<'a> {
    fn count(&self) -> u32 {
        (self.entries.len() / 16) as u32
    }

    fn get(&self, index: u32) -> Option<&'a Sym32<LE>> {
        pod_at(self.entries, u64::from(index) * 16)
    }

    fn name(&self, bytes: &'a [u8], sym: &Sym32<LE>) -> Option<&'a [u8]> {
        string_at(bytes, self.strings, sym.st_name.get(LE))
    }
}

/// A COMDAT group: one kernel instance.
struct Group {
    name: Vec<u8>,
    kernel_symbol: Vec<u8>,
    instance: Vec<u8>,
    /// Section index of the last `.ctrltext*` member; 0 for none (as ROCr stores it).
    ctrl: u32,
}

enum Target {
    /// The PDI section (its index) and the relocation symbol naming it.
    Pdi(usize, String),
    Argument(u32),
    External(String, u32),
}

struct Relocation {
    /// Section index of the group whose control code it patches.
    group: usize,
    offset: u32,
    scheme: u32,
    addend: u32,
    target: Target,
}

impl FullElf {
    /// Parses `bytes` with the rules of ROCr's full-ELF reader (`aie_elf::Parse` in
    /// `core/runtime/amd_aie_elf.cpp`, StefanBS/rocm-systems @ 04441d8e); the error is the first
    /// rule it breaks. Properties ROCr accepts but this crate refuses are kept in
    /// [`FullElf::stricter`]. One extension: a relocation against a symbol that is neither a
    /// PDI nor an argument index is an external variable (ROCr's pending "external variables"
    /// change) rather than an error.
    pub fn parse(bytes: &[u8]) -> FullResult<FullElf> {
        let header: &FileHeader32<LE> = pod_at(bytes, 0).ok_or(FullElfError::NotElf32Le)?;
        let ident = &header.e_ident;
        if ident.magic != ELFMAG || ident.class != ELFCLASS32 || ident.data != ELFDATA2LSB {
            return Err(FullElfError::NotElf32Le);
        }
        if ident.os_abi.0 != OSABI_AIE2P {
            return Err(FullElfError::WrongOsAbi(ident.os_abi.0));
        }
        let mut reader = read_sections(bytes, header)?;
        let symtab = symbol_table(&mut reader)?;
        let (groups, group_of) = read_groups(&mut reader, &symtab)?;
        let relocations = read_relocations(&mut reader, &groups, &group_of, ident.abi_version)?;

        let mut stricter = None;
        let mut kernels: Vec<ElfKernel> = Vec::new();
        for (&index, group) in &groups {
            if group.ctrl == 0 {
                continue; // nothing to dispatch
            }
            let kernel = build_kernel(&reader, index, group, &relocations)?;
            if kernels.iter().any(|k| k.name == kernel.name) {
                // ROCr keeps the first group of a name (`std::map::emplace`).
                stricter.get_or_insert(FullElfError::DuplicateKernel(kernel.name_lossy()));
                continue;
            }
            kernels.push(kernel);
        }
        if kernels.is_empty() {
            return Err(FullElfError::NoDispatchableKernels);
        }
        kernels.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(index) = reader.truncated {
            stricter.get_or_insert(FullElfError::TruncatedTable(index));
        }
        // ROCr does not read the note; the packer takes the partition width from it.
        let num_cols = configuration_columns(&reader).unwrap_or_else(|e| {
            stricter.get_or_insert(e);
            None
        });
        Ok(FullElf {
            kernels,
            num_cols,
            abi_version: ident.abi_version,
            stricter,
        })
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &[u8]) -> Option<&ElfKernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// All kernel names, sorted, with invalid UTF-8 replaced (for messages).
    pub fn kernel_names(&self) -> Vec<String> {
        self.kernels.iter().map(ElfKernel::name_lossy).collect()
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
    let names_table = shdrs[usize::from(shstrndx)];
    let names = shdrs
        .iter()
        .map(|s| string_at(bytes, names_table, s.sh_name.get(LE)))
        .collect();
    Ok(Reader {
        bytes,
        shdrs,
        names,
        truncated: None,
    })
}

fn symbol_table<'a>(reader: &mut Reader<'a>) -> FullResult<SymbolTable<'a>> {
    let missing = FullElfError::MissingSymtab;
    let index = reader
        .find_last(".symtab")
        .ok_or(missing("no .symtab section"))?;
    let strings = reader
        .linked(index)
        .ok_or(missing("its sh_link names no section"))?;
    if reader.shdrs[index].sh_entsize.get(LE) != 16 {
        return Err(missing("sh_entsize is not 16"));
    }
    let entries = reader
        .entries(index, 16)
        .ok_or(FullElfError::MalformedSymtab)?;
    Ok(SymbolTable { entries, strings })
}

type Groups = (BTreeMap<usize, Group>, HashMap<u32, usize>);

/// Every COMDAT group by section index, and the group each member section belongs to (the
/// last group listing it, as ROCr's `sec2grp` map is overwritten).
fn read_groups(reader: &mut Reader<'_>, symtab: &SymbolTable<'_>) -> FullResult<Groups> {
    let bytes = reader.bytes;
    let mut groups = BTreeMap::new();
    let mut group_of = HashMap::new();
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
        let instance = symtab.name(bytes, instance_sym).ok_or(signature.clone())?;
        let kernel_index = u32::from(instance_sym.st_shndx.get(LE).0);
        if kernel_index >= symtab.count() {
            return Err(signature);
        }
        let kernel_symbol = symtab
            .get(kernel_index)
            .and_then(|sym| symtab.name(bytes, sym))
            .ok_or(FullElfError::BadKernelSymbol { section })?;
        let words = reader
            .entries(section, 4)
            .filter(|d| !d.is_empty())
            .ok_or(FullElfError::MalformedGroup { section })?;
        let word =
            |i: usize| u32::from_le_bytes(words[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        if word(0) & GRP_COMDAT.0 == 0 {
            return Err(FullElfError::NotComdat { section });
        }
        let mut ctrl = 0;
        for i in 1..words.len() / 4 {
            let member = word(i);
            if member as usize >= reader.shdrs.len() {
                return Err(FullElfError::GroupMemberOutOfRange { section, member });
            }
            group_of.insert(member, section);
            if reader.names[member as usize].is_some_and(|n| n.starts_with(b".ctrltext")) {
                if reader.sh_type(member as usize) != SHT_PROGBITS.0 {
                    return Err(FullElfError::ControlCodeNotProgbits {
                        section: member as usize,
                    });
                }
                ctrl = member;
            }
        }
        let mut name = demangle_kernel_name(kernel_symbol).to_vec();
        name.push(b':');
        name.extend_from_slice(instance);
        groups.insert(
            section,
            Group {
                name,
                kernel_symbol: kernel_symbol.to_vec(),
                instance: instance.to_vec(),
                ctrl,
            },
        );
    }
    if groups.is_empty() {
        return Err(FullElfError::NoGroups);
    }
    Ok((groups, group_of))
}

/// ROCr's `ParseArgIndex`: decimal ASCII digits without overflow.
fn argument_index(name: &[u8]) -> Option<u32> {
    if name.is_empty() {
        return None;
    }
    name.iter().try_fold(0u32, |value, &b| {
        b.is_ascii_digit()
            .then(|| value.checked_mul(10)?.checked_add(u32::from(b - b'0')))
            .flatten()
    })
}

fn read_relocations(
    reader: &mut Reader<'_>,
    groups: &BTreeMap<usize, Group>,
    group_of: &HashMap<u32, usize>,
    abi_version: u8,
) -> FullResult<Vec<Relocation>> {
    let (Some(rela), Some(dynsym)) = (reader.find_last(".rela.dyn"), reader.find_last(".dynsym"))
    else {
        return Ok(Vec::new());
    };
    let Some(dynstr) = reader.linked(dynsym) else {
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
        .entries(rela, 12)
        .ok_or(bad(".rela.dyn lies outside the file"))?;
    let symbols = SymbolTable {
        entries: reader
            .entries(dynsym, 16)
            .ok_or(bad(".dynsym lies outside the file"))?,
        strings: dynstr,
    };
    let mut out = Vec::new();
    for i in 0..entries.len() / 12 {
        let r: &Rela32<LE> = pod_at(entries, i as u64 * 12).expect("in bounds");
        let sym_index = r.r_sym(LE);
        if sym_index >= symbols.count() {
            return Err(FullElfError::RelocationSymbolOutOfRange(sym_index));
        }
        let sym = symbols.get(sym_index).expect("index checked");
        let name = symbols
            .name(reader.bytes, sym)
            .ok_or(FullElfError::BadRelocationSymbolName(sym_index))?;
        // Only relocations against the control code of the group that lists the section last
        // count (ROCr's `sec2grp`); a section that is the control code of an earlier group too
        // patches nothing there.
        let target_section = u32::from(sym.st_shndx.get(LE).0);
        let Some(&group) = group_of.get(&target_section) else {
            continue;
        };
        if target_section != groups[&group].ctrl {
            continue;
        }
        let raw_addend = r.r_addend.get(LE) as u32;
        let (scheme, addend) = if abi_version == 1 {
            (raw_addend & 0xF, raw_addend >> 4)
        } else {
            (r.r_info.get(LE) & 0xFF, raw_addend)
        };
        let symbol = String::from_utf8_lossy(name).into_owned();
        let target = if name.starts_with(b".pdi") {
            if scheme != SCHEME_ADDRESS64 {
                return Err(FullElfError::PdiScheme { symbol, scheme });
            }
            match find_pdi_section(reader, name)? {
                0 => return Err(FullElfError::PdiSectionNotFound(symbol)),
                section => Target::Pdi(section, symbol),
            }
        } else if let Some(index) = argument_index(name) {
            if scheme != SCHEME_SHIM_DMA48 {
                return Err(FullElfError::ArgumentScheme { symbol, scheme });
            }
            if index > MAX_ARGUMENT_INDEX {
                return Err(FullElfError::ArgumentIndexOutOfRange(symbol));
            }
            Target::Argument(index)
        } else if name.iter().all(u8::is_ascii_digit) && !name.is_empty() {
            // Digits that overflow: ROCr refuses them as an unsupported symbol.
            return Err(FullElfError::ArgumentIndexOutOfRange(symbol));
        } else {
            let Some(variable) = std::str::from_utf8(name).ok().filter(|n| !n.is_empty()) else {
                return Err(FullElfError::UnsupportedRelocationSymbol(symbol));
            };
            if scheme != SCHEME_ADDRESS64 {
                return Err(FullElfError::ExternalScheme { symbol, scheme });
            }
            Target::External(variable.to_owned(), sym.st_size.get(LE))
        };
        out.push(Relocation {
            group,
            offset: r.r_offset.get(LE),
            scheme,
            addend,
            target,
        });
    }
    Ok(out)
}

/// The first section (from index 1) named `name`, 0 when there is none; every other section of
/// that name must hold the same bytes (ROCr's `find_pdi_section`).
fn find_pdi_section(reader: &Reader<'_>, name: &[u8]) -> FullResult<usize> {
    let mut found = 0;
    for index in 1..reader.shdrs.len() {
        if reader.names[index] != Some(name) {
            continue;
        }
        if found == 0 {
            found = index;
            continue;
        }
        match (reader.data(found), reader.data(index)) {
            (Some(a), Some(b)) if a == b => {}
            _ => {
                return Err(FullElfError::AmbiguousPdi(
                    String::from_utf8_lossy(name).into_owned(),
                ));
            }
        }
    }
    Ok(found)
}

fn build_kernel(
    reader: &Reader<'_>,
    index: usize,
    group: &Group,
    relocations: &[Relocation],
) -> FullResult<ElfKernel> {
    let ctrl = group.ctrl as usize;
    let name = || String::from_utf8_lossy(&group.name).into_owned();
    let code = reader
        .data(ctrl)
        .ok_or(FullElfError::SectionPastEnd(ctrl))?;
    if code.is_empty() {
        return Err(FullElfError::EmptyControlCode(name()));
    }
    let size = code.len() as u64;
    let fits =
        |offset: u32, need: u64| offset.is_multiple_of(4) && u64::from(offset) + need <= size;
    let mine = || relocations.iter().filter(|r| r.group == index);
    let mut pdis: Vec<PdiUse> = Vec::new();
    let mut pdi_contents: Vec<&[u8]> = Vec::new();
    for r in mine() {
        let Target::Pdi(section, symbol) = &r.target else {
            continue;
        };
        if !fits(r.offset, 8) {
            return Err(FullElfError::PdiSiteOutOfBounds {
                kernel: name(),
                offset: r.offset,
                size,
            });
        }
        if r.offset == 0 {
            return Err(FullElfError::PdiSiteAtZero(name()));
        }
        let bytes = reader
            .data(*section)
            .ok_or(FullElfError::SectionPastEnd(*section))?;
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
    // Argument sites are checked by argument index, as ROCr's ordered map visits them.
    let mut by_argument: BTreeMap<u32, Vec<Site>> = BTreeMap::new();
    for r in mine() {
        if let Target::Argument(arg) = r.target {
            by_argument.entry(arg).or_default().push(Site {
                offset: r.offset,
                addend: r.addend,
            });
        }
    }
    let args = by_argument.keys().next_back().map_or(0, |&max| max + 1);
    let mut arg_sites: Vec<Vec<Site>> = vec![Vec::new(); args as usize];
    for (arg, sites) in by_argument {
        if let Some(bad) = sites.iter().find(|s| !fits(s.offset, 12)) {
            return Err(FullElfError::ArgumentSiteOutOfBounds {
                kernel: name(),
                offset: bad.offset,
                size,
            });
        }
        arg_sites[arg as usize] = sites;
    }
    let mut externals: Vec<ExternalVariable> = Vec::new();
    for r in mine() {
        let Target::External(symbol, symbol_size) = &r.target else {
            continue;
        };
        if !fits(r.offset, 8) {
            return Err(FullElfError::ExternalSiteOutOfBounds {
                kernel: name(),
                symbol: symbol.clone(),
                offset: r.offset,
                size,
            });
        }
        match externals.iter_mut().find(|v| v.name == *symbol) {
            Some(v) => v.sites.push(r.offset),
            None => externals.push(ExternalVariable {
                name: symbol.clone(),
                size: *symbol_size,
                scheme: r.scheme,
                sites: vec![r.offset],
            }),
        }
    }
    Ok(ElfKernel {
        name: group.name.clone(),
        kernel_symbol: group.kernel_symbol.clone(),
        instance: group.instance.clone(),
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
    let wanted = Some(CONFIGURATION_NOTE.as_bytes());
    let Some(index) = reader.names.iter().position(|n| *n == wanted) else {
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
    /// The kernel name (UTF-8: [`kernels_from_full_elf`] refuses others).
    pub name: String,
    /// What the ELF says about this kernel (name, derived kernarg size, PDIs, arguments,
    /// external variables).
    pub info: ElfKernel,
    /// The partition width from `.note.xrt.configuration`, if the file records it.
    pub num_cols: Option<u32>,
}

impl<'a> FullElfKernel<'a> {
    /// The kernel name.
    pub fn name(&self) -> &str {
        &self.name
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
        Ok(Kernel::full_elf(self.name.clone(), self.elf, kernarg, cols))
    }
}

/// Parses `elf` and returns its kernels sorted by name, or only those in `names` (in the order
/// given) when a filter is passed; a name the ELF does not define is an error listing the ones
/// it does. Besides ROCr's rules this refuses what [`FullElf::stricter`] records and kernel
/// names that are not UTF-8 (packed names are text).
pub fn kernels_from_full_elf<'a>(
    elf: &'a [u8],
    names: Option<&[&str]>,
) -> Result<Vec<FullElfKernel<'a>>> {
    let parsed = FullElf::parse(elf)?;
    if let Some(e) = parsed.stricter.clone() {
        return Err(e.into());
    }
    let make = |info: &ElfKernel| -> Result<FullElfKernel<'a>> {
        let name = String::from_utf8(info.name.clone())
            .map_err(|_| FullElfError::NameNotUtf8(info.name_lossy()))?;
        Ok(FullElfKernel {
            elf,
            name,
            info: info.clone(),
            num_cols: parsed.num_cols,
        })
    };
    match names {
        None => parsed.kernels.iter().map(make).collect(),
        Some(names) => names
            .iter()
            .map(|name| {
                let found = parsed.kernel(name.as_bytes()).ok_or_else(|| {
                    Error::Refused(
                        Violation::new(Rule::NotInFullElf {
                            available: parsed.kernel_names().join(", "),
                        })
                        .kernel(*name),
                    )
                })?;
                make(found)
            })
            .collect(),
    }
}
