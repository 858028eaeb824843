//! Builders for synthetic inputs: AIE full ELFs (ELF32), ELF64 containers with segments and
//! symbol tables (like a GPU code object), and xclbins. Written from the format descriptions,
//! so the readers under test are checked against an independent writer.

/// A section for [`write_elf32`] / [`write_elf64`]; indices of user sections start at 2
/// (0 is the null section, 1 the generated `.shstrtab`).
#[derive(Clone, Debug, Default)]
pub struct Sec {
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    pub data: Vec<u8>,
    pub link: u32,
    pub info: u32,
    pub align: u64,
    pub entsize: u64,
    /// Written as SHT_NOBITS-style size without data when set.
    pub nobits_size: Option<u64>,
}

impl Sec {
    pub fn new(name: &str, sh_type: u32, data: Vec<u8>) -> Sec {
        Sec {
            name: name.to_string(),
            sh_type,
            data,
            align: 1,
            ..Sec::default()
        }
    }
}

pub const SHT_PROGBITS: u32 = 1;
pub const SHT_SYMTAB: u32 = 2;
pub const SHT_STRTAB: u32 = 3;
pub const SHT_RELA: u32 = 4;
pub const SHT_REL: u32 = 9;
pub const SHT_NOTE: u32 = 7;
pub const SHT_NOBITS: u32 = 8;
pub const SHT_DYNSYM: u32 = 11;
pub const SHT_GROUP: u32 = 17;

fn name_table(sections: &[Sec]) -> (Vec<u8>, Vec<u32>) {
    let mut table = vec![0u8];
    let mut offsets = Vec::new();
    let shstrtab_name = table.len() as u32;
    table.extend_from_slice(b".shstrtab\0");
    offsets.push(shstrtab_name);
    for s in sections {
        offsets.push(table.len() as u32);
        table.extend_from_slice(s.name.as_bytes());
        table.push(0);
    }
    (table, offsets)
}

/// An ELF32 little-endian file: header, section data in order (4-aligned), section headers.
pub fn write_elf32(osabi: u8, abi_version: u8, sections: &[Sec]) -> Vec<u8> {
    let (names, name_offsets) = name_table(sections);
    let mut out = vec![0u8; 52];
    let mut headers: Vec<[u32; 10]> = vec![[0; 10]];
    let place = |out: &mut Vec<u8>, data: &[u8], align: u64| -> u32 {
        while !(out.len() as u64).is_multiple_of(align.max(1)) {
            out.push(0);
        }
        let at = out.len() as u32;
        out.extend_from_slice(data);
        at
    };
    let at = place(&mut out, &names, 1);
    headers.push([
        name_offsets[0],
        SHT_STRTAB,
        0,
        0,
        at,
        names.len() as u32,
        0,
        0,
        1,
        0,
    ]);
    for (s, name) in sections.iter().zip(&name_offsets[1..]) {
        let at = place(&mut out, &s.data, s.align);
        let size = s.nobits_size.unwrap_or(s.data.len() as u64) as u32;
        headers.push([
            *name,
            s.sh_type,
            s.flags as u32,
            0,
            at,
            size,
            s.link,
            s.info,
            s.align as u32,
            s.entsize as u32,
        ]);
    }
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    let shoff = out.len() as u32;
    for h in &headers {
        for v in h {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    let mut e = Vec::new();
    e.extend_from_slice(&[
        0x7f,
        b'E',
        b'L',
        b'F',
        1,
        1,
        1,
        osabi,
        abi_version,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ]);
    e.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    e.extend_from_slice(&1u16.to_le_bytes()); // EM_M32
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&0u32.to_le_bytes()); // entry
    e.extend_from_slice(&0u32.to_le_bytes()); // phoff
    e.extend_from_slice(&shoff.to_le_bytes());
    e.extend_from_slice(&0u32.to_le_bytes()); // flags
    e.extend_from_slice(&52u16.to_le_bytes());
    e.extend_from_slice(&0u16.to_le_bytes());
    e.extend_from_slice(&0u16.to_le_bytes());
    e.extend_from_slice(&40u16.to_le_bytes());
    e.extend_from_slice(&(headers.len() as u16).to_le_bytes());
    e.extend_from_slice(&1u16.to_le_bytes());
    out[..52].copy_from_slice(&e);
    out
}

/// One relocation of a full ELF's control code.
#[derive(Clone, Debug)]
pub struct Reloc {
    pub offset: u32,
    pub symbol: String,
    pub scheme: u32,
    pub addend: i32,
    /// `st_size` of the dynamic symbol (external variables).
    pub st_size: u32,
}

impl Reloc {
    pub fn pdi(offset: u32, section: &str) -> Reloc {
        Reloc {
            offset,
            symbol: section.to_string(),
            scheme: 8,
            addend: 0,
            st_size: 0,
        }
    }
    pub fn arg(offset: u32, index: u32, addend: i32) -> Reloc {
        Reloc {
            offset,
            symbol: index.to_string(),
            scheme: 5,
            addend,
            st_size: 0,
        }
    }
    pub fn external(offset: u32, name: &str, size: u32) -> Reloc {
        Reloc {
            offset,
            symbol: name.to_string(),
            scheme: 8,
            addend: 0,
            st_size: size,
        }
    }
}

/// One kernel instance (COMDAT group) of a full ELF.
#[derive(Clone, Debug)]
pub struct Instance {
    /// The instance symbol's name (bytes: it need not be UTF-8).
    pub name: Vec<u8>,
    pub ctrl: Vec<u8>,
    pub relocs: Vec<Reloc>,
    /// Put the control code in the group (false: a group without `.ctrltext`).
    pub has_ctrl: bool,
    /// List instance N's `.ctrltext.N` in this group instead of its own.
    pub ctrl_of: Option<usize>,
}

impl Instance {
    pub fn new(name: &str, ctrl_size: usize, relocs: Vec<Reloc>) -> Instance {
        Instance {
            name: name.as_bytes().to_vec(),
            ctrl: vec![0xA5; ctrl_size],
            relocs,
            has_ctrl: true,
            ctrl_of: None,
        }
    }
}

/// A synthetic aie2p full ELF in aiebu's layout.
#[derive(Clone, Debug)]
pub struct FullElfSpec {
    /// The kernel symbol's name (bytes: it need not be UTF-8).
    pub kernel_symbol: Vec<u8>,
    pub instances: Vec<Instance>,
    pub pdis: Vec<(String, Vec<u8>)>,
    pub abi_version: u8,
    pub osabi: u8,
    pub num_cols: Option<u32>,
    pub comdat: bool,
}

impl FullElfSpec {
    pub fn new(kernel_symbol: &str, instances: Vec<Instance>) -> FullElfSpec {
        FullElfSpec {
            kernel_symbol: kernel_symbol.as_bytes().to_vec(),
            instances,
            pdis: vec![(".pdi.0".to_string(), super::pseudo_random(7, 256))],
            abi_version: 0x10,
            osabi: 0x45,
            num_cols: Some(1),
            comdat: true,
        }
    }

    pub fn build(&self) -> Vec<u8> {
        let n = self.instances.len();
        // Section indices: 0 null, 1 .shstrtab, then user sections from 2.
        let strtab_idx = 2u32;
        let symtab_idx = 3u32;
        let ctrl_base = 4u32;
        let pdi_base = ctrl_base + n as u32;
        let group_base = pdi_base + self.pdis.len() as u32;
        let dynstr_idx = group_base + n as u32;
        let dynsym_idx = dynstr_idx + 1;

        let mut strtab = vec![0u8];
        let mut symtab = vec![0u8; 16];
        let sym = |strtab: &mut Vec<u8>, symtab: &mut Vec<u8>, name: &[u8], shndx: u16| {
            let off = strtab.len() as u32;
            strtab.extend_from_slice(name);
            strtab.push(0);
            symtab.extend_from_slice(&off.to_le_bytes());
            symtab.extend_from_slice(&0u32.to_le_bytes());
            symtab.extend_from_slice(&0u32.to_le_bytes());
            symtab.extend_from_slice(&[0, 0]);
            symtab.extend_from_slice(&shndx.to_le_bytes());
        };
        sym(&mut strtab, &mut symtab, &self.kernel_symbol, 0);
        for inst in &self.instances {
            sym(&mut strtab, &mut symtab, &inst.name, 1);
        }

        let mut sections = vec![
            Sec::new(".strtab", SHT_STRTAB, strtab),
            Sec {
                link: strtab_idx,
                info: 1 + n as u32,
                align: 4,
                entsize: 16,
                ..Sec::new(".symtab", SHT_SYMTAB, symtab)
            },
        ];
        for (i, inst) in self.instances.iter().enumerate() {
            sections.push(Sec {
                flags: 6,
                align: 16,
                ..Sec::new(&format!(".ctrltext.{i}"), SHT_PROGBITS, inst.ctrl.clone())
            });
        }
        for (name, bytes) in &self.pdis {
            sections.push(Sec {
                flags: 2,
                align: 16,
                ..Sec::new(name, SHT_PROGBITS, bytes.clone())
            });
        }
        for (i, inst) in self.instances.iter().enumerate() {
            let mut words = vec![u32::from(self.comdat)];
            if inst.has_ctrl {
                words.push(ctrl_base + inst.ctrl_of.unwrap_or(i) as u32);
            }
            let data = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            sections.push(Sec {
                link: symtab_idx,
                info: 2 + i as u32,
                align: 4,
                entsize: 4,
                ..Sec::new(&format!(".group.{i}"), SHT_GROUP, data)
            });
        }
        let mut dynstr = vec![0u8];
        let mut dynsym = vec![0u8; 16];
        let mut rela = Vec::new();
        for (i, inst) in self.instances.iter().enumerate() {
            for r in &inst.relocs {
                let index = (dynsym.len() / 16) as u32;
                let off = dynstr.len() as u32;
                dynstr.extend_from_slice(r.symbol.as_bytes());
                dynstr.push(0);
                dynsym.extend_from_slice(&off.to_le_bytes());
                dynsym.extend_from_slice(&0u32.to_le_bytes());
                dynsym.extend_from_slice(&r.st_size.to_le_bytes());
                dynsym.extend_from_slice(&[0x11, 0]);
                dynsym.extend_from_slice(&((ctrl_base + i as u32) as u16).to_le_bytes());
                let (info, addend) = if self.abi_version == 1 {
                    ((index << 8) | 10, (r.addend << 4) | r.scheme as i32)
                } else {
                    ((index << 8) | r.scheme, r.addend)
                };
                rela.extend_from_slice(&r.offset.to_le_bytes());
                rela.extend_from_slice(&info.to_le_bytes());
                rela.extend_from_slice(&addend.to_le_bytes());
            }
        }
        sections.push(Sec {
            flags: 2,
            ..Sec::new(".dynstr", SHT_STRTAB, dynstr)
        });
        sections.push(Sec {
            flags: 2,
            link: dynstr_idx,
            info: 1,
            align: 8,
            entsize: 16,
            ..Sec::new(".dynsym", SHT_DYNSYM, dynsym)
        });
        sections.push(Sec {
            flags: 2,
            link: dynsym_idx,
            align: 8,
            entsize: 12,
            ..Sec::new(".rela.dyn", SHT_RELA, rela)
        });
        if let Some(cols) = self.num_cols {
            let mut note = Vec::new();
            note.extend_from_slice(&4u32.to_le_bytes());
            note.extend_from_slice(&4u32.to_le_bytes());
            note.extend_from_slice(&6u32.to_le_bytes());
            note.extend_from_slice(b"XRT\0");
            note.extend_from_slice(&cols.to_le_bytes());
            sections.push(Sec {
                align: 4,
                ..Sec::new(".note.xrt.configuration", SHT_NOTE, note)
            });
        }
        write_elf32(self.osabi, self.abi_version, &sections)
    }
}

/// Moves section `index`'s data to the end of `elf` (an ELF32 from [`write_elf32`], after its
/// section header table) and declares it `extra` bytes longer than the data, so that its end
/// lies past the end of the file.
pub fn move_to_end_elf32(elf: &mut Vec<u8>, index: usize, extra: u32) {
    let shoff = u32::from_le_bytes(elf[32..36].try_into().unwrap()) as usize;
    let header = shoff + 40 * index;
    let field = |elf: &[u8], at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    let (offset, size) = (field(elf, header + 16) as usize, field(elf, header + 20));
    let data = elf[offset..offset + size as usize].to_vec();
    let new_offset = elf.len() as u32;
    elf.extend_from_slice(&data);
    elf[header + 16..header + 20].copy_from_slice(&new_offset.to_le_bytes());
    elf[header + 20..header + 24].copy_from_slice(&(size + extra).to_le_bytes());
}

/// The index of the section named `name` in an ELF32 from [`write_elf32`].
pub fn section_index_elf32(elf: &[u8], name: &str) -> usize {
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) as usize;
    let shoff = u32_at(32);
    let count = u16::from_le_bytes([elf[48], elf[49]]) as usize;
    let names = shoff + 40; // section 1 is .shstrtab
    let (names_at, names_size) = (u32_at(names + 16), u32_at(names + 20));
    let table = &elf[names_at..names_at + names_size];
    (0..count)
        .find(|&i| {
            let at = u32_at(shoff + 40 * i);
            table[at..].split(|&b| b == 0).next() == Some(name.as_bytes())
        })
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// `(name, type, flags, offset, size, link, info, align, entsize)`.
type Shdr64 = (u32, u32, u64, u64, u64, u32, u32, u64, u64);

/// One program header for [`write_elf64`]: `(p_type, section index whose range it covers)`.
pub type Segment = (u32, usize);

/// An ELF64 little-endian file with the given header values, program headers covering the
/// named sections, and sections laid out in order at their alignment.
pub fn write_elf64(
    e_type: u16,
    osabi: u8,
    e_flags: u32,
    sections: &[Sec],
    segments: &[Segment],
) -> Vec<u8> {
    let (names, name_offsets) = name_table(sections);
    let phoff = 64u64;
    let mut out = vec![0u8; 64 + 56 * segments.len()];
    let mut headers: Vec<Shdr64> = vec![(0, 0, 0, 0, 0, 0, 0, 0, 0)];
    let mut ranges = vec![(0u64, 0u64), (0, 0)];
    for (s, name) in sections.iter().zip(&name_offsets[1..]) {
        while !(out.len() as u64).is_multiple_of(s.align.max(1)) {
            out.push(0);
        }
        let at = out.len() as u64;
        out.extend_from_slice(&s.data);
        let size = s.nobits_size.unwrap_or(s.data.len() as u64);
        headers.push((
            *name, s.sh_type, s.flags, at, size, s.link, s.info, s.align, s.entsize,
        ));
        ranges.push((at, size));
    }
    let names_at = out.len() as u64;
    out.extend_from_slice(&names);
    headers.insert(
        1,
        (
            name_offsets[0],
            SHT_STRTAB,
            0,
            names_at,
            names.len() as u64,
            0,
            0,
            1,
            0,
        ),
    );
    ranges[1] = (names_at, names.len() as u64);
    // User sections were pushed after index 0; with .shstrtab inserted at 1 they start at 2.
    let ranges: Vec<(u64, u64)> = [ranges[0], ranges[1]]
        .into_iter()
        .chain(ranges[2..].iter().copied())
        .collect();
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    let shoff = out.len() as u64;
    for (name, ty, flags, offset, size, link, info, align, entsize) in &headers {
        out.extend_from_slice(&name.to_le_bytes());
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&link.to_le_bytes());
        out.extend_from_slice(&info.to_le_bytes());
        out.extend_from_slice(&align.to_le_bytes());
        out.extend_from_slice(&entsize.to_le_bytes());
    }
    for (i, (p_type, section)) in segments.iter().enumerate() {
        let (offset, size) = ranges[*section];
        let mut ph = Vec::new();
        ph.extend_from_slice(&p_type.to_le_bytes());
        ph.extend_from_slice(&5u32.to_le_bytes());
        ph.extend_from_slice(&offset.to_le_bytes());
        ph.extend_from_slice(&offset.to_le_bytes());
        ph.extend_from_slice(&offset.to_le_bytes());
        ph.extend_from_slice(&size.to_le_bytes());
        ph.extend_from_slice(&size.to_le_bytes());
        ph.extend_from_slice(&0x1000u64.to_le_bytes());
        let at = 64 + 56 * i;
        out[at..at + 56].copy_from_slice(&ph);
    }
    let mut e = Vec::new();
    e.extend_from_slice(&[
        0x7f, b'E', b'L', b'F', 2, 1, 1, osabi, 3, 0, 0, 0, 0, 0, 0, 0,
    ]);
    e.extend_from_slice(&e_type.to_le_bytes());
    e.extend_from_slice(&224u16.to_le_bytes());
    e.extend_from_slice(&1u32.to_le_bytes());
    e.extend_from_slice(&0u64.to_le_bytes());
    e.extend_from_slice(&(if segments.is_empty() { 0 } else { phoff }).to_le_bytes());
    e.extend_from_slice(&shoff.to_le_bytes());
    e.extend_from_slice(&e_flags.to_le_bytes());
    e.extend_from_slice(&64u16.to_le_bytes());
    e.extend_from_slice(&(if segments.is_empty() { 0u16 } else { 56 }).to_le_bytes());
    e.extend_from_slice(&(segments.len() as u16).to_le_bytes());
    e.extend_from_slice(&64u16.to_le_bytes());
    e.extend_from_slice(&(headers.len() as u16).to_le_bytes());
    e.extend_from_slice(&1u16.to_le_bytes());
    out[..64].copy_from_slice(&e);
    out
}

/// A GPU-code-object-like ELF64: segments, a symbol table linked to a string table, code.
pub fn gpu_like_code_object() -> Vec<u8> {
    let mut strtab = b"\0kernel\0kernel.kd\0".to_vec();
    strtab.resize(24, 0);
    let mut symtab = vec![0u8; 24];
    for (name, shndx) in [(1u32, 2u16), (8, 3)] {
        symtab.extend_from_slice(&name.to_le_bytes());
        symtab.extend_from_slice(&[0x12, 0]);
        symtab.extend_from_slice(&shndx.to_le_bytes());
        symtab.extend_from_slice(&0x100u64.to_le_bytes());
        symtab.extend_from_slice(&64u64.to_le_bytes());
    }
    let sections = vec![
        Sec {
            flags: 6,
            align: 256,
            ..Sec::new(".text", SHT_PROGBITS, super::pseudo_random(1, 300))
        },
        Sec {
            flags: 2,
            align: 64,
            ..Sec::new(".rodata", SHT_PROGBITS, super::pseudo_random(2, 64))
        },
        Sec {
            align: 4,
            ..Sec::new(".note", SHT_NOTE, super::pseudo_random(3, 40))
        },
        Sec {
            link: 6,
            info: 1,
            align: 8,
            entsize: 24,
            ..Sec::new(".symtab", SHT_SYMTAB, symtab)
        },
        Sec::new(".strtab", SHT_STRTAB, strtab),
        Sec {
            flags: 3,
            align: 16,
            nobits_size: Some(4096),
            ..Sec::new(".bss", SHT_NOBITS, Vec::new())
        },
    ];
    write_elf64(3, 64, 0x52c, &sections, &[(1, 2), (1, 3)])
}

/// An axlf xclbin with an `AIE_PARTITION` holding `pdis` and `column_width`, plus an unrelated
/// section before it.
pub fn xclbin(pdis: &[&[u8]], column_width: u16, partitions: usize) -> Vec<u8> {
    let mut part = vec![0u8; 184];
    part[32..34].copy_from_slice(&column_width.to_le_bytes());
    let records_at = part.len() as u32;
    part[120..124].copy_from_slice(&(pdis.len() as u32).to_le_bytes());
    part[124..128].copy_from_slice(&records_at.to_le_bytes());
    part.resize(part.len() + 96 * pdis.len(), 0);
    for (i, pdi) in pdis.iter().enumerate() {
        let image_at = part.len() as u32;
        part.extend_from_slice(pdi);
        let rec = records_at as usize + 96 * i;
        part[rec + 16..rec + 20].copy_from_slice(&(pdi.len() as u32).to_le_bytes());
        part[rec + 20..rec + 24].copy_from_slice(&image_at.to_le_bytes());
    }
    let other = vec![0x5Au8; 88];
    let mut sections: Vec<(u32, Vec<u8>)> = vec![(6, other)];
    for _ in 0..partitions {
        sections.push((32, part.clone()));
    }
    let mut out = vec![0xFFu8; 456 + 40 * sections.len()];
    out[..8].copy_from_slice(b"xclbin2\0");
    out[296..456].fill(0);
    out[448..452].copy_from_slice(&(sections.len() as u32).to_le_bytes());
    for (i, (kind, data)) in sections.iter().enumerate() {
        let at = out.len() as u64;
        out.extend_from_slice(data);
        let h = 456 + 40 * i;
        out[h..h + 40].fill(0);
        out[h..h + 4].copy_from_slice(&kind.to_le_bytes());
        out[h + 24..h + 32].copy_from_slice(&at.to_le_bytes());
        out[h + 32..h + 40].copy_from_slice(&(data.len() as u64).to_le_bytes());
    }
    let len = out.len() as u64;
    out[304..312].copy_from_slice(&len.to_le_bytes());
    out
}
