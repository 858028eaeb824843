//! What `triton-npu doctor` reports about ROCr: where it was found (or every place refused and
//! why), and the AIE agent (name, columns) or why there is none.

use std::path::PathBuf;

use npu_target::Config;

use super::HsaRuntime;
use super::discovery::{self, Refusal};

/// The AIE agent as ROCr reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AgentReport {
    /// `aie2` or `aie2p`.
    pub name: String,
    /// Columns, when this ROCr reports them.
    pub columns: Option<u32>,
    /// Whether the agent has the device-heap pool ROCr's loader places AIE code in.
    pub device_heap: bool,
}

/// The HSA part of the doctor's report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HsaReport {
    /// The library in use, if one was found.
    pub library: Option<PathBuf>,
    /// The discovery source that found it.
    pub source: Option<String>,
    /// Places looked at before it (or all of them), with the reason each was not used.
    pub refused: Vec<Refusal>,
    /// The agent, or why ROCr could not provide one.
    pub agent: Result<AgentReport, String>,
}

impl std::fmt::Display for HsaReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.library, &self.source) {
            (Some(lib), Some(source)) => {
                writeln!(f, "ROCr: {} (found through {source})", lib.display())?
            }
            _ => writeln!(f, "ROCr: not found")?,
        }
        for r in &self.refused {
            writeln!(f, "  not used: {r}")?;
        }
        match &self.agent {
            Ok(a) => {
                match a.columns {
                    Some(c) => writeln!(f, "AIE agent: {} ({c} columns)", a.name)?,
                    None => writeln!(f, "AIE agent: {} (columns not reported)", a.name)?,
                }
                if !a.device_heap {
                    writeln!(
                        f,
                        "  warning: no device-heap pool; this ROCr cannot place AIE code"
                    )?;
                }
                Ok(())
            }
            Err(why) => writeln!(f, "AIE agent: none: {why}"),
        }
    }
}

/// Looks for ROCr and, if found, asks it for the AIE agent. Uses the process's runtime when it
/// is already open (a second `hsa_init` is harmless, but its queue is not needed here).
pub fn doctor_report(config: &Config, site_packages: &[PathBuf]) -> HsaReport {
    if let Some(runtime) = HsaRuntime::global_if_open() {
        return HsaReport {
            library: Some(runtime.library_path()),
            source: Some(runtime.library_source().to_owned()),
            refused: Vec::new(),
            agent: Ok(AgentReport {
                name: runtime.agent_name().to_owned(),
                columns: runtime.columns(),
                device_heap: runtime.has_device_heap(),
            }),
        };
    }
    let (found, device_error) = super::session::discover(config, site_packages);
    let Some((candidate, session)) = found.found else {
        return HsaReport {
            library: None,
            source: None,
            agent: Err(device_error.map_or_else(
                || discovery::not_found_message(&found.refused),
                |e| e.to_string(),
            )),
            refused: found.refused,
        };
    };
    HsaReport {
        library: Some(session.library_path()),
        source: Some(candidate.source),
        refused: found.refused,
        agent: Ok(AgentReport {
            name: session.agent_name.clone(),
            columns: session.columns,
            device_heap: session.pools.dev_heap.is_some(),
        }),
    }
}
