//! The `xrt-smi examine` probe: the slowest and last way to learn the device model.

use std::path::{Path, PathBuf};
use std::time::Duration;

use npu_process::{Quiet, ToolCommand};

use crate::config::Config;
use crate::target::{NPU_MODELS, ProbeOutcome, TargetProbe};

/// Device names listed by `xrt-smi examine`, in order.
///
/// Rows of the "Device(s) Present" table look like `|[0000:c7:00.1]  |NPU Strix  |…|`; the
/// first cell is a PCI address in brackets and the second is the name. When no such row exists
/// (older or localised layouts) the whole text is searched for a known model word, as upstream
/// does, and the word found is returned.
pub fn parse_examine(output: &str) -> Vec<String> {
    let rows: Vec<String> = output
        .lines()
        .filter_map(|line| {
            let mut cells = line.trim().strip_prefix('|')?.split('|').map(str::trim);
            let bdf = cells.next()?;
            let name = cells.next()?;
            (is_bdf(bdf) && !name.is_empty()).then(|| name.to_owned())
        })
        .collect();
    if !rows.is_empty() {
        return rows;
    }
    let lower = output.to_ascii_lowercase();
    NPU_MODELS
        .iter()
        .flat_map(|(_, words)| words.iter())
        .find(|w| lower.contains(&w.to_ascii_lowercase()))
        .map(|w| vec![(*w).to_owned()])
        .unwrap_or_default()
}

/// `[dddd:bb:dd.f]`, the form xrt-smi prints.
fn is_bdf(cell: &str) -> bool {
    let Some(inner) = cell.strip_prefix('[').and_then(|c| c.strip_suffix(']')) else {
        return false;
    };
    let parts: Vec<&str> = inner.split([':', '.']).collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// How long `xrt-smi examine` may take before it is killed and the probe reports no device.
pub const XRT_SMI_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `xrt-smi examine` and reports the first device.
pub struct XrtSmiProbe {
    candidates: Vec<PathBuf>,
    timeout: Duration,
}

impl XrtSmiProbe {
    /// Looks for `xrt-smi` in the XRT directories the configuration names, `/opt/xilinx/xrt`,
    /// then `PATH`.
    pub fn from_config(config: &Config) -> XrtSmiProbe {
        let mut dirs: Vec<PathBuf> = [
            config.xrt_dir.clone(),
            config.locations.xrt_dev_dir.clone(),
            config.locations.xilinx_xrt.clone(),
            Some(PathBuf::from("/opt/xilinx/xrt")),
        ]
        .into_iter()
        .flatten()
        .map(|d| d.join("bin"))
        .collect();
        dirs.extend(config.locations.path.iter().cloned());
        XrtSmiProbe {
            candidates: dirs.into_iter().map(|d| d.join("xrt-smi")).collect(),
            timeout: XRT_SMI_TIMEOUT,
        }
    }

    fn find(&self) -> Option<&Path> {
        self.candidates
            .iter()
            .find(|p| npu_process::lookup::is_executable_file(p))
            .map(PathBuf::as_path)
    }
}

impl TargetProbe for XrtSmiProbe {
    fn name(&self) -> &str {
        "xrt-smi examine"
    }

    fn probe(&self) -> ProbeOutcome {
        let Some(exe) = self.find() else {
            return ProbeOutcome::Unavailable(
                "xrt-smi not found (looked in the XRT directories and PATH)".to_owned(),
            );
        };
        let run = ToolCommand::new("xrt-smi", exe, self.timeout)
            .arg("examine")
            .run(&mut Quiet);
        let text = match run {
            Ok(finished) => finished.text(),
            Err(why) => return ProbeOutcome::Unavailable(why.to_string()),
        };
        // Upstream parses stdout and stderr whatever the exit status: xrt-smi exits non-zero
        // for some warnings while still listing devices.
        match parse_examine(&text).into_iter().next() {
            Some(device) => ProbeOutcome::Device(device),
            None => {
                let first = text.lines().map(str::trim).find(|l| !l.is_empty());
                ProbeOutcome::Unavailable(format!(
                    "{} listed no NPU device{}",
                    exe.display(),
                    first
                        .map(|l| format!(" (it said: {l})"))
                        .unwrap_or_default()
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::NpuVersion;

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/xrt-smi")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn version_of(name: &str) -> Option<NpuVersion> {
        parse_examine(&fixture(name))
            .first()
            .and_then(|d| NpuVersion::from_device_name(d))
    }

    #[test]
    fn captured_outputs() {
        assert_eq!(
            parse_examine(&fixture("npu1_phoenix.txt")),
            vec!["NPU Phoenix"]
        );
        assert_eq!(version_of("npu1_phoenix.txt"), Some(NpuVersion::Npu1));
        assert_eq!(parse_examine(&fixture("npu4_strix.txt")), vec!["NPU Strix"]);
        assert_eq!(version_of("npu4_strix.txt"), Some(NpuVersion::Npu2));
        assert_eq!(
            parse_examine(&fixture("npu5_strix_halo.txt")),
            vec!["RyzenAI-npu5"]
        );
        assert_eq!(version_of("npu5_strix_halo.txt"), Some(NpuVersion::Npu2));
        assert_eq!(
            parse_examine(&fixture("npu6_krackan.txt")),
            vec!["NPU Krackan"]
        );
        assert_eq!(version_of("npu6_krackan.txt"), Some(NpuVersion::Npu2));
        assert_eq!(
            parse_examine(&fixture("npu4_gorgon_point.txt")),
            vec!["NPU Gorgon Point 1"]
        );
        assert_eq!(version_of("npu4_gorgon_point.txt"), Some(NpuVersion::Npu2));
        assert!(parse_examine(&fixture("no_device.txt")).is_empty());
        assert!(parse_examine(&fixture("driver_missing.txt")).is_empty());
        let unknown = parse_examine(&fixture("unknown_device.txt"));
        assert_eq!(unknown, vec!["RyzenAI-npu9"]);
        assert_eq!(version_of("unknown_device.txt"), None);
    }

    #[test]
    fn keyword_fallback_without_a_table() {
        assert_eq!(
            parse_examine("Device: Strix Halo engineering sample"),
            vec!["Strix"]
        );
        assert!(
            parse_examine("|[not-a-bdf] |NPU Strix|").len() == 1,
            "falls back to keywords"
        );
        assert!(parse_examine("").is_empty());
    }

    #[test]
    fn bdf_cells() {
        assert!(is_bdf("[0000:c7:00.1]"));
        assert!(!is_bdf("[0000:c7:00]"));
        assert!(!is_bdf("BDF"));
        assert!(!is_bdf("[zzzz:c7:00.1]"));
    }

    #[cfg(unix)]
    #[test]
    fn probe_runs_the_program_and_reads_its_table() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let exe = bin.join("xrt-smi");
        std::fs::write(
            &exe,
            format!(
                "#!/bin/sh\ncat <<'X'\n{}X\nexit 1\n",
                fixture("npu6_krackan.txt")
            ),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let probe = XrtSmiProbe {
            candidates: vec![dir.path().join("missing/xrt-smi"), exe],
            timeout: Duration::from_secs(10),
        };
        assert_eq!(probe.probe(), ProbeOutcome::Device("NPU Krackan".into()));
        let none = XrtSmiProbe {
            candidates: vec![dir.path().join("missing/xrt-smi")],
            timeout: Duration::from_secs(10),
        };
        assert!(matches!(none.probe(), ProbeOutcome::Unavailable(w) if w.contains("not found")));
    }

    #[test]
    fn a_hung_xrt_smi_is_killed_with_the_processes_it_started() {
        use std::os::unix::fs::PermissionsExt;
        use std::time::Instant;
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("xrt-smi");
        let pid_file = dir.path().join("helper.pid");
        std::fs::write(
            &exe,
            format!(
                "#!/bin/sh\nsleep 1000 & echo $! > {p}.tmp; mv {p}.tmp {p}; sleep 1000\n",
                p = pid_file.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let probe = XrtSmiProbe {
            candidates: vec![exe],
            timeout: Duration::from_millis(500),
        };
        let started = Instant::now();
        let outcome = probe.probe();
        assert!(started.elapsed() < Duration::from_secs(20));
        assert!(
            matches!(&outcome, ProbeOutcome::Unavailable(w) if w.contains("timeout of 0.5 s")),
            "{outcome:?}"
        );
        let helper = std::fs::read_to_string(&pid_file).unwrap();
        let pid: i32 = helper.trim().parse().unwrap();
        let gone = || npu_process::group::has_ended(pid);
        let until = Instant::now() + Duration::from_secs(10);
        while !gone() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(), "xrt-smi's helper {} survived", helper.trim());
    }
}
