//! The manifest: an entry's commit record, written last before the entry is published.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::key::{Inputs, KERNEL_NAME_INPUT, Key, TOOL_INPUT_PREFIX, hex};

/// The manifest schema this version writes and reads.
pub const MANIFEST_SCHEMA: u32 = 1;
/// File name of the manifest inside an entry directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The directory inside an entry that holds what the build produced.
pub const DATA_DIR: &str = "data";

/// Inputs up to this size that are one line of UTF-8 are shown in full in the manifest.
const PREVIEW_MAX_BYTES: usize = 256;
/// Tool versions up to this size are recorded in full.
const TOOL_MAX_BYTES: usize = 4096;
/// A manifest larger than this is damaged, not read.
pub(crate) const MANIFEST_MAX_BYTES: u64 = 16 << 20;

/// What an entry holds and what it was built from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    pub schema: u32,
    /// The entry's key (hex).
    pub key: String,
    /// Random per build: tells two builds of one key apart.
    pub build_id: String,
    /// The triton-npu version that built the entry.
    pub writer_version: String,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// The inputs the key was derived from, summarised.
    pub inputs: Vec<InputSummary>,
    /// Tool versions: the `tool.*` inputs, without the prefix.
    pub tools: BTreeMap<String, String>,
    /// Every file under `data/`, in path order.
    pub files: Vec<FileRecord>,
    /// How long the build took, and how much of that was spent waiting for tools (absent in
    /// entries of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildTimes>,
}

/// The duration of an entry's build, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BuildTimes {
    /// The whole build (the builder's work, tools included).
    pub total_us: u64,
    /// The tools it ran (air-opt, aircc, `--version` probes), start to exit.
    pub tools_us: u64,
}

/// One input of the key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputSummary {
    pub name: String,
    pub size: u64,
    pub sha256: String,
    /// The value itself, for small one-line text inputs (kernel name, grid, target …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

/// One file of the entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileRecord {
    /// Relative to `data/`, `/`-separated.
    pub path: String,
    pub size: u64,
    pub sha256: String,
    #[serde(default)]
    pub executable: bool,
}

impl Manifest {
    pub(crate) fn new(
        key: &Key,
        inputs: &Inputs,
        build_id: String,
        files: Vec<FileRecord>,
    ) -> Manifest {
        let created_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Manifest {
            schema: MANIFEST_SCHEMA,
            key: key.to_string(),
            build_id,
            writer_version: npu_target::VERSION.to_owned(),
            created_unix_ms,
            inputs: inputs.iter().map(summarise).collect(),
            tools: inputs
                .iter()
                .filter_map(|(name, value)| {
                    let tool = name.strip_prefix(TOOL_INPUT_PREFIX)?;
                    let text = std::str::from_utf8(value).ok()?;
                    (value.len() <= TOOL_MAX_BYTES).then(|| (tool.to_owned(), text.to_owned()))
                })
                .collect(),
            files,
            build: None,
        }
    }

    /// The sum of the file sizes.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The kernel name, if the inputs had one short enough to preview.
    pub fn kernel_name(&self) -> Option<&str> {
        self.input_preview(KERNEL_NAME_INPUT)
    }

    /// The preview of an input, if it had one.
    pub fn input_preview(&self, name: &str) -> Option<&str> {
        self.inputs
            .iter()
            .find(|i| i.name == name)
            .and_then(|i| i.preview.as_deref())
    }

    /// The record of one file.
    pub fn file(&self, path: &str) -> Option<&FileRecord> {
        self.files.iter().find(|f| f.path == path)
    }

    pub fn created(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.created_unix_ms)
    }
}

fn summarise((name, value): (&str, &[u8])) -> InputSummary {
    let preview = std::str::from_utf8(value)
        .ok()
        .filter(|t| t.len() <= PREVIEW_MAX_BYTES && !t.chars().any(char::is_control))
        .map(str::to_owned);
    InputSummary {
        name: name.to_owned(),
        size: value.len() as u64,
        sha256: hex(&Sha256::digest(value)),
        preview,
    }
}

/// Parses a manifest; the error says what is wrong with it.
pub(crate) fn parse(bytes: &[u8], key: &Key) -> Result<Manifest, String> {
    let manifest: Manifest =
        serde_json::from_slice(bytes).map_err(|e| format!("{MANIFEST_FILE} is not valid: {e}"))?;
    if manifest.schema != MANIFEST_SCHEMA {
        return Err(format!(
            "{MANIFEST_FILE} has schema {}, this version reads schema {MANIFEST_SCHEMA}",
            manifest.schema
        ));
    }
    if manifest.key != key.as_str() {
        return Err(format!(
            "{MANIFEST_FILE} is for key {}, not for this entry",
            manifest.key
        ));
    }
    for file in &manifest.files {
        if !is_plain_relative(&file.path) {
            return Err(format!(
                "{MANIFEST_FILE} lists {:?}, which is not a plain relative path",
                file.path
            ));
        }
    }
    Ok(manifest)
}

/// A `/`-separated relative path without `.`, `..` or empty components.
pub(crate) fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Key, Manifest) {
        let inputs = Inputs::empty()
            .text(KERNEL_NAME_INPUT, "add_kernel")
            .text("grid", "4,1,1")
            .text("kernel_ir", "module {\n}\n")
            .bytes("blob", [0xffu8, 0xfe])
            .text("tool.aircc", "aircc 1.2\nbuilt today");
        let key = inputs.key();
        let files = vec![FileRecord {
            path: "aie.elf".into(),
            size: 3,
            sha256: hex(&Sha256::digest(b"elf")),
            executable: false,
        }];
        let m = Manifest::new(&key, &inputs, "b1".into(), files);
        (key, m)
    }

    #[test]
    fn previews_only_small_one_line_text() {
        let (_, m) = sample();
        assert_eq!(m.kernel_name(), Some("add_kernel"));
        assert_eq!(m.input_preview("grid"), Some("4,1,1"));
        assert_eq!(m.input_preview("kernel_ir"), None, "multi-line text");
        assert_eq!(m.input_preview("blob"), None, "not UTF-8");
        assert_eq!(m.tools["aircc"], "aircc 1.2\nbuilt today");
        let ir = m.inputs.iter().find(|i| i.name == "kernel_ir").unwrap();
        assert_eq!(ir.size, 11);
        assert_eq!(ir.sha256, hex(&Sha256::digest(b"module {\n}\n")));
        assert_eq!(m.total_bytes(), 3);
    }

    #[test]
    fn round_trips_and_rejects_damage() {
        let (key, m) = sample();
        let bytes = serde_json::to_vec(&m).unwrap();
        assert_eq!(parse(&bytes, &key).unwrap(), m);

        assert!(
            parse(&bytes[..bytes.len() / 2], &key)
                .unwrap_err()
                .contains("not valid")
        );

        let other = Inputs::empty().key();
        assert!(parse(&bytes, &other).unwrap_err().contains("is for key"));

        let mut future = m.clone();
        future.schema = 99;
        let err = parse(&serde_json::to_vec(&future).unwrap(), &key).unwrap_err();
        assert!(err.contains("schema 99"), "{err}");

        let mut escaping = m;
        escaping.files[0].path = "../../outside".into();
        let err = parse(&serde_json::to_vec(&escaping).unwrap(), &key).unwrap_err();
        assert!(err.contains("not a plain relative path"), "{err}");
    }

    #[test]
    fn plain_relative_paths() {
        assert!(is_plain_relative("a"));
        assert!(is_plain_relative("a/b.bin"));
        for bad in ["", "/a", "a/", "a//b", "./a", "a/../b", ".."] {
            assert!(!is_plain_relative(bad), "{bad:?}");
        }
    }
}
