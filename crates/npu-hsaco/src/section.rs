//! The AIEK table: the content of one `aie2`/`aie2p` section.
//!
//! Layout (all little-endian, no padding, no alignment): a 48-byte header, `kernel_count`
//! 44-byte entries, the NUL-terminated names in table order, then the blob pool holding every
//! distinct instruction stream, PDI and full ELF once, in order of first use (for each kernel its
//! insts before its PDI). [`build_section`] writes it exactly as the reference packer does;
//! [`AieTable`] reads one back without trusting any of its numbers.

use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::HashSet;

use crate::arch::Arch;
use crate::error::{Result, Rule, Violation};

/// `"AIEK"` read as a little-endian u32.
pub const MAGIC: u32 = 0x4B45_4941;
/// The only major version ROCr and the dumper accept.
pub const VERSION_MAJOR: u16 = 1;
/// The minor version the packer writes.
pub const VERSION_MINOR: u16 = 0;
/// Size of the header the packer writes (readers accept larger).
pub const HEADER_SIZE: u32 = 48;
/// Size of a kernel entry the packer writes (readers accept larger).
pub const ENTRY_SIZE: u32 = 44;

/// What a kernel entry's blobs hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// An NPU instruction stream plus a PDI (kind 0).
    PdiInsts,
    /// A complete AIE full ELF, with its PDIs inside (kind 1).
    FullElf,
}

impl KernelKind {
    /// The value stored in the entry's `kind` field.
    pub fn code(self) -> u32 {
        match self {
            KernelKind::PdiInsts => 0,
            KernelKind::FullElf => 1,
        }
    }

    /// The kind stored as `code`, if it is one.
    pub fn from_code(code: u32) -> Option<KernelKind> {
        match code {
            0 => Some(KernelKind::PdiInsts),
            1 => Some(KernelKind::FullElf),
            _ => None,
        }
    }

    /// The name the reference dumper prints.
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::PdiInsts => "PdiInsts",
            KernelKind::FullElf => "FullElf",
        }
    }
}

/// One kernel to pack. Blobs are borrowed where the caller already holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel<'a> {
    /// The HSA symbol name (exactly; no `.kd`).
    pub name: Cow<'a, str>,
    /// What the blobs hold.
    pub kind: KernelKind,
    /// The instruction stream (PdiInsts) or the whole full ELF (FullElf).
    pub insts: Cow<'a, [u8]>,
    /// The PDI; `None` or empty means none (always none for FullElf).
    pub pdi: Option<Cow<'a, [u8]>>,
    /// Bytes of the kernarg buffer: 16 per buffer argument (0 lets ROCr derive it for FullElf).
    pub kernarg_size: u32,
    /// Width of the partition the kernel was compiled for.
    pub num_cols: u32,
}

impl<'a> Kernel<'a> {
    /// A PdiInsts kernel.
    pub fn pdi_insts(
        name: impl Into<Cow<'a, str>>,
        insts: impl Into<Cow<'a, [u8]>>,
        pdi: impl Into<Cow<'a, [u8]>>,
        kernarg_size: u32,
        num_cols: u32,
    ) -> Kernel<'a> {
        Kernel {
            name: name.into(),
            kind: KernelKind::PdiInsts,
            insts: insts.into(),
            pdi: Some(pdi.into()),
            kernarg_size,
            num_cols,
        }
    }

    /// A FullElf kernel embedding `elf`; see [`crate::full_elf::kernels_from_full_elf`] for
    /// names, kernarg sizes and column counts derived from the ELF itself.
    pub fn full_elf(
        name: impl Into<Cow<'a, str>>,
        elf: impl Into<Cow<'a, [u8]>>,
        kernarg_size: u32,
        num_cols: u32,
    ) -> Kernel<'a> {
        Kernel {
            name: name.into(),
            kind: KernelKind::FullElf,
            insts: elf.into(),
            pdi: None,
            kernarg_size,
            num_cols,
        }
    }

    /// The PDI bytes, empty when there is none.
    pub fn pdi_bytes(&self) -> &[u8] {
        self.pdi.as_deref().unwrap_or(&[])
    }
}

/// How strictly [`build_section`] judges its kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validation {
    /// Refuse everything [`crate::check()`] refuses (the default for packing).
    Loadable,
    /// Refuse only what makes a malformed table, like the reference packer's `build_section`
    /// (which accepts e.g. a PdiInsts kernel without a PDI).
    Format,
}

/// Builds the AIEK section for `kernels` in table order, refusing anything
/// [`crate::check()`] refuses for an agent of `arch` with the most columns such agents have.
pub fn build_section(arch: Arch, kernels: &[Kernel<'_>]) -> Result<Vec<u8>> {
    build_section_with(arch, kernels, Validation::Loadable)
}

/// Builds the AIEK section with the chosen [`Validation`].
pub fn build_section_with(
    arch: Arch,
    kernels: &[Kernel<'_>],
    validation: Validation,
) -> Result<Vec<u8>> {
    check_format(kernels)?;
    let table = write_table(kernels)?;
    if validation == Validation::Loadable {
        // The loader check itself judges the table, with the most columns an agent of the
        // architecture has; pack errors name the kernel, not the section being built.
        crate::check::table_verdict(&table, arch, arch.default_agent_columns()).map_err(|r| {
            Violation {
                section: None,
                ..r.violation
            }
        })?;
    }
    Ok(table)
}

fn refuse(kernel: &Kernel<'_>, rule: Rule) -> Violation {
    Violation::new(rule).kernel(kernel.name.as_ref())
}

/// The reference packer's own checks, plus a NUL in a name (which the table cannot hold).
fn check_format(kernels: &[Kernel<'_>]) -> Result<(), Violation> {
    let mut seen = HashSet::new();
    for kernel in kernels {
        if kernel.name.contains('\0') {
            return Err(refuse(kernel, Rule::NameHasNul));
        }
        if !seen.insert(kernel.name.as_ref()) {
            return Err(refuse(kernel, Rule::DuplicateName));
        }
        if kernel.insts.is_empty() {
            return Err(refuse(kernel, Rule::EmptyInsts));
        }
        if kernel.kind == KernelKind::FullElf && !kernel.pdi_bytes().is_empty() {
            return Err(refuse(kernel, Rule::FullElfWithPdi));
        }
    }
    Ok(())
}

/// Places blobs in the pool: equal bytes share one copy, first use decides the order. Nothing
/// is copied until the whole section is known to fit.
struct Pool<'k> {
    /// Distinct blobs in pool order.
    blobs: Vec<&'k [u8]>,
    len: u64,
    /// Blobs already placed, by length, so that only equal-length blobs are ever compared.
    placed: HashMap<usize, Vec<(&'k [u8], u64)>>,
}

impl<'k> Pool<'k> {
    /// Returns the blob's pool offset, or `None` for an empty blob (which takes no space).
    fn place(&mut self, blob: &'k [u8]) -> Option<u64> {
        if blob.is_empty() {
            return None;
        }
        let same_len = self.placed.entry(blob.len()).or_default();
        if let Some((_, offset)) = same_len.iter().find(|(b, _)| *b == blob) {
            return Some(*offset);
        }
        let offset = self.len;
        self.len += blob.len() as u64;
        self.blobs.push(blob);
        same_len.push((blob, offset));
        Some(offset)
    }
}

fn write_table(kernels: &[Kernel<'_>]) -> Result<Vec<u8>, Violation> {
    let count = kernels.len() as u64;
    let strings_offset = u64::from(HEADER_SIZE) + u64::from(ENTRY_SIZE) * count;
    let strings_size: u64 = kernels.iter().map(|k| k.name.len() as u64 + 1).sum();
    let pool_offset = strings_offset + strings_size;

    let mut pool = Pool {
        blobs: Vec::new(),
        len: 0,
        placed: HashMap::new(),
    };
    let mut placed = Vec::with_capacity(kernels.len());
    for kernel in kernels {
        let insts = pool.place(&kernel.insts);
        let pdi = pool.place(kernel.pdi_bytes());
        placed.push((insts, pdi));
    }
    let total = pool_offset + pool.len;
    if total > u64::from(u32::MAX) {
        return Err(Violation::new(Rule::SectionTooLarge(total)));
    }
    // Every value below fits u32 because the whole section does.
    let u32_of = |v: u64| v as u32;

    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&VERSION_MAJOR.to_le_bytes());
    out.extend_from_slice(&VERSION_MINOR.to_le_bytes());
    for field in [
        HEADER_SIZE,
        u32_of(count),
        ENTRY_SIZE,
        u32_of(strings_offset),
        u32_of(strings_size),
        u32_of(pool_offset),
        0,
        0,
        0,
        0,
    ] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    let mut name_offset = 0u64;
    for (kernel, (insts, pdi)) in kernels.iter().zip(&placed) {
        let insts_offset = insts.map_or(0, |o| pool_offset + o);
        let (pdi_offset, pdi_size) = match pdi {
            Some(o) => (pool_offset + o, kernel.pdi_bytes().len() as u64),
            None => (0, 0),
        };
        for field in [
            u32_of(name_offset),
            u32_of(insts_offset),
            u32_of(kernel.insts.len() as u64),
            u32_of(pdi_offset),
            u32_of(pdi_size),
            kernel.kernarg_size,
            kernel.num_cols,
            kernel.kind.code(),
            0,
            0,
            0,
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        name_offset += kernel.name.len() as u64 + 1;
    }
    for kernel in kernels {
        out.extend_from_slice(kernel.name.as_bytes());
        out.push(0);
    }
    for blob in pool.blobs {
        out.extend_from_slice(blob);
    }
    debug_assert_eq!(out.len() as u64, total);
    Ok(out)
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The header of an AIEK table, every field as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableHeader {
    pub version_major: u16,
    pub version_minor: u16,
    pub header_size: u32,
    pub kernel_count: u32,
    pub kernel_entry_size: u32,
    pub string_table_offset: u32,
    pub string_table_size: u32,
    pub blob_pool_offset: u32,
}

/// A kernel entry, every field as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEntry {
    pub name_offset: u32,
    pub insts_offset: u32,
    pub insts_size: u32,
    pub pdi_offset: u32,
    pub pdi_size: u32,
    pub kernarg_size: u32,
    pub num_cols: u32,
    pub kind: u32,
}

/// An AIEK section as stored: the magic has been checked, nothing else.
#[derive(Debug, Clone, Copy)]
pub struct AieTable<'a> {
    bytes: &'a [u8],
    /// The header fields.
    pub header: TableHeader,
}

/// A kernel entry that passed the validation in use, with its blobs and name resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelView<'a> {
    /// Position in the kernel table.
    pub index: usize,
    /// The name bytes (without the NUL).
    pub name: &'a [u8],
    /// The fields as stored.
    pub entry: RawEntry,
    /// The instruction stream or nested full ELF.
    pub insts: &'a [u8],
    /// The PDI, when `pdi_size` is not 0.
    pub pdi: Option<&'a [u8]>,
}

impl KernelView<'_> {
    /// The name, with invalid UTF-8 replaced (for messages).
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(self.name).into_owned()
    }

    /// The kind, if the stored value is one.
    pub fn kind(&self) -> Option<KernelKind> {
        KernelKind::from_code(self.entry.kind)
    }
}

/// Which reader's rules [`AieTable::kernels`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// ROCr's `AieCode::Parse` (region order, insts % 4, unique names, at least one kernel).
    Rocr,
    /// The reference dumper (bounds, kind, UTF-8 names; no region order, no uniqueness).
    Dumper,
}

impl<'a> AieTable<'a> {
    /// Reads the header; fails only on a short section or a wrong magic.
    pub fn read(bytes: &'a [u8]) -> Result<AieTable<'a>, Rule> {
        if bytes.len() < HEADER_SIZE as usize {
            return Err(Rule::SectionTooSmall(bytes.len() as u64));
        }
        if u32_at(bytes, 0) != MAGIC {
            return Err(Rule::BadMagic);
        }
        let header = TableHeader {
            version_major: u16_at(bytes, 4),
            version_minor: u16_at(bytes, 6),
            header_size: u32_at(bytes, 8),
            kernel_count: u32_at(bytes, 12),
            kernel_entry_size: u32_at(bytes, 16),
            string_table_offset: u32_at(bytes, 20),
            string_table_size: u32_at(bytes, 24),
            blob_pool_offset: u32_at(bytes, 28),
        };
        Ok(AieTable { bytes, header })
    }

    /// The section bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Entry `index`, if it lies inside the section.
    pub fn entry(&self, index: u32) -> Option<RawEntry> {
        let h = &self.header;
        let start = u64::from(h.header_size) + u64::from(index) * u64::from(h.kernel_entry_size);
        if start + u64::from(ENTRY_SIZE) > self.size() {
            return None;
        }
        let b = &self.bytes[start as usize..];
        Some(RawEntry {
            name_offset: u32_at(b, 0),
            insts_offset: u32_at(b, 4),
            insts_size: u32_at(b, 8),
            pdi_offset: u32_at(b, 12),
            pdi_size: u32_at(b, 16),
            kernarg_size: u32_at(b, 20),
            num_cols: u32_at(b, 24),
            kind: u32_at(b, 28),
        })
    }

    fn blob(&self, offset: u32, size: u32) -> &'a [u8] {
        &self.bytes[offset as usize..offset as usize + size as usize]
    }

    /// Whether `[offset, offset+size)` lies within `[pool, section end]`.
    fn in_pool(&self, offset: u32, size: u32) -> bool {
        offset >= self.header.blob_pool_offset && u64::from(offset) + u64::from(size) <= self.size()
    }

    /// Both readers require an entry's instructions, and its PDI when it has one, to lie in
    /// the blob pool.
    fn payloads_in_pool(&self, e: &RawEntry) -> Result<(), Rule> {
        if !self.in_pool(e.insts_offset, e.insts_size) {
            return Err(Rule::InstsOutsidePool {
                offset: e.insts_offset,
                size: e.insts_size,
            });
        }
        if e.pdi_size != 0 && !self.in_pool(e.pdi_offset, e.pdi_size) {
            return Err(Rule::PdiOutsidePool {
                offset: e.pdi_offset,
                size: e.pdi_size,
            });
        }
        Ok(())
    }

    /// The NUL-terminated name at `name_offset`, if it ends inside the string table.
    fn name_at(&self, name_offset: u32) -> Option<&'a [u8]> {
        let h = &self.header;
        let start = u64::from(h.string_table_offset) + u64::from(name_offset);
        let end = u64::from(h.string_table_offset) + u64::from(h.string_table_size);
        let region = self
            .bytes
            .get(start as usize..end.min(self.size()) as usize)?;
        let nul = region.iter().position(|&b| b == 0)?;
        Some(&region[..nul])
    }

    fn check_header(&self, reader: Reader) -> Result<(), Rule> {
        let h = &self.header;
        let size = self.size();
        if h.version_major != VERSION_MAJOR {
            return Err(Rule::VersionMajor(h.version_major));
        }
        // ROCr checks header size first, the dumper entry size first; both refuse either.
        let (first, second) = (
            Rule::HeaderSize(h.header_size),
            Rule::EntrySize(h.kernel_entry_size),
        );
        let header_bad = h.header_size < HEADER_SIZE;
        let entry_bad = h.kernel_entry_size < ENTRY_SIZE;
        match reader {
            Reader::Rocr if header_bad => return Err(first),
            Reader::Rocr if entry_bad => return Err(second),
            Reader::Dumper if entry_bad => return Err(second),
            Reader::Dumper if header_bad => return Err(first),
            _ => {}
        }
        let table_end =
            u64::from(h.header_size) + u64::from(h.kernel_count) * u64::from(h.kernel_entry_size);
        if table_end > size {
            return Err(Rule::KernelTableOutOfSection {
                offset: h.header_size,
                count: h.kernel_count,
                entry_size: h.kernel_entry_size,
                size,
            });
        }
        let strings_end = u64::from(h.string_table_offset) + u64::from(h.string_table_size);
        if reader == Reader::Rocr && u64::from(h.string_table_offset) < table_end {
            return Err(Rule::StringTableOverlapsKernelTable {
                offset: h.string_table_offset,
                table_end,
            });
        }
        if strings_end > size {
            return Err(Rule::StringTableOutOfSection {
                offset: h.string_table_offset,
                size: h.string_table_size,
                section_size: size,
            });
        }
        if reader == Reader::Rocr && u64::from(h.blob_pool_offset) < strings_end {
            return Err(Rule::PoolOverlapsStringTable {
                offset: h.blob_pool_offset,
                strings_end,
            });
        }
        if u64::from(h.blob_pool_offset) > size {
            return Err(Rule::PoolOutOfSection {
                offset: h.blob_pool_offset,
                size,
            });
        }
        Ok(())
    }

    fn check_entry(&self, e: &RawEntry, reader: Reader) -> Result<&'a [u8], Rule> {
        let h = &self.header;
        let name_rules = || -> Result<&'a [u8], Rule> {
            if e.name_offset >= h.string_table_size {
                return Err(Rule::NameOffsetOutOfTable {
                    offset: e.name_offset,
                    size: h.string_table_size,
                });
            }
            self.name_at(e.name_offset).ok_or(Rule::NameNotTerminated)
        };
        match reader {
            Reader::Rocr => {
                if e.insts_size == 0 {
                    return Err(Rule::EmptyInsts);
                }
                if e.kind == KernelKind::PdiInsts.code() && !e.insts_size.is_multiple_of(4) {
                    return Err(Rule::InstsNotWordMultiple(u64::from(e.insts_size)));
                }
                self.payloads_in_pool(e)?;
                if e.pdi_size == 0 && e.pdi_offset != 0 {
                    return Err(Rule::PdiOffsetWithoutPdi(e.pdi_offset));
                }
                if e.kind == KernelKind::FullElf.code() && e.pdi_size != 0 {
                    return Err(Rule::FullElfWithPdi);
                }
                name_rules()
            }
            Reader::Dumper => {
                if KernelKind::from_code(e.kind).is_none() {
                    return Err(Rule::InvalidKind(e.kind));
                }
                if e.kind == KernelKind::FullElf.code() && e.pdi_size != 0 {
                    return Err(Rule::FullElfWithPdi);
                }
                if e.insts_size == 0 {
                    return Err(Rule::EmptyInsts);
                }
                self.payloads_in_pool(e)?;
                let name = name_rules()?;
                std::str::from_utf8(name).map_err(|_| Rule::NameNotUtf8)?;
                Ok(name)
            }
        }
    }

    /// Validates the table with `reader`'s rules, in that reader's order, and returns the
    /// kernels in table order; the error names the first rule broken (and the entry's name or
    /// `#index` when it concerns one).
    pub fn kernels(&self, reader: Reader) -> Result<Vec<KernelView<'a>>, Violation> {
        self.check_header(reader).map_err(Violation::new)?;
        let mut out = Vec::with_capacity(self.header.kernel_count.min(1 << 16) as usize);
        let mut names = HashSet::new();
        for index in 0..self.header.kernel_count {
            // In bounds: check_header verified the whole table fits.
            let entry = self.entry(index).expect("kernel table bounds were checked");
            let label = || match self.name_at(entry.name_offset) {
                Some(n) if entry.name_offset < self.header.string_table_size => {
                    String::from_utf8_lossy(n).into_owned()
                }
                _ => format!("#{index}"),
            };
            let name = self
                .check_entry(&entry, reader)
                .map_err(|rule| Violation::new(rule).kernel(label()))?;
            if reader == Reader::Rocr && !names.insert(name) {
                return Err(Violation::new(Rule::DuplicateName).kernel(label()));
            }
            out.push(KernelView {
                index: index as usize,
                name,
                entry,
                insts: self.blob(entry.insts_offset, entry.insts_size),
                pdi: (entry.pdi_size != 0).then(|| self.blob(entry.pdi_offset, entry.pdi_size)),
            });
        }
        if reader == Reader::Rocr && out.is_empty() {
            return Err(Violation::new(Rule::NoKernels));
        }
        Ok(out)
    }
}
