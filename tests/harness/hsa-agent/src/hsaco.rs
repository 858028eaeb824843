//! The agent's own small reader of AIE hsaco files — independent of the driver's hsaco crate,
//! so a bug there cannot hide behind the same bug here. It applies ROCr's load rules that
//! matter for dispatch: the arch section found by name in the ELF64 container, the AIEK
//! header, table and bounds, PdiInsts with a PDI and whole 32-bit words, the column count,
//! and for FullElf the instance's control code found through the ELF32's COMDAT groups.

use std::collections::HashSet;

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::section_header::{SHT_GROUP, SHT_PROGBITS};
use goblin::elf::{Elf, RelocSection, Symtab};

const AIEK_MAGIC: u32 = 0x4B45_4941;
const HEADER_SIZE: u32 = 48;
const ENTRY_SIZE: u32 = 44;
const KIND_PDI_INSTS: u32 = 0;
const KIND_FULL_ELF: u32 = 1;
const OSABI_AIE2P: u8 = 0x45;
const GRP_COMDAT: u32 = 1;

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
    pub name: String,
    pub code: Code,
    pub pdi_size: usize,
    pub kernarg_size: u32,
    /// For FullElf: the argument count the control code's relocations imply, if any.
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

/// Reads the kernels of the `arch` section of `hsaco` for an agent with `columns` columns.
pub fn read(hsaco: &[u8], arch: &str, columns: u32) -> Result<Vec<Kernel>, Refusal> {
    let section = arch_section(hsaco, arch)?;
    let entries = parse_section(section)?;
    entries
        .into_iter()
        .map(|e| load_entry(section, e, arch, columns))
        .collect()
}

/// The first section named `arch` that carries the AIEK magic (ROCr's rule).
fn arch_section<'a>(hsaco: &'a [u8], arch: &str) -> Result<&'a [u8], Refusal> {
    if hsaco.len() < 64 || !hsaco.starts_with(b"\x7fELF") {
        return Err(invalid("the code object is not an ELF file"));
    }
    let elf =
        Elf::parse(hsaco).map_err(|e| invalid(format!("the ELF container is malformed: {e}")))?;
    if !elf.is_64 {
        return Err(invalid("the hsaco container must be an ELF64 file"));
    }
    for sh in &elf.section_headers {
        let (off, size) = (sh.sh_offset as usize, sh.sh_size as usize);
        let Some(bytes) = off.checked_add(size).and_then(|end| hsaco.get(off..end)) else {
            continue;
        };
        if size < HEADER_SIZE as usize || u32_at(bytes, 0) != Some(AIEK_MAGIC) {
            continue;
        }
        if elf.shdr_strtab.get_at(sh.sh_name) == Some(arch) {
            return Ok(bytes);
        }
    }
    Err(Refusal {
        incompatible: true,
        rule: format!("the code object has no AIE section for this agent's arch {arch:?}"),
    })
}

struct Entry {
    name: String,
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
        let nul = rest
            .iter()
            .position(|b| *b == 0)
            .ok_or_else(|| invalid(format!("AIE section: kernel {i}'s name has no NUL")))?;
        let name = String::from_utf8_lossy(&rest[..nul]).into_owned();
        if insts_size == 0 {
            return Err(invalid(format!(
                "kernel {name:?}: empty instruction stream"
            )));
        }
        if kind == KIND_PDI_INSTS && insts_size % 4 != 0 {
            return Err(invalid(format!(
                "kernel {name:?}: PdiInsts instructions must be whole 32-bit words, got {insts_size} bytes"
            )));
        }
        if !in_pool(insts_off, insts_size) {
            return Err(invalid(format!(
                "kernel {name:?}: instructions outside the blob pool"
            )));
        }
        if pdi_size != 0 && !in_pool(pdi_off, pdi_size) {
            return Err(invalid(format!(
                "kernel {name:?}: PDI outside the blob pool"
            )));
        }
        if pdi_size == 0 && pdi_off != 0 {
            return Err(invalid(format!(
                "kernel {name:?}: pdi_offset set without a PDI"
            )));
        }
        if kind == KIND_FULL_ELF && pdi_size != 0 {
            return Err(invalid(format!(
                "kernel {name:?}: a FullElf kernel carries no PDI"
            )));
        }
        if !seen.insert(name.clone()) {
            return Err(invalid(format!(
                "kernel {name:?} appears twice in the section"
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
    let name = e.name;
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
    let instance = full_elf_instance(&insts, &name)
        .map_err(|rule| invalid(format!("kernel {name:?}: full ELF: {rule}")))?;
    let computed = instance.args.map(|n| 16 * n);
    if e.kernarg_size != 0 && computed.is_some_and(|c| c != e.kernarg_size) {
        return Err(invalid(format!(
            "kernel {name:?}: kernarg_size {} does not match the {} arguments its control code patches",
            e.kernarg_size,
            instance.args.unwrap_or(0)
        )));
    }
    Ok(Kernel {
        name,
        code: Code::Control(instance.control),
        pdi_size: instance.pdi_bytes,
        kernarg_size: if e.kernarg_size != 0 {
            e.kernarg_size
        } else {
            computed.unwrap_or(0)
        },
        elf_args: instance.args,
        variables: instance.variables,
    })
}

struct Instance {
    control: Vec<u8>,
    args: Option<u32>,
    pdi_bytes: usize,
    variables: Vec<ExternalVariable>,
}

/// `_Z<len><name>...` → `<name>`; anything else unchanged.
fn demangle(symbol: &str) -> &str {
    let Some(rest) = symbol.strip_prefix("_Z") else {
        return symbol;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    match rest[..digits].parse::<usize>() {
        Ok(len) if len > 0 && digits + len <= rest.len() => &rest[digits..digits + len],
        _ => symbol,
    }
}

/// Finds the COMDAT group whose kernel name is `wanted` and reads its control code, the
/// argument count and external variables its relocations name, and the PDIs it patches in.
fn full_elf_instance(bytes: &[u8], wanted: &str) -> Result<Instance, String> {
    if bytes.len() < 52 || !bytes.starts_with(b"\x7fELF") || bytes[4] != 1 || bytes[5] != 1 {
        return Err("not a little-endian ELF32".into());
    }
    if bytes[7] != OSABI_AIE2P {
        return Err("not an aie2p AIE ELF (EI_OSABI must be 0x45)".into());
    }
    let elf = Elf::parse(bytes).map_err(|e| format!("malformed: {e}"))?;
    let shdrs = &elf.section_headers;
    let name_of = |i: usize| shdrs.get(i).and_then(|s| elf.shdr_strtab.get_at(s.sh_name));
    let data_of = |i: usize| -> Option<&[u8]> {
        let s = shdrs.get(i)?;
        let off = s.sh_offset as usize;
        bytes.get(off..off.checked_add(s.sh_size as usize)?)
    };
    if elf.syms.is_empty() {
        return Err("missing or malformed .symtab".into());
    }
    let sym_name = |i: usize| {
        elf.syms
            .get(i)
            .and_then(|s| elf.strtab.get_at(s.st_name))
            .ok_or_else(|| format!("bad symbol index {i}"))
    };
    let mut groups = 0;
    for (gi, g) in shdrs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.sh_type == SHT_GROUP)
    {
        groups += 1;
        let words: Vec<u32> = data_of(gi)
            .ok_or("malformed group section")?
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        if words.first().is_none_or(|f| f & GRP_COMDAT == 0) {
            return Err("group is not a COMDAT group".into());
        }
        let instance_sym = elf
            .syms
            .get(g.sh_info as usize)
            .ok_or("bad group signature symbol")?;
        let instance = sym_name(g.sh_info as usize)?;
        let kernel = sym_name(instance_sym.st_shndx)?;
        if format!("{}:{instance}", demangle(kernel)) != wanted {
            continue;
        }
        let ctrl = words[1..]
            .iter()
            .map(|m| *m as usize)
            .rfind(|m| name_of(*m).is_some_and(|n| n.starts_with(".ctrltext")))
            .ok_or("the group has no .ctrltext control code")?;
        if shdrs[ctrl].sh_type != SHT_PROGBITS {
            return Err("control code section holds no data".into());
        }
        let control = data_of(ctrl)
            .ok_or("section extends past end of file")?
            .to_vec();
        if control.is_empty() {
            return Err("empty control code".into());
        }
        let (args, pdi_bytes, variables) = relocations(&elf, bytes, ctrl, &data_of)?;
        return Ok(Instance {
            control,
            args,
            pdi_bytes,
            variables,
        });
    }
    if groups == 0 {
        return Err("no COMDAT groups: not a group ELF".into());
    }
    Err(format!("no kernel instance named {wanted:?}"))
}

type Found = (Option<u32>, usize, Vec<ExternalVariable>);

fn relocations<'a>(
    elf: &Elf<'a>,
    bytes: &'a [u8],
    ctrl: usize,
    data_of: &dyn Fn(usize) -> Option<&'a [u8]>,
) -> Result<Found, String> {
    let shdrs = &elf.section_headers;
    let find = |name: &str| {
        shdrs
            .iter()
            .position(|s| elf.shdr_strtab.get_at(s.sh_name) == Some(name))
    };
    let (Some(dynsym), Some(rela)) = (find(".dynsym"), find(".rela.dyn")) else {
        return Ok((None, 0, Vec::new()));
    };
    let ctx = Ctx::new(Container::Little, Endian::Little);
    let ds = &shdrs[dynsym];
    if ds.sh_entsize != 16 || shdrs[rela].sh_entsize != 12 {
        return Err("malformed .dynsym or .rela.dyn".into());
    }
    let syms = Symtab::parse(
        bytes,
        ds.sh_offset as usize,
        (ds.sh_size / 16) as usize,
        ctx,
    )
    .map_err(|e| format!("malformed .dynsym: {e}"))?;
    let strtab = data_of(ds.sh_link as usize).ok_or("malformed .dynsym string table")?;
    let relocs = RelocSection::parse(
        bytes,
        shdrs[rela].sh_offset as usize,
        shdrs[rela].sh_size as usize,
        true,
        ctx,
    )
    .map_err(|e| format!("malformed .rela.dyn: {e}"))?;
    let (mut max_arg, mut pdis, mut variables) = (None::<u32>, HashSet::new(), Vec::new());
    for r in relocs.iter() {
        let sym = syms.get(r.r_sym).ok_or("relocation symbol out of range")?;
        if sym.st_shndx != ctrl {
            continue;
        }
        let name = strtab
            .get(sym.st_name..)
            .and_then(|s| s.split(|b| *b == 0).next())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .ok_or("bad relocation symbol name")?;
        if name.starts_with(".pdi") {
            let pdi = find(&name).ok_or_else(|| format!("PDI section {name} not found"))?;
            pdis.insert((name, shdrs[pdi].sh_size as usize));
        } else if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
            let index: u32 = name
                .parse()
                .map_err(|_| "kernel argument index out of range")?;
            if index > 4095 {
                return Err("kernel argument index out of range".into());
            }
            max_arg = Some(max_arg.map_or(index, |m| m.max(index)));
        } else if !variables.iter().any(|v: &ExternalVariable| v.name == name) {
            variables.push(ExternalVariable {
                name,
                size: sym.st_size,
            });
        }
    }
    let pdi_bytes = pdis.iter().map(|(_, s)| s).sum();
    Ok((max_arg.map(|m| m + 1), pdi_bytes, variables))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangling_takes_the_length_prefixed_name() {
        assert_eq!(demangle("_Z4mainPcPcPc"), "main");
        assert_eq!(demangle("_Z0x"), "_Z0x");
        assert_eq!(demangle("_Z9ab"), "_Z9ab");
        assert_eq!(demangle("plain"), "plain");
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
}
