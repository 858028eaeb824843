//! ROCr's AIE loader rules, applied without a device: would an agent of a given architecture
//! and column count load this file?
//!
//! The order follows the loader: the container (`GElfImage::initAsBuffer` and
//! `AieCode::IsAieCodeObject`, see [`crate::elf_image`]), the agent's section
//! (`AieCode::Create`: first section named like the agent that is at least 48 bytes, inside the
//! image and starts with the magic), the section parse (`AieCode::Parse`), then each kernel
//! (`ExecutableImpl::LoadAieCodeObject` in `loader/executable.cpp`: kind, columns, PDI
//! presence, and for FullElf kernels the nested ELF, the kernel lookup, the kernarg size and a
//! PDI site). Sources: `core/runtime/amd_aie_code.cpp`, `core/runtime/amd_aie_elf.cpp` and
//! `loader/executable.cpp` of StefanBS/rocm-systems @ 04441d8e (the newest AIE loader found),
//! `libamdhsacode/amd_elf_image.cpp` of ROCm/rocm-systems @ 92bf721e and of that fork.
//!
//! ROCr keeps its kernels in an `unordered_map` and visits them in hash order; every rule but
//! one gives the same verdict in any order, so kernels are visited here in name order. The
//! exception: entries that share one nested ELF are served by a single parse, made with the
//! size of whichever entry comes first. When entries give the shared ELF different sizes and
//! the sizes lead to different verdicts, ROCr's verdict is unknowable and the file is refused
//! ([`Rule::SharedElfSizes`]).
//!
//! Only when ROCr would load the file are this crate's stricter rules applied; each says why
//! ROCr's verdict is not followed ([`crate::RocrVerdict::Accepts`]): an `e_shentsize` other than
//! 64, a section name that is not terminated inside the name table, what
//! [`crate::full_elf::FullElf::stricter`] records, an empty kernel name, and a kernarg size that
//! is not 16 bytes for each of 1 to 16 buffer arguments.

use std::collections::HashMap;
use std::fmt;

use crate::arch::Arch;
use crate::container::{Container, SHDR_SIZE};
use crate::elf_image::{self, Name};
use crate::error::{HsaStatus, RocrVerdict, Rule, Violation};
use crate::full_elf::{ElfKernel, FullElf};
use crate::inspect::{self, Hsaco};
use crate::section::{AieTable, HEADER_SIZE, KernelKind, KernelView, MAGIC, Reader};

/// The largest kernarg size this crate accepts: 16 buffer arguments of 16 bytes.
pub const MAX_KERNARG_SIZE: u32 = 16 * 16;

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

/// Why the file is refused: the rule, and what ROCr itself does with the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The loader stage at which the rule applies.
    pub stage: Stage,
    /// The first rule broken, with section and kernel.
    pub violation: Violation,
}

impl Rejection {
    /// What ROCr does with the file.
    pub fn rocr(&self) -> RocrVerdict {
        self.violation.rule.rocr()
    }

    /// The status ROCr returns, when it refuses the file with one.
    pub fn status(&self) -> Option<HsaStatus> {
        self.violation.rule.status()
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.violation;
        match self.rocr() {
            RocrVerdict::Refuses(status) => write!(f, "{v} ({})", status.name()),
            RocrVerdict::Faults => write!(f, "{v} ({FAULT})"),
            RocrVerdict::Accepts { because } => {
                write!(f, "refused here, ROCr accepts it: {v}, because {because}")
            }
            RocrVerdict::Undetermined { because } => {
                write!(
                    f,
                    "refused here, ROCr may accept it: {v}, because {because}"
                )
            }
        }
    }
}

/// What the report says when ROCr crashes instead of refusing.
const FAULT: &str = "no status: ROCr crashes or throws on this file";

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
            Err(r) => match r.rocr() {
                // The words of the loader harness the reference verdicts were recorded with.
                RocrVerdict::Refuses(status) => {
                    let what = match (r.stage, &r.violation.rule) {
                        (Stage::Create, _) => "AieCode::Create".to_string(),
                        (_, Rule::TooManyColumns { cols, agent }) => {
                            format!("num_cols {cols} vs agent {agent}")
                        }
                        (_, Rule::ZeroColumns) => "num_cols 0".to_string(),
                        (_, rule) => rule.to_string(),
                    };
                    writeln!(f, "RESULT: {what} -> {}", status.name())
                }
                RocrVerdict::Faults => writeln!(f, "RESULT: {} -> {FAULT}", r.violation),
                RocrVerdict::Accepts { .. } | RocrVerdict::Undetermined { .. } => {
                    writeln!(f, "RESULT: {r}")
                }
            },
        }
    }
}

/// Checks the file bytes (a container ROCr cannot open is a rejection too).
pub fn check_bytes(bytes: &[u8], arch: Arch, agent_cols: u32) -> CheckReport {
    match inspect::parse(bytes) {
        Ok(hsaco) => check(&hsaco, arch, agent_cols),
        Err(_) => {
            let rule = Container::read(bytes).err().unwrap_or(Rule::NotElf);
            CheckReport::new().reject(Stage::Container, Violation::new(rule))
        }
    }
}

impl CheckReport {
    fn new() -> CheckReport {
        CheckReport {
            kernels: Vec::new(),
            verdict: Ok(0),
        }
    }
}

/// The first finding ROCr accepts but this crate refuses, kept until ROCr's own verdict is
/// known.
type Stricter = Option<(Stage, Violation)>;

/// Whether a section is one ROCr's section scan (`FindArchSection`) would consider: at least a
/// header's size as libelf reads it, inside the image and the file, starting with the magic.
fn is_aiek(c: &Container<'_>, index: usize, image_size: u64) -> bool {
    let s = &c.sections[index];
    let size = elf_image::section_size(c, index);
    size >= u64::from(HEADER_SIZE)
        && s.offset <= image_size
        && size <= image_size - s.offset
        && has_magic(c, index)
}

fn has_magic(c: &Container<'_>, index: usize) -> bool {
    let s = &c.sections[index];
    s.size >= u64::from(HEADER_SIZE)
        && c.raw_data(index)
            .is_some_and(|d| d[..4] == MAGIC.to_le_bytes())
}

/// Why no section is an AIE section for ROCr: one with the magic that libelf cannot read, if
/// there is one.
fn invisible_aie_section(c: &Container<'_>) -> Rule {
    (0..c.sections.len())
        .find(|&i| has_magic(c, i) && elf_image::libelf_size(c, i).is_none())
        .map_or(Rule::NotAieCodeObject, |i| {
            let s = &c.sections[i];
            Rule::UnreadableAieSection {
                section: i,
                sh_type: s.sh_type,
                entry_size: elf_image::libelf_entry_size(s.sh_type, s.flags, c.header.e_machine),
            }
        })
}

/// Applies ROCr's loader rules for an agent of `arch` with `agent_cols` columns, then, if ROCr
/// would load the file, this crate's stricter rules.
pub fn check(hsaco: &Hsaco<'_>, arch: Arch, agent_cols: u32) -> CheckReport {
    let report = CheckReport::new();
    let c = &hsaco.container;
    if let Err(rule) = elf_image::open(c) {
        return report.reject(Stage::Container, Violation::new(rule));
    }
    let mut stricter: Stricter = None;
    if c.header.e_shnum != 0 && usize::from(c.header.e_shentsize) != SHDR_SIZE {
        stricter = Some((
            Stage::Container,
            Violation::new(Rule::ShentSize(c.header.e_shentsize)),
        ));
    }
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
        return report.reject(Stage::Container, Violation::new(invisible_aie_section(c)));
    }
    let mut chosen = None;
    for &i in &candidates {
        let name = match elf_image::section_name(c, i) {
            Ok(name) => name,
            Err(rule) => return report.reject(Stage::Create, Violation::new(rule)),
        };
        if let Name::RunsPastTable(_) = name {
            stricter.get_or_insert((
                Stage::Create,
                Violation::new(Rule::UnterminatedSectionName(i)),
            ));
        }
        if name.bytes() == arch.name().as_bytes() {
            chosen = Some(i);
            break;
        }
    }
    let Some(index) = chosen else {
        return report.reject(Stage::Create, Violation::new(Rule::NoArchSection(arch)));
    };
    let data = c.raw_data(index).expect("candidates lie inside the file");
    check_table(report, data, arch, agent_cols, stricter)
}

/// ROCr's verdict (then this crate's stricter rules) on one AIEK table, as if it were the
/// agent's section of an otherwise clean container: what packing checks before it writes.
pub fn table_verdict(section: &[u8], arch: Arch, agent_cols: u32) -> Result<usize, Rejection> {
    check_table(CheckReport::new(), section, arch, agent_cols, None).verdict
}

fn check_table(
    report: CheckReport,
    section: &[u8],
    arch: Arch,
    agent_cols: u32,
    stricter: Stricter,
) -> CheckReport {
    let kernels = match AieTable::read(section)
        .map_err(Violation::new)
        .and_then(|t| t.kernels(Reader::Rocr))
    {
        Ok(k) => k,
        Err(v) => return report.reject(Stage::Create, v.section(arch.name())),
    };
    check_kernels(report, arch, agent_cols, kernels, stricter)
}

/// The checks of one kernel that do not depend on the order ROCr visits kernels in.
fn own_rules(k: &KernelView<'_>, arch: Arch, agent_cols: u32) -> Result<KernelKind, Rule> {
    let e = &k.entry;
    let kind = k.kind().ok_or(Rule::InvalidKind(e.kind))?;
    if e.num_cols == 0 {
        return Err(Rule::ZeroColumns);
    }
    if e.num_cols > agent_cols {
        return Err(Rule::TooManyColumns {
            cols: e.num_cols,
            agent: agent_cols,
        });
    }
    match kind {
        KernelKind::PdiInsts if k.pdi.is_none() => Err(Rule::MissingPdi),
        KernelKind::FullElf if !arch.supports_full_elf() => Err(Rule::FullElfArch(arch)),
        _ => Ok(kind),
    }
}

/// The loader's rules for a FullElf entry served by `elf` (its nested ELF as parsed).
fn elf_rules(k: &KernelView<'_>, elf: &Result<FullElf, Rule>) -> Result<ElfKernel, Rule> {
    let elf = elf.as_ref().map_err(Clone::clone)?;
    let Some(found) = elf.kernel(k.name) else {
        let available = elf.kernel_names().join(", ");
        return Err(Rule::NotInFullElf { available });
    };
    let derived = found.kernarg_size;
    if k.entry.kernarg_size != 0 && k.entry.kernarg_size != derived {
        return Err(Rule::KernargMismatch {
            stored: k.entry.kernarg_size,
            derived,
        });
    }
    if found.pdis.is_empty() {
        return Err(Rule::NoPdiSite);
    }
    Ok(found.clone())
}

/// The FullElf entries sharing one nested ELF (one `insts_offset`), in name order, and the
/// ELF parsed with each size they give it.
struct SharedElf<'k, 'a> {
    entries: Vec<&'k KernelView<'a>>,
    /// `(size, parse)` in the order the sizes first appear among the entries.
    parses: Vec<(u32, Result<FullElf, Rule>)>,
}

impl SharedElf<'_, '_> {
    /// The parse ROCr uses when it visits the entries in name order.
    fn first(&self) -> &Result<FullElf, Rule> {
        &self.parses[0].1
    }

    /// Whether every entry passes with every parse (`Some(true)`), with none (`Some(false)`
    /// for "some entry fails with every parse"), or the answer depends on which entry ROCr
    /// visits first (`None`).
    fn verdict(&self) -> Option<bool> {
        let passes: Vec<bool> = self
            .parses
            .iter()
            .map(|(_, elf)| self.entries.iter().all(|k| elf_rules(k, elf).is_ok()))
            .collect();
        if passes.iter().all(|&p| p) {
            Some(true)
        } else if passes.iter().all(|&p| !p) {
            Some(false)
        } else {
            None
        }
    }

    fn ambiguity(&self) -> Rule {
        let names: Vec<String> = self.entries.iter().map(|k| k.name_lossy()).collect();
        let sizes: Vec<String> = self.parses.iter().map(|(s, _)| s.to_string()).collect();
        Rule::SharedElfSizes {
            offset: self.entries[0].entry.insts_offset,
            names: names.join(", "),
            sizes: sizes.join(", "),
        }
    }
}

fn shared_elves<'k, 'a>(kernels: &'k [KernelView<'a>]) -> HashMap<u32, SharedElf<'k, 'a>> {
    let mut shared: HashMap<u32, SharedElf<'k, 'a>> = HashMap::new();
    for k in kernels
        .iter()
        .filter(|k| k.kind() == Some(KernelKind::FullElf))
    {
        let group = shared
            .entry(k.entry.insts_offset)
            .or_insert_with(|| SharedElf {
                entries: Vec::new(),
                parses: Vec::new(),
            });
        group.entries.push(k);
        if !group
            .parses
            .iter()
            .any(|(size, _)| *size == k.entry.insts_size)
        {
            let parse = FullElf::parse(k.insts).map_err(Rule::FullElf);
            group.parses.push((k.entry.insts_size, parse));
        }
    }
    shared
}

fn check_kernels(
    mut report: CheckReport,
    arch: Arch,
    agent_cols: u32,
    mut kernels: Vec<KernelView<'_>>,
    mut stricter: Stricter,
) -> CheckReport {
    kernels.sort_by(|a, b| a.name.cmp(b.name));
    let count = kernels.len();
    let shared = shared_elves(&kernels);
    let violation = |k: &KernelView<'_>, rule| {
        Violation::new(rule)
            .section(arch.name())
            .kernel(k.name_lossy())
    };

    // The loader's pass, in name order.
    let mut refused = None;
    for k in &kernels {
        let e = k.entry;
        report.kernels.push(KernelCheck {
            name: k.name_lossy(),
            kind: e.kind,
            insts_size: e.insts_size,
            pdi_size: e.pdi_size,
            kernarg_size: e.kernarg_size,
            num_cols: e.num_cols,
            full_elf: None,
        });
        let outcome = own_rules(k, arch, agent_cols).and_then(|kind| match kind {
            KernelKind::PdiInsts => Ok(None),
            KernelKind::FullElf => elf_rules(k, shared[&e.insts_offset].first()).map(Some),
        });
        match outcome {
            Ok(details) => {
                report.kernels.last_mut().expect("pushed above").full_elf =
                    details.map(|kernel| FullElfDetails { kernel });
            }
            Err(rule) => {
                refused = Some(violation(k, rule));
                break;
            }
        }
    }
    // Entries that give one shared ELF different sizes: ROCr's verdict may depend on its order.
    let mut groups: Vec<&SharedElf<'_, '_>> = shared.values().collect();
    groups.sort_by_key(|g| g.entries[0].name);
    let certain_refusal = kernels
        .iter()
        .any(|k| own_rules(k, arch, agent_cols).is_err())
        || groups.iter().any(|g| g.verdict() == Some(false));
    if !certain_refusal && let Some(g) = groups.iter().find(|g| g.verdict().is_none()) {
        return report.reject(Stage::Kernel, violation(g.entries[0], g.ambiguity()));
    }
    if let Some(v) = refused {
        return report.reject(Stage::Kernel, v);
    }

    // ROCr loads the file: this crate's stricter rules. Every kernel passed, so the report
    // holds one check per kernel, in the same order.
    for (k, checked) in kernels.iter().zip(&report.kernels) {
        let e = k.entry;
        let elf_finding = shared
            .get(&e.insts_offset)
            .filter(|g| std::ptr::eq(g.entries[0], k))
            .and_then(|g| {
                g.parses
                    .iter()
                    .find_map(|(_, p)| p.as_ref().ok()?.stricter.clone())
            });
        // A FullElf entry's 0 lets ROCr derive the size from the ELF.
        let effective_kernarg = match (&checked.full_elf, e.kernarg_size) {
            (Some(d), 0) => d.kernel.kernarg_size,
            (_, size) => size,
        };
        let rule = if let Some(finding) = elf_finding {
            Rule::FullElf(finding)
        } else if k.name.is_empty() {
            Rule::EmptyName
        } else if !effective_kernarg.is_multiple_of(16)
            || !(16..=MAX_KERNARG_SIZE).contains(&effective_kernarg)
        {
            Rule::KernargSize(effective_kernarg)
        } else {
            continue;
        };
        stricter.get_or_insert((Stage::Kernel, violation(k, rule)));
        break;
    }
    if let Some((stage, v)) = stricter {
        return report.reject(stage, v);
    }
    report.verdict = Ok(count);
    report
}
