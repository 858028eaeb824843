//! Reading an hsaco into a typed description.

use crate::arch::Arch;
use crate::container::{Container, SectionHeader};
use crate::error::{ContainerError, Result, Rule, Violation};
use crate::section::{AieTable, KernelView, Reader};

/// An hsaco file: its container and every section named like an AIE architecture.
#[derive(Debug, Clone)]
pub struct Hsaco<'a> {
    /// The ELF64 container (header, section headers, names).
    pub container: Container<'a>,
    /// Sections named `aie2` or `aie2p`, in section-header order (duplicates included).
    pub aie_sections: Vec<AieSection<'a>>,
}

/// A section named `aie2` or `aie2p`.
#[derive(Debug, Clone)]
pub struct AieSection<'a> {
    /// Section index in the container.
    pub index: usize,
    /// The architecture its name gives.
    pub arch: Arch,
    /// Its section header.
    pub header: SectionHeader,
    /// Its AIEK table, or why it has none (too small, wrong magic, outside the file).
    pub table: Result<AieTable<'a>, Rule>,
}

impl<'a> AieSection<'a> {
    /// The kernels under `reader`'s rules.
    pub fn kernels(&self, reader: Reader) -> Result<Vec<KernelView<'a>>, Violation> {
        let section = self.arch.name();
        let table = self
            .table
            .clone()
            .map_err(|rule| Violation::new(rule).section(section))?;
        table.kernels(reader).map_err(|v| v.section(section))
    }
}

/// Parses `bytes`; fails only when the file is not a readable ELF64 little-endian container.
/// Each AIE section's own problems are kept in [`AieSection::table`] for [`crate::check`] and
/// [`crate::dump`] to judge.
pub fn parse(bytes: &[u8]) -> Result<Hsaco<'_>> {
    let container = Container::read(bytes).map_err(ContainerError::Unreadable)?;
    let mut aie_sections = Vec::new();
    for (index, header) in container.sections.iter().enumerate() {
        let Some(arch) = container
            .name(index)
            .and_then(|n| std::str::from_utf8(n).ok())
            .and_then(Arch::from_name)
        else {
            continue;
        };
        // The dumper reads a NOBITS section as empty; ROCr's rules are applied in `check`.
        let table = match container.contents(index) {
            Some(data) => AieTable::read(data),
            None => Err(Rule::SectionTooSmall(0)),
        };
        aie_sections.push(AieSection {
            index,
            arch,
            header: *header,
            table,
        });
    }
    Ok(Hsaco {
        container,
        aie_sections,
    })
}

impl<'a> Hsaco<'a> {
    /// The first section named `arch` (the one the reference dumper reads).
    pub fn section(&self, arch: Arch) -> Option<&AieSection<'a>> {
        self.aie_sections.iter().find(|s| s.arch == arch)
    }

    /// The kernels of `arch`'s section under ROCr's parse rules.
    pub fn kernels(&self, arch: Arch) -> Result<Vec<KernelView<'a>>, Violation> {
        let section = self
            .section(arch)
            .ok_or_else(|| Violation::new(Rule::NoArchSection(arch)))?;
        section.kernels(Reader::Rocr)
    }
}
