//! The `xrt-smi examine` probe: the slowest and last way to learn the device model.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
            timeout: Duration::from_secs(20),
        }
    }

    fn find(&self) -> Option<&Path> {
        self.candidates
            .iter()
            .find(|p| p.is_file())
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
        let text = match run_with_timeout(exe, &["examine"], self.timeout) {
            Ok(text) => text,
            Err(why) => return ProbeOutcome::Unavailable(format!("{}: {why}", exe.display())),
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

fn run_with_timeout(exe: &Path, args: &[&str], timeout: Duration) -> Result<String, String> {
    let out_file = tempfile::tempfile().map_err(|e| format!("cannot create a temp file: {e}"))?;
    let err_file = out_file
        .try_clone()
        .map_err(|e| format!("cannot clone a temp file: {e}"))?;
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out_file.try_clone().map_err(|e| e.to_string())?)
        .stderr(err_file)
        .spawn()
        .map_err(|e| format!("cannot run it: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {} s; killed", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    }
    use std::io::{Read, Seek};
    let mut file = out_file;
    let mut text = String::new();
    file.rewind().map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    text.push_str(&String::from_utf8_lossy(&bytes));
    Ok(text)
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
}
