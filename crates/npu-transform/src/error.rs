//! The error type of this crate: each message names the script (file) and line, says what is
//! wrong and, where it helps, what the library offers.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    /// The script is not made of MLIR tokens, its brackets do not nest, or one of the ops the
    /// expansion rewrites is malformed.
    #[error("{origin}:{line}: {message}")]
    Syntax {
        origin: String,
        line: u32,
        message: String,
    },

    /// `transform.include` of a sequence that neither the script nor the library defines.
    #[error(
        "{origin}:{line}: transform.include @{name}: no named sequence @{name} in this script or \
         in triton-npu's transform library. The library has: {}. Define @{name} in the script \
         (inside `module attributes {{transform.with_named_sequence}}`) or include one of these \
         (`triton-npu transform list` shows their signatures)",
        .known.join(", ")
    )]
    UnknownSequence {
        origin: String,
        line: u32,
        name: String,
        known: Vec<String>,
    },

    /// A `foreach_match` names a matcher or action nobody defines.
    #[error(
        "{origin}:{line}: transform.foreach_match refers to @{name}, which neither this script \
         nor triton-npu's transform library defines. The library has: {}",
        .known.join(", ")
    )]
    UnknownMatchSymbol {
        origin: String,
        line: u32,
        name: String,
        known: Vec<String>,
    },

    /// Includes that include themselves, directly or through others.
    #[error(
        "{origin}:{line}: transform.include @{}: the includes are recursive ({}), so they cannot \
         be expanded inline",
        .chain.last().map(String::as_str).unwrap_or("?"),
        .chain.iter().map(|n| format!("@{n}")).collect::<Vec<_>>().join(" -> ")
    )]
    Recursion {
        origin: String,
        line: u32,
        chain: Vec<String>,
    },

    /// Includes nested deeper than [`crate::expand::MAX_DEPTH`].
    #[error(
        "{origin}:{line}: transform.include @{name} is nested more than {max} levels deep; \
         flatten the schedule"
    )]
    TooDeep {
        origin: String,
        line: u32,
        name: String,
        max: usize,
    },

    /// An include whose operands or results do not match the sequence's signature.
    #[error("{origin}:{line}: transform.include @{name}: {message}; the sequence is {signature}")]
    Signature {
        origin: String,
        line: u32,
        name: String,
        message: String,
        signature: String,
    },

    /// `foreach_match` needs library sequences defined in the script, but the script has no
    /// module to put them in.
    #[error(
        "{origin}:{line}: transform.foreach_match refers to the library sequences {}, which must \
         be defined in the script's `module attributes {{transform.with_named_sequence}}`, but \
         the script has no such module around it",
        .names.iter().map(|n| format!("@{n}")).collect::<Vec<_>>().join(", ")
    )]
    NoModule {
        origin: String,
        line: u32,
        names: Vec<String>,
    },

    /// The configured script cannot be read.
    #[error(
        "the transform script {} (AIR_TRANSFORM_TILING_SCRIPT or npu_config.transform_tiling_script) \
         cannot be read: {source} (working directory: {}). Use an absolute path or run from the \
         directory that holds the script, or unset the setting to use triton-npu's own schedules",
        .path.display(),
        .cwd.display()
    )]
    ScriptRead {
        path: PathBuf,
        cwd: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The library built into triton-npu does not parse (a bug in triton-npu).
    #[error("triton-npu's built-in transform library is broken (a bug, please report it): {0}")]
    Library(String),
}
