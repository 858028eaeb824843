//! Which artifact aircc produces for a target and runtime.

use crate::config::RuntimeKind;
use crate::error::FormatError;
use crate::target::NpuVersion;

/// aircc's `--output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// A full AIE ELF (npu2): control code, PDIs and argument patch sites in one file.
    Elf,
    /// An xclbin plus an instruction stream (`insts.bin`), the npu1 form.
    Xclbin,
    /// A bare PDI plus `insts.bin`, for XRT-less consumers.
    Pdi,
}

impl OutputFormat {
    pub const ALL: [OutputFormat; 3] = [OutputFormat::Elf, OutputFormat::Xclbin, OutputFormat::Pdi];

    pub fn as_str(self) -> &'static str {
        match self {
            OutputFormat::Elf => "elf",
            OutputFormat::Xclbin => "xclbin",
            OutputFormat::Pdi => "pdi",
        }
    }

    /// Parses a format name in any case.
    pub fn parse(value: &str) -> Option<OutputFormat> {
        OutputFormat::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(value.trim()))
    }

    /// The format used when none is configured: npu2 runs full ELFs, npu1 xclbins, under both
    /// runtimes (under HSA either is packed into an hsaco).
    pub fn default_for(target: NpuVersion) -> OutputFormat {
        match target {
            NpuVersion::Npu1 => OutputFormat::Xclbin,
            NpuVersion::Npu2 => OutputFormat::Elf,
        }
    }

    /// Applies upstream's rules to a configured format (or picks the default).
    pub fn resolve(
        configured: Option<OutputFormat>,
        runtime: RuntimeKind,
        target: NpuVersion,
    ) -> Result<OutputFormat, FormatError> {
        let Some(format) = configured else {
            return Ok(OutputFormat::default_for(target));
        };
        match (format, runtime, target) {
            (OutputFormat::Elf, _, NpuVersion::Npu1) => Err(FormatError::ElfOnNpu1),
            (OutputFormat::Pdi, RuntimeKind::Hsa, _) => Err(FormatError::PdiUnderHsa {
                instead: OutputFormat::default_for(target),
            }),
            _ => Ok(format),
        }
    }
}

impl std::fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use NpuVersion::*;
    use OutputFormat::*;
    use RuntimeKind::*;

    #[test]
    fn defaults_follow_the_target_for_both_runtimes() {
        for rt in RuntimeKind::ALL {
            assert_eq!(OutputFormat::resolve(None, rt, Npu2).unwrap(), Elf);
            assert_eq!(OutputFormat::resolve(None, rt, Npu1).unwrap(), Xclbin);
        }
    }

    #[test]
    fn every_explicit_combination() {
        for rt in RuntimeKind::ALL {
            for target in [Npu1, Npu2] {
                for fmt in OutputFormat::ALL {
                    let got = OutputFormat::resolve(Some(fmt), rt, target);
                    match (fmt, rt, target) {
                        (Elf, _, Npu1) => {
                            let e = got.unwrap_err().to_string();
                            assert!(e.contains("npu1") && e.contains("xclbin"), "{e}");
                        }
                        (Pdi, Hsa, _) => {
                            let e = got.unwrap_err().to_string();
                            assert!(e.contains("pdi") && e.contains("hsa"), "{e}");
                            let instead = OutputFormat::default_for(target).as_str();
                            assert!(e.contains(instead), "{e} should suggest {instead}");
                        }
                        _ => assert_eq!(got.unwrap(), fmt),
                    }
                }
            }
        }
    }

    #[test]
    fn parse_any_case() {
        assert_eq!(OutputFormat::parse("ELF"), Some(Elf));
        assert_eq!(OutputFormat::parse(" xclbin "), Some(Xclbin));
        assert_eq!(OutputFormat::parse("hsaco"), None);
    }
}
