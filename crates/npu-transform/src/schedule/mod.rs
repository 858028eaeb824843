//! Which transform script a kernel gets, in upstream's order (driver.py:1246-1323,
//! 2114-2128):
//!
//! 1. the user's script (`AIR_TRANSFORM_TILING_SCRIPT` / `npu_config.transform_tiling_script`):
//!    a file that cannot be read is an error naming the path and the working directory;
//! 2. else, when the kernel is one plain matmul whose shape and type have parameters, the
//!    automatic matmul schedule ([`matmul`]); when it does not qualify, a debug log line says
//!    why;
//! 3. else the default elementwise schedule ([`elementwise`]).
//!
//! Whichever it is, the script is expanded ([`crate::expand()`]) into what air-opt gets.

pub mod elementwise;
pub mod matmul;

use std::path::{Path, PathBuf};

use npu_target::NpuVersion;

use crate::error::TransformError;
use crate::expand::{Expansion, expand};
use crate::kernel::KernelSummary;

pub use elementwise::ElementwisePlan;
pub use matmul::{MatmulInfo, MatmulParams};

/// The file a compile keeps the final script in (what air-opt's `air-transform` reads).
pub const TRANSFORM_SCRIPT: &str = "transform.mlir";
/// The file a compile keeps the generated matmul schedule in, before expansion (upstream's
/// name).
pub const AUTO_TRANSFORM_SCRIPT: &str = "auto_transform.mlir";

/// Where a schedule came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleKind {
    /// The configured script file.
    User(PathBuf),
    /// The automatic matmul schedule.
    Matmul,
    /// The default elementwise schedule.
    Default,
}

impl ScheduleKind {
    /// `user script <path>`, `automatic matmul schedule`, `default elementwise schedule`.
    pub fn describe(&self) -> String {
        match self {
            ScheduleKind::User(p) => format!("user script {}", p.display()),
            ScheduleKind::Matmul => "automatic matmul schedule".into(),
            ScheduleKind::Default => "default elementwise schedule".into(),
        }
    }
}

/// The chosen script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub kind: ScheduleKind,
    /// The matmul parameters, for [`ScheduleKind::Matmul`].
    pub matmul: Option<MatmulParams>,
    /// The script we generated, before expansion (for the two built-in schedules).
    pub generated: Option<String>,
    /// The final script: [`Expansion::text`] is what air-opt gets.
    pub expansion: Expansion,
}

impl Schedule {
    /// The script air-opt gets.
    pub fn script(&self) -> &str {
        &self.expansion.text
    }
}

/// Reads the user's script; a missing or unreadable file names the path and the working
/// directory (relative paths are relative to it).
pub fn read_user_script(path: &Path) -> Result<String, TransformError> {
    std::fs::read_to_string(path).map_err(|source| TransformError::ScriptRead {
        path: path.to_path_buf(),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("(unknown)")),
        source,
    })
}

/// Chooses and expands the script for the kernel `summary` describes, on `target`.
pub fn choose(
    user_script: Option<&Path>,
    summary: &KernelSummary,
    target: NpuVersion,
) -> Result<Schedule, TransformError> {
    if let Some(path) = user_script {
        let text = read_user_script(path)?;
        let expansion = expand(&text, &path.display().to_string(), Some(target))?;
        for w in &expansion.warnings {
            tracing::warn!(script = %path.display(), "{w}");
        }
        return Ok(Schedule {
            kind: ScheduleKind::User(path.to_path_buf()),
            matmul: None,
            generated: None,
            expansion,
        });
    }
    let kernel = summary.kernel.clone().unwrap_or_else(|| "(unnamed)".into());
    match matmul_params(summary, target) {
        Ok(params) => {
            tracing::debug!(
                kernel,
                "using the automatic matmul schedule: pack {:?}, herd {:?}, l1 {}x{}, l2_k {}",
                params.pack,
                params.herd,
                params.l1_m,
                params.l1_n,
                params.l2_k
            );
            let generated = matmul::script(&params);
            let expansion = expand(&generated, AUTO_TRANSFORM_SCRIPT, Some(target))?;
            Ok(Schedule {
                kind: ScheduleKind::Matmul,
                matmul: Some(params),
                generated: Some(generated),
                expansion,
            })
        }
        Err(why) => {
            tracing::debug!(
                kernel,
                "no automatic matmul schedule: {why}; using the default elementwise schedule"
            );
            let plan = ElementwisePlan::new(summary, target);
            for c in &plan.concerns {
                tracing::warn!(
                    kernel,
                    "the default elementwise schedule may not fit this kernel: {c}"
                );
            }
            let generated = elementwise::script(&plan);
            let expansion = expand(&generated, "default schedule", Some(target))?;
            Ok(Schedule {
                kind: ScheduleKind::Default,
                matmul: None,
                generated: Some(generated),
                expansion,
            })
        }
    }
}

/// The matmul parameters for a kernel, or why it gets none.
pub fn matmul_params(summary: &KernelSummary, target: NpuVersion) -> Result<MatmulParams, String> {
    let info = matmul::detect(summary)?;
    matmul::params(&info, target)
}

/// Whether the kernel is one plain f32 matmul (aircc then needs `--bf16-emulation`).
pub fn is_f32_matmul(summary: &KernelSummary) -> bool {
    matmul::is_f32_matmul(summary)
}

#[cfg(test)]
mod tests;
