//! The reference packer's kernel grammar (`aie-hsaco`): `--kernel` colon specs and the long
//! `--kernel-name/--kernel-elf` option groups, in one ordered stream.
//!
//! * `--kernel elf:PATH[:KERNARG[:COLS]]` — one FullElf kernel per COMDAT group of the ELF;
//! * `--kernel xclbin:NAME:XCLBIN:INSTS:KERNARG[:COLS]` — PDI and width from the xclbin;
//! * `--kernel NAME:INSTS:PDI:KERNARG:COLS` (and the 4-field form without a PDI);
//! * `--kernel-name NAME` or `--kernel-elf PATH` start a group that the following
//!   `--kernel-insts/-pdi/-xclbin/-kernarg/-cols` options complete (names and paths may then
//!   contain `:` and spaces).
//!
//! Numbers follow Python's `int()` as the reference does (surrounding whitespace, a sign and
//! `_` between digits are accepted; hex is not) and must fit in 32 bits.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Where one entry (or, for a full ELF, a set of entries) of the kernel table comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// An instruction stream and a PDI file.
    PdiInsts {
        name: String,
        insts: PathBuf,
        pdi: Option<PathBuf>,
        kernarg_size: Option<u32>,
        num_cols: Option<u32>,
    },
    /// An instruction stream and the PDI inside an xclbin.
    Xclbin {
        name: String,
        xclbin: PathBuf,
        insts: PathBuf,
        kernarg_size: Option<u32>,
        num_cols: Option<u32>,
    },
    /// Every kernel of an AIE full ELF.
    FullElf {
        path: PathBuf,
        kernarg_size: Option<u32>,
        num_cols: Option<u32>,
    },
}

/// One kernel-related command-line option, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelOption {
    /// `--kernel SPEC`.
    Spec(String),
    /// `--kernel-name NAME`.
    Name(String),
    /// `--kernel-elf PATH`.
    Elf(String),
    /// `--kernel-insts PATH`.
    Insts(String),
    /// `--kernel-pdi PATH`.
    Pdi(String),
    /// `--kernel-xclbin PATH`.
    Xclbin(String),
    /// `--kernel-kernarg N`.
    Kernarg(String),
    /// `--kernel-cols N`.
    Cols(String),
}

impl KernelOption {
    fn flag(&self) -> &'static str {
        match self {
            KernelOption::Spec(_) => "--kernel",
            KernelOption::Name(_) => "--kernel-name",
            KernelOption::Elf(_) => "--kernel-elf",
            KernelOption::Insts(_) => "--kernel-insts",
            KernelOption::Pdi(_) => "--kernel-pdi",
            KernelOption::Xclbin(_) => "--kernel-xclbin",
            KernelOption::Kernarg(_) => "--kernel-kernarg",
            KernelOption::Cols(_) => "--kernel-cols",
        }
    }
}

fn spec_error(message: impl Into<String>) -> Error {
    Error::Spec(message.into())
}

/// Parses a number as Python's `int()` does for base 10, refusing values outside u32.
pub fn parse_u32(text: &str, what: &str) -> Result<u32> {
    let bad = || {
        spec_error(format!(
            "{what}: '{text}' is not a whole number from 0 to {}",
            u32::MAX
        ))
    };
    let trimmed = text.trim();
    let (negative, digits) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let bytes = digits.as_bytes();
    let well_formed = !bytes.is_empty()
        && bytes.first().is_some_and(u8::is_ascii_digit)
        && bytes.last().is_some_and(u8::is_ascii_digit)
        && bytes.iter().all(|b| b.is_ascii_digit() || *b == b'_')
        && !digits.contains("__");
    if !well_formed {
        return Err(bad());
    }
    let mut value: u64 = 0;
    for b in bytes.iter().filter(|b| b.is_ascii_digit()) {
        value = value.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    if negative && value != 0 {
        return Err(bad());
    }
    u32::try_from(value).map_err(|_| bad())
}

/// Parses one `--kernel SPEC`.
pub fn parse_kernel_spec(spec: &str) -> Result<KernelSource> {
    let fields: Vec<&str> = spec.split(':').collect();
    let bad = || {
        spec_error(format!(
            "bad --kernel spec '{spec}': expected NAME:INSTS:PDI:KERNARG:COLS, \
             xclbin:NAME:XCLBIN:INSTS:KERNARG[:COLS] or elf:PATH[:KERNARG[:COLS]] \
             (use the --kernel-name/--kernel-elf options for names or paths with ':')"
        ))
    };
    let number = |i: usize, what: &str| -> Result<Option<u32>> {
        fields
            .get(i)
            .map(|f| parse_u32(f, &format!("--kernel '{spec}' {what}")))
            .transpose()
    };
    match (fields[0], fields.len()) {
        ("elf", 2..=4) => Ok(KernelSource::FullElf {
            path: fields[1].into(),
            kernarg_size: number(2, "KERNARG_SIZE")?,
            num_cols: number(3, "NUM_COLS")?,
        }),
        ("elf", _) => Err(bad()),
        ("xclbin", 5..=6) => Ok(KernelSource::Xclbin {
            name: fields[1].to_string(),
            xclbin: fields[2].into(),
            insts: fields[3].into(),
            kernarg_size: number(4, "KERNARG_SIZE")?,
            num_cols: number(5, "NUM_COLS")?,
        }),
        ("xclbin", _) => Err(bad()),
        (name, 4) => Ok(KernelSource::PdiInsts {
            name: name.to_string(),
            insts: fields[1].into(),
            pdi: None,
            kernarg_size: number(2, "KERNARG_SIZE")?,
            num_cols: number(3, "NUM_COLS")?,
        }),
        (name, 5) => Ok(KernelSource::PdiInsts {
            name: name.to_string(),
            insts: fields[1].into(),
            pdi: Some(fields[2].into()),
            kernarg_size: number(3, "KERNARG_SIZE")?,
            num_cols: number(4, "NUM_COLS")?,
        }),
        _ => Err(bad()),
    }
}

/// A long-form group being collected.
#[derive(Default)]
struct Group {
    /// Position in the output list reserved for this group.
    slot: usize,
    elf: Option<String>,
    name: Option<String>,
    insts: Option<String>,
    pdi: Option<String>,
    xclbin: Option<String>,
    kernarg: Option<String>,
    cols: Option<String>,
}

impl Group {
    fn label(&self) -> String {
        match (&self.name, &self.elf) {
            (Some(n), _) => format!("--kernel-name '{n}'"),
            (None, Some(p)) => format!("--kernel-elf '{p}'"),
            (None, None) => "the kernel".to_string(),
        }
    }

    fn finish(self) -> Result<(usize, KernelSource)> {
        let label = self.label();
        let kernarg_size = self
            .kernarg
            .as_deref()
            .map(|v| parse_u32(v, &format!("{label}: --kernel-kernarg")))
            .transpose()?;
        let num_cols = self
            .cols
            .as_deref()
            .map(|v| parse_u32(v, &format!("{label}: --kernel-cols")))
            .transpose()?;
        if let Some(path) = self.elf {
            if self.insts.is_some() || self.pdi.is_some() || self.xclbin.is_some() {
                return Err(spec_error(format!(
                    "{label}: --kernel-elf takes no --kernel-insts, --kernel-pdi or --kernel-xclbin \
                     (the ELF holds its control code and PDIs)"
                )));
            }
            return Ok((
                self.slot,
                KernelSource::FullElf {
                    path: path.into(),
                    kernarg_size,
                    num_cols,
                },
            ));
        }
        let name = self.name.expect("a group starts with a name or an ELF");
        let Some(insts) = self.insts else {
            return Err(spec_error(format!("{label} needs --kernel-insts")));
        };
        let source = match (self.pdi, self.xclbin) {
            (Some(_), Some(_)) => {
                return Err(spec_error(format!(
                    "{label}: give --kernel-pdi or --kernel-xclbin, not both"
                )));
            }
            (None, Some(xclbin)) => KernelSource::Xclbin {
                name,
                xclbin: xclbin.into(),
                insts: insts.into(),
                kernarg_size,
                num_cols,
            },
            (pdi, None) => KernelSource::PdiInsts {
                name,
                insts: insts.into(),
                pdi: pdi.map(Into::into),
                kernarg_size,
                num_cols,
            },
        };
        Ok((self.slot, source))
    }
}

/// Turns the kernel options, in command-line order, into kernel sources in table order.
pub fn sources_from_options(options: &[KernelOption]) -> Result<Vec<KernelSource>> {
    let mut slots: Vec<Option<KernelSource>> = Vec::new();
    let mut current: Option<Group> = None;
    let finish = |group: Group, slots: &mut Vec<Option<KernelSource>>| -> Result<()> {
        let (slot, source) = group.finish()?;
        slots[slot] = Some(source);
        Ok(())
    };
    for option in options {
        match option {
            KernelOption::Spec(spec) => slots.push(Some(parse_kernel_spec(spec)?)),
            KernelOption::Name(_) | KernelOption::Elf(_) => {
                if let Some(done) = current.take() {
                    finish(done, &mut slots)?;
                }
                let mut group = Group {
                    slot: slots.len(),
                    ..Group::default()
                };
                match option {
                    KernelOption::Name(n) => group.name = Some(n.clone()),
                    KernelOption::Elf(p) => group.elf = Some(p.clone()),
                    _ => unreachable!("matched above"),
                }
                slots.push(None);
                current = Some(group);
            }
            attribute => {
                let Some(group) = current.as_mut() else {
                    return Err(spec_error(format!(
                        "{} given before any --kernel-name or --kernel-elf it could belong to",
                        attribute.flag()
                    )));
                };
                let label = group.label();
                let (field, value) = match attribute {
                    KernelOption::Insts(v) => (&mut group.insts, v),
                    KernelOption::Pdi(v) => (&mut group.pdi, v),
                    KernelOption::Xclbin(v) => (&mut group.xclbin, v),
                    KernelOption::Kernarg(v) => (&mut group.kernarg, v),
                    KernelOption::Cols(v) => (&mut group.cols, v),
                    _ => unreachable!("starters and specs matched above"),
                };
                if field.is_some() {
                    return Err(spec_error(format!(
                        "{label}: {} given twice",
                        attribute.flag()
                    )));
                }
                *field = Some(value.clone());
            }
        }
    }
    if let Some(done) = current.take() {
        finish(done, &mut slots)?;
    }
    let sources: Vec<KernelSource> = slots
        .into_iter()
        .map(|s| s.expect("every slot filled"))
        .collect();
    if sources.is_empty() {
        return Err(spec_error(
            "no kernels: give at least one --kernel, --kernel-name or --kernel-elf",
        ));
    }
    Ok(sources)
}
