//! Which artifact aircc produces for a target and runtime: the target's rule (no full ELF on
//! npu1), then the formats the runtime's declaration accepts.

use crate::error::FormatError;
use crate::runtime::RuntimeKind;
use crate::target::NpuVersion;

/// aircc's `--output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// A full AIE ELF (npu2): control code, PDIs and argument patch sites in one file.
    Elf,
    /// An xclbin plus an instruction stream (`insts.bin`), the npu1 form.
    Xclbin,
    /// A bare PDI plus `insts.bin`, for consumers without XRT (neither built-in runtime loads
    /// it).
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
    /// built-in runtimes (under HSA either is packed into an hsaco).
    pub fn default_for(target: NpuVersion) -> OutputFormat {
        match target {
            NpuVersion::Npu1 => OutputFormat::Xclbin,
            NpuVersion::Npu2 => OutputFormat::Elf,
        }
    }

    /// Whether aircc can produce this format for `target` at all (no full ELF on npu1).
    pub fn exists_for(self, target: NpuVersion) -> bool {
        !(self == OutputFormat::Elf && target == NpuVersion::Npu1)
    }

    /// The default for a runtime and target: the target's default when the runtime loads it,
    /// else the first format the runtime declares that exists for the target.
    pub fn default_under(runtime: RuntimeKind, target: NpuVersion) -> Option<OutputFormat> {
        let preferred = OutputFormat::default_for(target);
        if runtime.accepts(preferred) {
            return Some(preferred);
        }
        runtime
            .declaration()
            .formats
            .iter()
            .copied()
            .find(|f| f.exists_for(target))
    }

    /// Applies the target's rule and the runtime's declaration to a configured format (or
    /// picks the default).
    pub fn resolve(
        configured: Option<OutputFormat>,
        runtime: RuntimeKind,
        target: NpuVersion,
    ) -> Result<OutputFormat, FormatError> {
        let default = OutputFormat::default_under(runtime, target);
        let format = match (configured, default) {
            (Some(format), _) => format,
            (None, Some(default)) => return Ok(default),
            (None, None) => {
                return Err(FormatError::NoFormat { runtime, target });
            }
        };
        if !format.exists_for(target) {
            return Err(FormatError::ElfOnNpu1);
        }
        if !runtime.accepts(format) {
            return Err(FormatError::NotAccepted {
                format,
                runtime,
                instead: default,
            });
        }
        Ok(format)
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

    #[test]
    fn defaults_follow_the_target_for_both_runtimes() {
        for rt in RuntimeKind::BUILTIN {
            assert_eq!(OutputFormat::resolve(None, rt, Npu2).unwrap(), Elf);
            assert_eq!(OutputFormat::resolve(None, rt, Npu1).unwrap(), Xclbin);
        }
    }

    #[test]
    fn every_explicit_combination() {
        for rt in RuntimeKind::BUILTIN {
            for target in [Npu1, Npu2] {
                for fmt in OutputFormat::ALL {
                    let got = OutputFormat::resolve(Some(fmt), rt, target);
                    match (fmt, target) {
                        (Elf, Npu1) => {
                            let e = got.unwrap_err().to_string();
                            assert!(e.contains("npu1") && e.contains("xclbin"), "{e}");
                        }
                        (Pdi, _) => {
                            // Neither runtime loads a bare PDI: one message naming the runtime,
                            // what it loads and what to set instead.
                            let e = got.unwrap_err().to_string();
                            let label = rt.label();
                            let var = format!("AMD_TRITON_NPU_RUNTIME={rt}");
                            assert!(
                                e.contains("pdi") && e.contains(label) && e.contains(&var),
                                "{e}"
                            );
                            assert!(e.contains("elf or xclbin"), "{e}");
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
    fn a_runtime_declares_what_it_loads_and_its_default_follows() {
        static PDI_ONLY: crate::runtime::Declaration = crate::runtime::Declaration {
            name: "format-unit-test",
            label: "PdiOnly",
            formats: &[Pdi],
            loads: "it loads bare PDIs",
        };
        static ELF_ONLY: crate::runtime::Declaration = crate::runtime::Declaration {
            name: "format-unit-test-elf",
            label: "ElfOnly",
            formats: &[Elf],
            loads: "it loads full ELFs",
        };
        let pdi = RuntimeKind::new(&PDI_ONLY);
        assert_eq!(OutputFormat::resolve(None, pdi, Npu1).unwrap(), Pdi);
        assert_eq!(OutputFormat::resolve(Some(Pdi), pdi, Npu2).unwrap(), Pdi);
        let e = OutputFormat::resolve(Some(Elf), pdi, Npu2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("PdiOnly") && e.contains("pdi"), "{e}");
        let elf = RuntimeKind::new(&ELF_ONLY);
        let e = OutputFormat::resolve(None, elf, Npu1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ElfOnly") && e.contains("npu1"), "{e}");
    }

    #[test]
    fn parse_any_case() {
        assert_eq!(OutputFormat::parse("ELF"), Some(Elf));
        assert_eq!(OutputFormat::parse(" xclbin "), Some(Xclbin));
        assert_eq!(OutputFormat::parse("hsaco"), None);
    }
}
