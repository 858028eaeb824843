//! The binaries the stand-in aircc writes: structurally valid PDIs, AIE full ELFs and axlf
//! xclbins, carrying the harness program as their control code / instruction stream.

use crate::attrs::Meaning;

/// `"NPUX"` as a little-endian word: the code of a kernel the harness cannot compute.
pub const NOT_COMPUTABLE_MAGIC: u32 = u32::from_le_bytes(*b"NPUX");
/// The version word after `NPUX`.
pub const NOT_COMPUTABLE_VERSION: u32 = 1;

/// The 16-byte sync pattern every real PDI starts with.
pub const PDI_SYNC: [u8; 16] = [
    0xdd, 0x00, 0x00, 0x00, 0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55, 0xcc, 0xbb, 0xaa, 0x99,
];

/// The kernel's instruction stream / control code: the program's binary form, or for a kernel
/// that is not computable `NPUX, 1, num_args, reason length, reason (UTF-8, zero-padded)`.
/// Always a non-empty multiple of 4 bytes.
pub fn kernel_code(meaning: &Meaning) -> Vec<u8> {
    let mut code = match meaning {
        Meaning::Program(p) => p.encode(),
        Meaning::NotComputable { num_args, reason } => {
            let mut c = Vec::new();
            for w in [
                NOT_COMPUTABLE_MAGIC,
                NOT_COMPUTABLE_VERSION,
                u32::from(*num_args),
                reason.len() as u32,
            ] {
                c.extend_from_slice(&w.to_le_bytes());
            }
            c.extend_from_slice(reason.as_bytes());
            c
        }
    };
    while !code.len().is_multiple_of(4) {
        code.push(0);
    }
    code
}

/// Reads the `NPUX` form back: `(num_args, reason)`.
pub fn not_computable(code: &[u8]) -> Option<(u8, String)> {
    let word = |i: usize| {
        code.get(i * 4..i * 4 + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if word(0)? != NOT_COMPUTABLE_MAGIC || word(1)? != NOT_COMPUTABLE_VERSION {
        return None;
    }
    let num_args = u8::try_from(word(2)?).ok()?;
    let len = word(3)? as usize;
    let reason = code.get(16..16 + len)?;
    Some((num_args, String::from_utf8_lossy(reason).into_owned()))
}

fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325 ^ seed, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A 16-byte fingerprint of the code (distinct kernels get distinct PDIs and UUIDs).
pub fn fingerprint(code: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&fnv1a(code, 0).to_le_bytes());
    out[8..].copy_from_slice(&fnv1a(code, 0x9e37_79b9_7f4a_7c15).to_le_bytes());
    out
}

/// A 64-byte PDI: the sync pattern, a marker, the code's fingerprint, filler.
pub fn pdi(code: &[u8]) -> Vec<u8> {
    let mut p = PDI_SYNC.to_vec();
    p.extend_from_slice(b"NPU-HARNESS PDI\0");
    p.extend_from_slice(&fingerprint(code));
    p.extend_from_slice(&[0x5a; 16]);
    p
}

// ---------------------------------------------------------------------------------------------
// AIE full ELF (the layout ROCr's aie_elf::Parse reads and aiebu's aie2_config writer emits).

/// The instance (runtime sequence) name; the kernel is dispatched as `main:sequence`.
pub const INSTANCE: &str = "sequence";

/// The mangled kernel symbol for `num_args` buffer parameters (`_Z4mainPcPcPc` for three).
pub fn kernel_symbol(num_args: u8) -> String {
    format!("_Z4main{}", "Pc".repeat(usize::from(num_args.max(1))))
}

/// Where the control code's patch sites are: after the code (padded to 16), one 8-byte PDI
/// address site, then one 16-byte slot per argument (12 bytes patched). The runtime patches
/// these sites; the program before them is never touched.
pub struct CtrlLayout {
    pub code_len: usize,
    pub pdi_site: usize,
    pub arg_sites: Vec<usize>,
    pub total: usize,
}

pub fn ctrl_layout(code_len: usize, num_args: u8) -> CtrlLayout {
    let pdi_site = code_len.div_ceil(16) * 16;
    let arg_sites: Vec<usize> = (0..usize::from(num_args))
        .map(|i| pdi_site + 16 + 16 * i)
        .collect();
    let total = pdi_site + 16 + 16 * usize::from(num_args);
    CtrlLayout {
        code_len,
        pdi_site,
        arg_sites,
        total,
    }
}

struct Section {
    name: &'static str,
    kind: u32,
    flags: u32,
    data: Vec<u8>,
    link: u32,
    info: u32,
    align: u32,
    entsize: u32,
}

fn sym32(name: u32, info: u8, shndx: u16) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0..4].copy_from_slice(&name.to_le_bytes());
    s[12] = info;
    s[14..16].copy_from_slice(&shndx.to_le_bytes());
    s
}

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// An aie2p full ELF (ELF32 LE, `EI_OSABI` 0x45, `EI_ABIVERSION` 0x10) with one kernel
/// instance `main:sequence`: `.ctrltext.0` holds `code` and the patch sites, `.pdi.0` the PDI,
/// `.rela.dyn` one `ShimDma48` (scheme 5) site per argument and one `Address64` (scheme 8)
/// site for the PDI, and `.note.xrt.configuration` a column count of 1.
pub fn full_elf(code: &[u8], num_args: u8, pdi: &[u8]) -> Vec<u8> {
    const SHT_PROGBITS: u32 = 1;
    const SHT_SYMTAB: u32 = 2;
    const SHT_STRTAB: u32 = 3;
    const SHT_RELA: u32 = 4;
    const SHT_NOTE: u32 = 7;
    const SHT_DYNSYM: u32 = 11;
    const SHT_GROUP: u32 = 17;
    const SHF_ALLOC: u32 = 2;
    const SHF_EXECINSTR: u32 = 4;
    const GLOBAL_OBJECT: u8 = 0x11;
    // Section indices (fixed order below).
    const SYMTAB: u32 = 3;
    const CTRLTEXT: u16 = 4;
    const DYNSTR: u32 = 7;
    const DYNSYM: u32 = 8;

    let layout = ctrl_layout(code.len(), num_args);
    let mut ctrl = code.to_vec();
    ctrl.resize(layout.total, 0);

    let kernel = kernel_symbol(num_args);
    let mut strtab = vec![0u8];
    let kernel_name = strtab.len() as u32;
    strtab.extend_from_slice(kernel.as_bytes());
    strtab.push(0);
    let instance_name = strtab.len() as u32;
    strtab.extend_from_slice(INSTANCE.as_bytes());
    strtab.push(0);
    let mut symtab = vec![0u8; 16];
    symtab.extend_from_slice(&sym32(kernel_name, 0, 0));
    // The instance symbol's st_shndx names the kernel symbol (the COMDAT convention).
    symtab.extend_from_slice(&sym32(instance_name, 0, 1));

    let mut dynstr = vec![0u8];
    let mut dynsym = vec![0u8; 16];
    let mut sym_names = vec![".pdi.0".to_owned()];
    sym_names.extend((0..num_args).map(|i| i.to_string()));
    for name in &sym_names {
        let at = dynstr.len() as u32;
        dynstr.extend_from_slice(name.as_bytes());
        dynstr.push(0);
        dynsym.extend_from_slice(&sym32(at, GLOBAL_OBJECT, CTRLTEXT));
    }
    let mut rela = Vec::new();
    let mut push_rela = |offset: usize, sym: u32, scheme: u32| {
        rela.extend_from_slice(&(offset as u32).to_le_bytes());
        rela.extend_from_slice(&((sym << 8) | scheme).to_le_bytes());
        rela.extend_from_slice(&0i32.to_le_bytes());
    };
    push_rela(layout.pdi_site, 1, 8);
    for (i, site) in layout.arg_sites.iter().enumerate() {
        push_rela(*site, 2 + i as u32, 5);
    }
    let mut note = words(&[4, 4, 6]);
    note.extend_from_slice(b"XRT\0");
    note.extend_from_slice(&1u32.to_le_bytes());

    let section = |name, kind, flags, data, link, info, align, entsize| Section {
        name,
        kind,
        flags,
        data,
        link,
        info,
        align,
        entsize,
    };
    let mut sections = vec![
        section(".shstrtab", SHT_STRTAB, 0, Vec::new(), 0, 0, 1, 0),
        section(".strtab", SHT_STRTAB, 0, strtab, 0, 0, 1, 0),
        section(".symtab", SHT_SYMTAB, 0, symtab, 2, 3, 4, 16),
        section(
            ".ctrltext.0",
            SHT_PROGBITS,
            SHF_ALLOC | SHF_EXECINSTR,
            ctrl,
            0,
            0,
            16,
            0,
        ),
        section(".pdi.0", SHT_PROGBITS, SHF_ALLOC, pdi.to_vec(), 0, 0, 16, 0),
        section(
            ".group.0",
            SHT_GROUP,
            0,
            words(&[1, u32::from(CTRLTEXT)]),
            SYMTAB,
            2,
            4,
            4,
        ),
        section(".dynstr", SHT_STRTAB, SHF_ALLOC, dynstr, 0, 0, 1, 0),
        section(".dynsym", SHT_DYNSYM, SHF_ALLOC, dynsym, DYNSTR, 1, 8, 16),
        section(".rela.dyn", SHT_RELA, SHF_ALLOC, rela, DYNSYM, 0, 8, 12),
        section(".note.xrt.configuration", SHT_NOTE, 0, note, 0, 0, 4, 0),
    ];
    let mut shstrtab = vec![0u8];
    let mut name_offsets = Vec::new();
    for s in &sections {
        name_offsets.push(shstrtab.len() as u32);
        shstrtab.extend_from_slice(s.name.as_bytes());
        shstrtab.push(0);
    }
    sections[0].data = shstrtab;

    let mut file = vec![0u8; 52];
    let mut headers = vec![0u8; 40]; // the NULL section header
    for (s, name) in sections.iter().zip(&name_offsets) {
        while !file.len().is_multiple_of(s.align.max(1) as usize) {
            file.push(0);
        }
        let offset = file.len() as u32;
        file.extend_from_slice(&s.data);
        for w in [
            *name,
            s.kind,
            s.flags,
            0,
            offset,
            s.data.len() as u32,
            s.link,
            s.info,
            s.align,
            s.entsize,
        ] {
            headers.extend_from_slice(&w.to_le_bytes());
        }
    }
    while !file.len().is_multiple_of(4) {
        file.push(0);
    }
    let shoff = file.len() as u32;
    file.extend_from_slice(&headers);

    let ident = [
        0x7f, b'E', b'L', b'F', 1, 1, 1, 0x45, 0x10, 0, 0, 0, 0, 0, 0, 0,
    ];
    file[..16].copy_from_slice(&ident);
    let put16 =
        |at: usize, v: u16, f: &mut Vec<u8>| f[at..at + 2].copy_from_slice(&v.to_le_bytes());
    put16(16, 2, &mut file); // ET_EXEC
    put16(18, 1, &mut file); // EM_M32, as aiebu writes
    file[20..24].copy_from_slice(&1u32.to_le_bytes());
    file[32..36].copy_from_slice(&shoff.to_le_bytes());
    put16(40, 52, &mut file);
    put16(46, 40, &mut file);
    put16(48, sections.len() as u16 + 1, &mut file);
    put16(50, 1, &mut file);
    file
}

// ---------------------------------------------------------------------------------------------
// axlf xclbin (XRT's `xclbin.h` layout).

const AXLF_HEADER_AT: usize = 304;
const SECTIONS_AT: usize = 456;

const MEM_TOPOLOGY: u32 = 6;
const EMBEDDED_METADATA: u32 = 2;
const IP_LAYOUT: u32 = 8;
const AIE_PARTITION: u32 = 32;

/// The xclbin kernel name (Triton-XDNA's XRT launcher looks for a kernel starting with it).
pub const XCLBIN_KERNEL: &str = "MLIR_AIE";
const DPU_KERNEL_ID: u64 = 0x901;

fn pad8(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(8) {
        v.push(0);
    }
}

fn put_u32(v: &mut [u8], at: usize, x: u32) {
    v[at..at + 4].copy_from_slice(&x.to_le_bytes());
}

fn put_u64(v: &mut [u8], at: usize, x: u64) {
    v[at..at + 8].copy_from_slice(&x.to_le_bytes());
}

/// The `AIE_PARTITION` section: one partition of `column_width` 1 holding one PDI.
pub fn aie_partition(pdi: &[u8], uuid: [u8; 16]) -> Vec<u8> {
    let mut s = vec![0u8; 184];
    // Partition name.
    let name_at = s.len();
    s.extend_from_slice(b"npu-harness\0");
    pad8(&mut s);
    // start_columns: [0] (u16).
    let cols_at = s.len();
    s.extend_from_slice(&0u16.to_le_bytes());
    pad8(&mut s);
    // aie_pdi[1] (96 bytes), filled in below.
    let pdi_entry = s.len();
    s.extend_from_slice(&[0u8; 96]);
    let image_at = s.len();
    s.extend_from_slice(pdi);
    pad8(&mut s);
    // cdo_groups[1] (96 bytes).
    let cdo_at = s.len();
    s.extend_from_slice(&[0u8; 96]);
    let ids_at = s.len();
    s.extend_from_slice(&DPU_KERNEL_ID.to_le_bytes());
    let cdo_name_at = s.len();
    s.extend_from_slice(b"DPU\0");
    let commit_at = s.len();
    s.extend_from_slice(b"npu-harness\0");
    pad8(&mut s);

    put_u32(&mut s, 4, name_at as u32); // mpo_name
    s[32..34].copy_from_slice(&1u16.to_le_bytes()); // info.column_width
    put_u32(&mut s, 40, 1); // info.start_columns.size
    put_u32(&mut s, 44, cols_at as u32);
    put_u32(&mut s, 120, 1); // aie_pdi.size
    put_u32(&mut s, 124, pdi_entry as u32);
    put_u32(&mut s, 128, commit_at as u32); // kernel_commit_id
    s[pdi_entry..pdi_entry + 16].copy_from_slice(&uuid);
    put_u32(&mut s, pdi_entry + 16, pdi.len() as u32);
    put_u32(&mut s, pdi_entry + 20, image_at as u32);
    put_u32(&mut s, pdi_entry + 24, 1); // cdo_groups.size
    put_u32(&mut s, pdi_entry + 28, cdo_at as u32);
    put_u32(&mut s, cdo_at, cdo_name_at as u32);
    s[cdo_at + 4] = 1; // CT_PRIMARY
    put_u64(&mut s, cdo_at + 8, 1); // pdi_id
    put_u32(&mut s, cdo_at + 16, 1); // dpu_kernel_ids.size
    put_u32(&mut s, cdo_at + 20, ids_at as u32);
    s
}

fn kernel_xml(num_args: u8) -> String {
    let mut args = String::new();
    let mut offset = 0x14u32;
    for (i, (name, q, size, ty)) in [
        ("opcode", 0, 8, "uint64_t"),
        ("instr", 1, 8, "char *"),
        ("ninstr", 0, 4, "uint32_t"),
    ]
    .into_iter()
    .enumerate()
    {
        let off = [0x00, 0x08, 0x10][i];
        args.push_str(&format!(
            "          <arg name=\"{name}\" addressQualifier=\"{q}\" id=\"{i}\" size=\"0x{size:x}\" \
             offset=\"0x{off:02X}\" hostOffset=\"0x0\" hostSize=\"0x{size:x}\" type=\"{ty}\"/>\n"
        ));
    }
    for b in 0..num_args.max(5) {
        args.push_str(&format!(
            "          <arg name=\"bo{b}\" addressQualifier=\"1\" id=\"{}\" size=\"0x8\" \
             offset=\"0x{offset:02X}\" hostOffset=\"0x0\" hostSize=\"0x8\" type=\"void*\"/>\n",
            3 + u32::from(b)
        ));
        offset += 8;
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<project>\n  <platform>\n    <device>\n      \
         <core>\n        <kernel name=\"{XCLBIN_KERNEL}\" language=\"c\" type=\"dpu\">\n          \
         <extended-data dpu_kernel_id=\"0x{DPU_KERNEL_ID:x}\" functional=\"0\" subtype=\"1\"/>\n\
         {args}          <instance name=\"MLIRAIE\"/>\n        </kernel>\n      </core>\n    \
         </device>\n  </platform>\n</project>\n"
    )
}

fn ip_layout() -> Vec<u8> {
    let mut s = vec![0u8; 8 + 80];
    put_u32(&mut s, 0, 1); // m_count
    put_u32(&mut s, 8, 7); // IP_PS_KERNEL
    // ps_kernel: subtype DPU (1), functional 0, kernel id 0x901 in bits 16..27.
    put_u32(&mut s, 12, 1 | ((DPU_KERNEL_ID as u32) << 16));
    put_u64(&mut s, 16, u64::MAX);
    let name = format!("{XCLBIN_KERNEL}:MLIRAIE");
    s[24..24 + name.len()].copy_from_slice(name.as_bytes());
    s
}

fn mem_topology() -> Vec<u8> {
    let mut s = vec![0u8; 8 + 40];
    put_u32(&mut s, 0, 1);
    s[8] = 2; // MEM_DRAM
    s[9] = 1; // used
    put_u64(&mut s, 16, 0x10_0000); // size in KB
    s[32..36].copy_from_slice(b"HOST");
    s
}

/// An axlf xclbin (`xclbin2`) with MEM_TOPOLOGY, AIE_PARTITION (one PDI, `column_width` 1),
/// EMBEDDED_METADATA (kernel `MLIR_AIE`) and IP_LAYOUT sections.
pub fn xclbin(pdi: &[u8], num_args: u8, uuid: [u8; 16]) -> Vec<u8> {
    let sections: Vec<(u32, &str, Vec<u8>)> = vec![
        (MEM_TOPOLOGY, "main_mem_topolo", mem_topology()),
        (AIE_PARTITION, "main_aie_partit", aie_partition(pdi, uuid)),
        (EMBEDDED_METADATA, "", kernel_xml(num_args).into_bytes()),
        (IP_LAYOUT, "", ip_layout()),
    ];
    let mut file = vec![0u8; SECTIONS_AT + 40 * sections.len()];
    file[..8].copy_from_slice(b"xclbin2\0");
    file[8..12].copy_from_slice(&(-1i32).to_le_bytes());
    file[12..296].fill(0xff); // reserved + key block, as xclbinutil leaves them
    put_u64(
        &mut file,
        296,
        u64::from_le_bytes(uuid[..8].try_into().unwrap_or([0; 8])),
    );
    let h = AXLF_HEADER_AT;
    file[h + 26] = 2; // version 2.x
    file[h + 27] = 23;
    file[h + 112..h + 128].copy_from_slice(&uuid);
    put_u32(&mut file, h + 144, sections.len() as u32);
    let mut data = file.len();
    let mut bodies = Vec::new();
    for (i, (kind, name, body)) in sections.iter().enumerate() {
        data = data.div_ceil(8) * 8;
        let sh = SECTIONS_AT + 40 * i;
        put_u32(&mut file, sh, *kind);
        file[sh + 4..sh + 4 + name.len()].copy_from_slice(name.as_bytes());
        put_u64(&mut file, sh + 24, data as u64);
        put_u64(&mut file, sh + 32, body.len() as u64);
        bodies.push((data, body));
        data += body.len();
    }
    for (at, body) in bodies {
        file.resize(at, 0);
        file.extend_from_slice(body);
    }
    let len = file.len() as u64;
    put_u64(&mut file, h, len);
    file
}

#[cfg(test)]
mod tests {
    use super::*;
    use npu_harness_program::Program;

    #[test]
    fn not_computable_code_round_trips() {
        let m = Meaning::NotComputable {
            num_args: 2,
            reason: "it reduces".into(),
        };
        let code = kernel_code(&m);
        assert_eq!(code.len() % 4, 0);
        assert_eq!(not_computable(&code), Some((2, "it reduces".into())));
        assert!(Program::decode(&code).is_err(), "devices must not run it");
        let p =
            Program::parse_text("args 1\n%0 = ptr arg0 f32\n%1 = load %0\nstore %0 %1\n").unwrap();
        assert_eq!(not_computable(&kernel_code(&Meaning::Program(p))), None);
    }

    #[test]
    fn pdi_starts_with_the_sync_pattern() {
        let a = pdi(b"abcd");
        assert_eq!(&a[..16], &PDI_SYNC);
        assert_ne!(a, pdi(b"abce"));
    }

    #[test]
    fn ctrl_sites_follow_the_code() {
        let l = ctrl_layout(40, 3);
        assert_eq!(l.pdi_site, 48);
        assert_eq!(l.arg_sites, vec![64, 80, 96]);
        assert_eq!(l.total, 112);
        assert!(l.arg_sites.iter().all(|s| s % 4 == 0 && s + 12 <= l.total));
    }
}
