//! Which runtimes exist and what each declares about itself without being opened.
//!
//! A runtime is named by a [`RuntimeKind`]: a handle to its [`Declaration`] (its
//! `AMD_TRITON_NPU_RUNTIME` name, how messages name it, the output formats it loads).
//! Configuration, target detection, `doctor`, the output-format rules and loading all read the
//! same declaration. The behaviour behind a name (opening the runtime, preparing a build for
//! it, loading, dispatching) lives in `npu-runtime`, whose registry declares each runtime it
//! adds here through [`declare`], so the configuration accepts exactly the registered names.
//! XRT and HSA are declared from the start, because the configuration needs their names before
//! any runtime code runs.

use std::sync::{PoisonError, RwLock};

use crate::format::OutputFormat;

/// What a runtime declares about itself.
#[derive(Debug)]
pub struct Declaration {
    /// The value of `AMD_TRITON_NPU_RUNTIME` (lower case).
    pub name: &'static str,
    /// How messages name it (`XRT`, `HSA`).
    pub label: &'static str,
    /// The output formats it loads, preferred first. Whether a format exists for a target at
    /// all (no full ELF on npu1) is the target's rule, checked before these.
    pub formats: &'static [OutputFormat],
    /// What it loads, as a clause for refusals ("ROCr loads kernels from an hsaco, …").
    pub loads: &'static str,
}

/// A runtime, by its declaration. Two kinds are equal when their names are.
#[derive(Clone, Copy)]
pub struct RuntimeKind(&'static Declaration);

static XRT: Declaration = Declaration {
    name: "xrt",
    label: "XRT",
    formats: &[OutputFormat::Elf, OutputFormat::Xclbin],
    loads: "XRT runs a full ELF or an xclbin with its instruction stream, and refuses a bare \
            PDI, which is meant for consumers without XRT",
};

static HSA: Declaration = Declaration {
    name: "hsa",
    label: "HSA",
    formats: &[OutputFormat::Elf, OutputFormat::Xclbin],
    loads: "ROCr loads kernels from an hsaco, which is packed from an elf or an xclbin",
};

/// Runtimes declared at run time, after the built-in ones.
static DECLARED: RwLock<Vec<RuntimeKind>> = RwLock::new(Vec::new());

impl RuntimeKind {
    /// XRT (upstream's default).
    pub const XRT: RuntimeKind = RuntimeKind(&XRT);
    /// ROCr's HSA runtime with an AIE agent.
    pub const HSA: RuntimeKind = RuntimeKind(&HSA);
    /// The runtimes every configuration knows, the default first.
    pub const BUILTIN: [RuntimeKind; 2] = [RuntimeKind::XRT, RuntimeKind::HSA];

    /// The kind of a declaration; select it in a configuration only after [`declare`].
    pub const fn new(declaration: &'static Declaration) -> RuntimeKind {
        RuntimeKind(declaration)
    }

    /// Every declared runtime: the built-in ones, then those declared at run time.
    pub fn all() -> Vec<RuntimeKind> {
        let mut all = RuntimeKind::BUILTIN.to_vec();
        all.extend(
            DECLARED
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter(),
        );
        all
    }

    /// The declared runtime named `value`, case-insensitively and ignoring surrounding blanks.
    pub fn parse(value: &str) -> Option<RuntimeKind> {
        let value = value.trim();
        RuntimeKind::all()
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(value))
    }

    /// The declared names, for messages: `xrt, hsa`.
    pub fn names() -> String {
        RuntimeKind::all()
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Parses a runtime name given through `what` (an argument, a setting), with the error
    /// every caller reports for an unknown name.
    pub fn parse_named(value: &str, what: &str) -> Result<RuntimeKind, crate::ConfigError> {
        RuntimeKind::parse(value).ok_or_else(|| crate::ConfigError::UnknownRuntime {
            value: value.to_owned(),
            given_by: what.to_owned(),
            known: RuntimeKind::names(),
        })
    }

    pub fn as_str(self) -> &'static str {
        self.0.name
    }

    pub fn label(self) -> &'static str {
        self.0.label
    }

    pub fn declaration(self) -> &'static Declaration {
        self.0
    }

    /// Whether it loads `format`.
    pub fn accepts(self, format: OutputFormat) -> bool {
        self.0.formats.contains(&format)
    }
}

/// Why a runtime cannot be declared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a runtime named {name:?} is already declared with another declaration; runtime names \
     (AMD_TRITON_NPU_RUNTIME values) must be unique"
)]
pub struct DeclareError {
    pub name: &'static str,
}

/// Makes `kind` selectable (`AMD_TRITON_NPU_RUNTIME`, `set_config`). Declaring the same
/// declaration again does nothing; another declaration under a declared name is refused.
pub fn declare(kind: RuntimeKind) -> Result<(), DeclareError> {
    let mut declared = DECLARED.write().unwrap_or_else(PoisonError::into_inner);
    let clash = RuntimeKind::BUILTIN
        .iter()
        .chain(declared.iter())
        .find(|k| k.as_str().eq_ignore_ascii_case(kind.as_str()));
    match clash {
        Some(existing) if std::ptr::eq(existing.0, kind.0) => Ok(()),
        Some(_) => Err(DeclareError { name: kind.0.name }),
        None => {
            declared.push(kind);
            Ok(())
        }
    }
}

impl PartialEq for RuntimeKind {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for RuntimeKind {}

impl std::hash::Hash for RuntimeKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialOrd for RuntimeKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RuntimeKind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::fmt::Debug for RuntimeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for RuntimeKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TEST_ONLY: Declaration = Declaration {
        name: "runtime-kind-unit-test",
        label: "Test",
        formats: &[OutputFormat::Pdi],
        loads: "a test runtime loads bare PDIs",
    };

    static IMPOSTOR: Declaration = Declaration {
        name: "XRT",
        label: "Impostor",
        formats: &[OutputFormat::Pdi],
        loads: "nothing",
    };

    #[test]
    fn builtins_parse_in_any_case_and_compare_by_name() {
        assert_eq!(RuntimeKind::parse(" HSA "), Some(RuntimeKind::HSA));
        assert_eq!(RuntimeKind::parse("xrt"), Some(RuntimeKind::XRT));
        assert_eq!(RuntimeKind::parse("cuda"), None);
        assert_eq!(RuntimeKind::XRT.label(), "XRT");
        assert!(RuntimeKind::HSA.accepts(OutputFormat::Xclbin));
        assert!(!RuntimeKind::XRT.accepts(OutputFormat::Pdi));
        assert!(!RuntimeKind::HSA.accepts(OutputFormat::Pdi));
    }

    #[test]
    fn a_declared_runtime_becomes_selectable_and_names_stay_unique() {
        let kind = RuntimeKind::new(&TEST_ONLY);
        assert_eq!(RuntimeKind::parse("runtime-kind-unit-test"), None);
        declare(kind).unwrap();
        declare(kind).unwrap();
        assert_eq!(RuntimeKind::parse("Runtime-Kind-Unit-Test"), Some(kind));
        assert!(RuntimeKind::names().contains("runtime-kind-unit-test"));
        let err = declare(RuntimeKind::new(&IMPOSTOR)).unwrap_err();
        assert!(err.to_string().contains("already declared"), "{err}");
        assert_eq!(RuntimeKind::parse("xrt").unwrap().label(), "XRT");
    }
}
