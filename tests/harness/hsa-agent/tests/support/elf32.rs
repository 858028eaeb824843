//! A minimal writer of aie2p "full ELFs" (ELF32, OSABI 0x45) in the layout ROCr's reader and
//! aiebu use: one COMDAT group per kernel instance holding its `.ctrltext.N`, a `.symtab`
//! whose instance symbols point at the kernel symbol, a `.pdi.0` section, and `.dynsym` /
//! `.rela.dyn` relocations from each control code to the PDI (Address64), its buffer
//! arguments (ShimDma48) and its external variables (Address64).

/// One kernel instance: its name (`sequence`), control code (a harness program), argument
/// count and external variables `(name, size)`.
pub struct Instance<'a> {
    pub name: &'a str,
    pub control: Vec<u8>,
    pub args: u32,
    pub variables: &'a [(&'a str, u32)],
}

struct Section {
    name: String,
    kind: u32,
    data: Vec<u8>,
    link: u32,
    info: u32,
    entsize: u32,
}

const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_RELA: u32 = 4;
const SHT_DYNSYM: u32 = 11;
const SHT_GROUP: u32 = 17;
const ADDRESS64: u32 = 8;
const SHIM_DMA48: u32 = 5;

fn sym(name: u32, size: u32, info: u8, shndx: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&name.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&size.to_le_bytes());
    b.push(info);
    b.push(0);
    b.extend_from_slice(&shndx.to_le_bytes());
    b
}

fn strtab(names: &[&str]) -> (Vec<u8>, Vec<u32>) {
    let mut data = vec![0u8];
    let mut offsets = Vec::new();
    for n in names {
        offsets.push(data.len() as u32);
        data.extend_from_slice(n.as_bytes());
        data.push(0);
    }
    (data, offsets)
}

/// A full ELF whose kernel symbol is `_Z4mainPcPcPc` (kernel names `main:<instance>`).
pub fn full_elf(instances: &[Instance<'_>]) -> Vec<u8> {
    let n = instances.len() as u32;
    // Section indices: 0 null, 1 .shstrtab, 2 .strtab, 3 .symtab, then per instance
    // .ctrltext.i and .group.i, then .pdi.0, .dynstr, .dynsym, .rela.dyn.
    let ctrl_index = |i: u32| 4 + 2 * i;
    let pdi_index = 4 + 2 * n;
    let (dynstr_index, dynsym_index) = (pdi_index + 1, pdi_index + 2);

    let mut sym_names = vec!["_Z4mainPcPcPc"];
    sym_names.extend(instances.iter().map(|i| i.name));
    let (strtab_data, str_off) = strtab(&sym_names);
    let mut symtab = vec![0u8; 16];
    symtab.extend(sym(str_off[0], 0, 0x12, 0));
    for (i, _) in instances.iter().enumerate() {
        // The instance symbol's st_shndx names the kernel symbol (index 1).
        symtab.extend(sym(str_off[1 + i], 0, 0x10, 1));
    }

    let mut sections = vec![
        Section {
            name: ".strtab".into(),
            kind: SHT_STRTAB,
            data: strtab_data,
            link: 0,
            info: 0,
            entsize: 0,
        },
        Section {
            name: ".symtab".into(),
            kind: SHT_SYMTAB,
            data: symtab,
            link: 2,
            info: 1,
            entsize: 16,
        },
    ];
    // Relocation targets: (dynsym name, size, patched section, offset, scheme).
    let mut targets: Vec<(String, u32, u32, u32, u32)> = Vec::new();
    for (i, inst) in instances.iter().enumerate() {
        let i = i as u32;
        let mut control = inst.control.clone();
        control.resize(control.len().next_multiple_of(4), 0);
        let mut site = control.len() as u32;
        targets.push((".pdi.0".into(), 0, ctrl_index(i), site, ADDRESS64));
        site += 8;
        for a in 0..inst.args {
            targets.push((a.to_string(), 0, ctrl_index(i), site, SHIM_DMA48));
            site += 12;
        }
        for (name, size) in inst.variables {
            targets.push((name.to_string(), *size, ctrl_index(i), site, ADDRESS64));
            site += 8;
        }
        control.resize(site as usize, 0);
        sections.push(Section {
            name: format!(".ctrltext.{i}"),
            kind: SHT_PROGBITS,
            data: control,
            link: 0,
            info: 0,
            entsize: 0,
        });
        let mut group = 1u32.to_le_bytes().to_vec();
        group.extend_from_slice(&ctrl_index(i).to_le_bytes());
        sections.push(Section {
            name: format!(".group.{i}"),
            kind: SHT_GROUP,
            data: group,
            link: 3,
            info: 2 + i,
            entsize: 4,
        });
    }
    sections.push(Section {
        name: ".pdi.0".into(),
        kind: SHT_PROGBITS,
        data: super::PDI.to_vec(),
        link: 0,
        info: 0,
        entsize: 0,
    });
    let names: Vec<&str> = targets.iter().map(|t| t.0.as_str()).collect();
    let (dynstr, dyn_off) = strtab(&names);
    let mut dynsym = vec![0u8; 16];
    let mut rela = Vec::new();
    for (k, (_, size, shndx, offset, scheme)) in targets.iter().enumerate() {
        dynsym.extend(sym(dyn_off[k], *size, 0x11, *shndx as u16));
        rela.extend_from_slice(&offset.to_le_bytes());
        rela.extend_from_slice(&((((k + 1) as u32) << 8) | scheme).to_le_bytes());
        rela.extend_from_slice(&0i32.to_le_bytes());
    }
    sections.push(Section {
        name: ".dynstr".into(),
        kind: SHT_STRTAB,
        data: dynstr,
        link: 0,
        info: 0,
        entsize: 0,
    });
    sections.push(Section {
        name: ".dynsym".into(),
        kind: SHT_DYNSYM,
        data: dynsym,
        link: dynstr_index,
        info: 1,
        entsize: 16,
    });
    sections.push(Section {
        name: ".rela.dyn".into(),
        kind: SHT_RELA,
        data: rela,
        link: dynsym_index,
        info: 0,
        entsize: 12,
    });

    let mut all_names = vec![".shstrtab"];
    all_names.extend(sections.iter().map(|s| s.name.as_str()));
    let (shstrtab, sh_off) = strtab(&all_names);
    let mut ordered = vec![Section {
        name: ".shstrtab".into(),
        kind: SHT_STRTAB,
        data: shstrtab,
        link: 0,
        info: 0,
        entsize: 0,
    }];
    ordered.extend(sections);

    let mut file = vec![0u8; 52];
    let mut headers = vec![0u8; 40];
    for (i, s) in ordered.iter().enumerate() {
        file.resize(file.len().next_multiple_of(4), 0);
        let offset = file.len() as u32;
        file.extend_from_slice(&s.data);
        for v in [
            sh_off[i],
            s.kind,
            0,
            0,
            offset,
            s.data.len() as u32,
            s.link,
            s.info,
            4,
            s.entsize,
        ] {
            headers.extend_from_slice(&v.to_le_bytes());
        }
    }
    file.resize(file.len().next_multiple_of(4), 0);
    let shoff = file.len() as u32;
    file.extend_from_slice(&headers);
    let shnum = (ordered.len() + 1) as u16;
    let mut h = Vec::with_capacity(52);
    h.extend_from_slice(b"\x7fELF");
    h.extend_from_slice(&[1, 1, 1, 0x45, 0]);
    h.extend_from_slice(&[0; 7]);
    h.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    h.extend_from_slice(&1u16.to_le_bytes()); // EM_M32, as aiebu writes
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes()); // entry
    h.extend_from_slice(&0u32.to_le_bytes()); // phoff
    h.extend_from_slice(&shoff.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes()); // flags
    h.extend_from_slice(&52u16.to_le_bytes());
    h.extend_from_slice(&32u16.to_le_bytes());
    h.extend_from_slice(&0u16.to_le_bytes());
    h.extend_from_slice(&40u16.to_le_bytes());
    h.extend_from_slice(&shnum.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes()); // .shstrtab
    file[..52].copy_from_slice(&h);
    file
}
