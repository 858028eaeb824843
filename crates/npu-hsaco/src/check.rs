//! ROCr's AIE loader rules, applied without a device: would an agent of a given architecture
//! and column count load this file?
//!
//! The order follows the loader: the container (`IsAieCodeObject`), the agent's section
//! (`AieCode::Create`: first section named like the agent that is at least 48 bytes, inside the
//! image and starts with the magic), the section parse, then each kernel (`LoadAieCodeObject`:
//! kind, columns, PDI presence, and for FullElf kernels the nested ELF, the kernel lookup, the
//! kernarg size and a PDI site). Kernels are visited in name order.

use std::collections::HashMap;
use std::fmt;

use crate::arch::Arch;
use crate::container::Container;
use crate::error::{HsaStatus, Rule, Violation};
use crate::full_elf::{ElfKernel, FullElf};
use crate::inspect::{self, Hsaco};
use crate::section::{AieTable, HEADER_SIZE, KernelKind, KernelView, MAGIC, Reader};

/// Where loading stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The container is not an AIE code object ROCr can open.
    Container,
    /// `AieCode::Create`: finding and parsing the agent's section.
    Create,
    /// The per-kernel load checks.
    Kernel,
}

/// Why ROCr would refuse the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The loader stage that refuses.
    pub stage: Stage,
    /// The first rule broken, with section and kernel.
    pub violation: Violation,
}

impl Rejection {
    /// The status ROCr returns.
    pub fn status(&self) -> HsaStatus {
        self.violation.rule.status()
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.violation, self.status().name())
    }
}

/// What a FullElf kernel's control code needs, as the loader computes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullElfDetails {
    /// The kernel as read from the nested ELF.
    pub kernel: ElfKernel,
}

/// One kernel the loader looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCheck {
    /// The name (lossy UTF-8).
    pub name: String,
    /// `kind` as stored.
    pub kind: u32,
    pub insts_size: u32,
    pub pdi_size: u32,
    pub kernarg_size: u32,
    pub num_cols: u32,
    /// For FullElf kernels whose ELF was read.
    pub full_elf: Option<FullElfDetails>,
}

/// The outcome of [`check`]: the kernels visited and the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// Kernels in the order checked (name order), up to the one refused.
    pub kernels: Vec<KernelCheck>,
    /// `Ok(kernel count)` if ROCr would load the file.
    pub verdict: Result<usize, Rejection>,
}

impl CheckReport {
    /// Whether ROCr would load the file.
    pub fn accepted(&self) -> bool {
        self.verdict.is_ok()
    }

    fn reject(mut self, stage: Stage, violation: Violation) -> CheckReport {
        self.verdict = Err(Rejection { stage, violation });
        self
    }
}

/// The report as lines: one per kernel (with the nested ELF's details) and a `RESULT:` line.
impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for k in &self.kernels {
            writeln!(
                f,
                "kernel '{}' kind={} insts_size={} pdi_size={} kernarg={} num_cols={}",
                k.name, k.kind, k.insts_size, k.pdi_size, k.kernarg_size, k.num_cols
            )?;
            if let Some(d) = &k.full_elf {
                let e = &d.kernel;
                writeln!(
                    f,
                    "  full-elf: ctrl_code={} bytes, args={}, effective kernarg={}, pdis={}",
                    e.ctrl_code_size,
                    e.args,
                    e.kernarg_size,
                    e.pdis.len()
                )?;
                for (i, pdi) in e.pdis.iter().enumerate() {
                    let sites: Vec<String> = pdi.sites.iter().map(u32::to_string).collect();
                    writeln!(
                        f,
                        "    pdi[{i}] {} bytes, sites: {}",
                        pdi.size,
                        sites.join(" ")
                    )?;
                }
                for (i, sites) in e.arg_sites.iter().enumerate() {
                    write!(f, "    arg[{i}] sites:")?;
                    for s in sites {
                        write!(f, " (off={},addend={})", s.offset, s.addend)?;
                    }
                    writeln!(f)?;
                }
                for (i, v) in e.external_variables.iter().enumerate() {
                    let sites: Vec<String> = v.sites.iter().map(u32::to_string).collect();
                    writeln!(
                        f,
                        "    extern[{i}] {} size={} sites: {}",
                        v.name,
                        v.size,
                        sites.join(" ")
                    )?;
                }
            }
        }
        match &self.verdict {
            Ok(n) => writeln!(f, "RESULT: accepted ({n} kernels)"),
            Err(r) => {
                let what = match (r.stage, &r.violation.rule) {
                    (Stage::Create, _) => "AieCode::Create".to_string(),
                    (_, Rule::TooManyColumns { cols, agent }) => {
                        format!("num_cols {cols} vs agent {agent}")
                    }
                    (_, Rule::ZeroColumns) => "num_cols 0".to_string(),
                    (_, rule) => rule.to_string(),
                };
                writeln!(f, "RESULT: {what} -> {}", r.status().name())
            }
        }
    }
}

/// Checks the file bytes (a container ROCr cannot open is a rejection too).
pub fn check_bytes(bytes: &[u8], arch: Arch, agent_cols: u32) -> CheckReport {
    match inspect::parse(bytes) {
        Ok(hsaco) => check(&hsaco, arch, agent_cols),
        Err(_) => {
            let rule = Container::read(bytes).err().unwrap_or(Rule::NotElf);
            CheckReport {
                kernels: Vec::new(),
                verdict: Ok(0),
            }
            .reject(Stage::Container, Violation::new(rule))
        }
    }
}

/// Whether a section is one ROCr's section scan would consider: at least a header's size,
/// inside the image and the file, starting with the magic.
fn is_aiek(c: &Container<'_>, index: usize, image_size: u64) -> bool {
    let s = &c.sections[index];
    s.size >= u64::from(HEADER_SIZE)
        && s.offset <= image_size
        && s.size <= image_size - s.offset
        && c.raw_data(index)
            .is_some_and(|d| d[..4] == MAGIC.to_le_bytes())
}

/// Applies ROCr's loader rules for an agent of `arch` with `agent_cols` columns.
pub fn check(hsaco: &Hsaco<'_>, arch: Arch, agent_cols: u32) -> CheckReport {
    let report = CheckReport {
        kernels: Vec::new(),
        verdict: Ok(0),
    };
    let c = &hsaco.container;
    if c.header.e_version != 1 {
        return report.reject(
            Stage::Container,
            Violation::new(Rule::ElfVersion(c.header.e_version)),
        );
    }
    let image = c.rocr_elf_size();
    let candidates: Vec<usize> = (0..c.sections.len())
        .filter(|&i| is_aiek(c, i, image))
        .collect();
    if candidates.is_empty() {
        return report.reject(Stage::Container, Violation::new(Rule::NotAieCodeObject));
    }
    let mut chosen = None;
    for &i in &candidates {
        let Some(name) = c.name(i) else {
            let rule = if c.shstrtab_readable() {
                Rule::UnreadableSectionName(i)
            } else {
                Rule::BadShstrndx(c.header.e_shstrndx)
            };
            return report.reject(Stage::Create, Violation::new(rule));
        };
        if name == arch.name().as_bytes() {
            chosen = Some(i);
            break;
        }
    }
    let Some(index) = chosen else {
        return report.reject(Stage::Create, Violation::new(Rule::NoArchSection(arch)));
    };
    let data = c.raw_data(index).expect("candidates lie inside the file");
    let kernels = match AieTable::read(data)
        .map_err(Violation::new)
        .and_then(|t| t.kernels(Reader::Rocr))
    {
        Ok(k) => k,
        Err(v) => return report.reject(Stage::Create, v.section(arch.name())),
    };
    check_kernels(report, arch, agent_cols, kernels)
}

fn check_kernels(
    mut report: CheckReport,
    arch: Arch,
    agent_cols: u32,
    mut kernels: Vec<KernelView<'_>>,
) -> CheckReport {
    kernels.sort_by(|a, b| a.name.cmp(b.name));
    let count = kernels.len();
    let mut parsed: HashMap<u32, Result<FullElf, Rule>> = HashMap::new();
    for k in kernels {
        let name = k.name_lossy();
        let e = k.entry;
        report.kernels.push(KernelCheck {
            name: name.clone(),
            kind: e.kind,
            insts_size: e.insts_size,
            pdi_size: e.pdi_size,
            kernarg_size: e.kernarg_size,
            num_cols: e.num_cols,
            full_elf: None,
        });
        let refuse = |report: CheckReport, rule: Rule| {
            report.reject(
                Stage::Kernel,
                Violation::new(rule)
                    .section(arch.name())
                    .kernel(name.clone()),
            )
        };
        let Some(kind) = k.kind() else {
            return refuse(report, Rule::InvalidKind(e.kind));
        };
        if e.num_cols == 0 {
            return refuse(report, Rule::ZeroColumns);
        }
        if e.num_cols > agent_cols {
            return refuse(
                report,
                Rule::TooManyColumns {
                    cols: e.num_cols,
                    agent: agent_cols,
                },
            );
        }
        match kind {
            KernelKind::PdiInsts => {
                if k.pdi.is_none() {
                    return refuse(report, Rule::MissingPdi);
                }
            }
            KernelKind::FullElf => {
                if !arch.supports_full_elf() {
                    return refuse(report, Rule::FullElfArch(arch));
                }
                let elf = parsed
                    .entry(e.insts_offset)
                    .or_insert_with(|| FullElf::parse(k.insts).map_err(Rule::FullElf));
                let elf = match elf {
                    Ok(elf) => elf,
                    Err(rule) => return refuse(report, rule.clone()),
                };
                let Some(found) = std::str::from_utf8(k.name).ok().and_then(|n| elf.kernel(n))
                else {
                    let available = elf.kernel_names().join(", ");
                    return refuse(report, Rule::NotInFullElf { available });
                };
                let found = found.clone();
                let derived = found.kernarg_size;
                let pdis = found.pdis.len();
                report.kernels.last_mut().expect("pushed above").full_elf =
                    Some(FullElfDetails { kernel: found });
                if e.kernarg_size != 0 && e.kernarg_size != derived {
                    return refuse(
                        report,
                        Rule::KernargMismatch {
                            stored: e.kernarg_size,
                            derived,
                        },
                    );
                }
                if pdis == 0 {
                    return refuse(report, Rule::NoPdiSite);
                }
            }
        }
    }
    report.verdict = Ok(count);
    report
}
