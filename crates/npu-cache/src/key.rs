//! Cache keys: sha256 over a canonical, versioned encoding of named inputs.
//!
//! # Canonical encoding (version 1)
//!
//! ```text
//! "triton-npu-cache-key/1\n"                      23 ASCII bytes: the schema tag
//! u64-le  number of inputs
//! for each input, in ascending byte order of its name (names are unique):
//!     u64-le  length of the name in bytes,  the name (UTF-8)
//!     u64-le  length of the value in bytes, the value
//! ```
//!
//! The key is the lowercase hex sha256 of these bytes. Every length is explicit, so no two
//! different input sets encode to the same bytes (`{"ab": "c"}` and `{"a": "bc"}` differ), and
//! the order in which a caller adds inputs does not matter. Changing the encoding means
//! changing the tag, which changes every key.

use std::collections::BTreeMap;
use std::fmt;

use sha2::{Digest, Sha256};

/// The schema tag that starts every encoding; part of the key.
pub const KEY_ENCODING_TAG: &[u8] = b"triton-npu-cache-key/1\n";

/// The input [`Inputs::new`] adds: the triton-npu version, so a new release never serves
/// artifacts an older one built.
pub const VERSION_INPUT: &str = "triton_npu.version";

/// The input that names the kernel; shown by `triton-npu cache ls` and in log messages.
pub const KERNEL_NAME_INPUT: &str = "kernel_name";

/// Inputs whose names start with this prefix are tool versions; the manifest records them in
/// full under `tools` (without the prefix).
pub const TOOL_INPUT_PREFIX: &str = "tool.";

/// An ordered set of named inputs that determine an entry's content.
///
/// Values are bytes; text is stored as its UTF-8 bytes. Adding a name twice keeps the last
/// value. Include everything the build reads: IR text, grid, kernel name, output format,
/// runtime, target, flags, the *content* of scripts (not their paths) and tool versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    values: BTreeMap<String, Vec<u8>>,
}

impl Default for Inputs {
    fn default() -> Self {
        Inputs::new()
    }
}

impl Inputs {
    /// An input set holding only [`VERSION_INPUT`] = [`npu_target::VERSION`].
    pub fn new() -> Inputs {
        Inputs::empty().text(VERSION_INPUT, npu_target::VERSION)
    }

    /// An input set with nothing in it, not even the crate version.
    pub fn empty() -> Inputs {
        Inputs {
            values: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) a text input.
    pub fn text(mut self, name: impl Into<String>, value: impl AsRef<str>) -> Inputs {
        self.insert(name, value.as_ref().as_bytes().to_vec());
        self
    }

    /// Adds (or replaces) a binary input.
    pub fn bytes(mut self, name: impl Into<String>, value: impl AsRef<[u8]>) -> Inputs {
        self.insert(name, value.as_ref().to_vec());
        self
    }

    /// Adds (or replaces) an input; returns the value it replaced.
    pub fn insert(
        &mut self,
        name: impl Into<String>,
        value: impl Into<Vec<u8>>,
    ) -> Option<Vec<u8>> {
        self.values.insert(name.into(), value.into())
    }

    /// The value of an input.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.values.get(name).map(Vec::as_slice)
    }

    /// The inputs in canonical (name) order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The kernel name, if [`KERNEL_NAME_INPUT`] is present and is UTF-8.
    pub fn kernel_name(&self) -> Option<&str> {
        self.get(KERNEL_NAME_INPUT)
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The canonical encoding described in the [module docs](self).
    pub fn canonical_encoding(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut |bytes| out.extend_from_slice(bytes));
        out
    }

    /// The key of this input set.
    pub fn key(&self) -> Key {
        let mut hasher = Sha256::new();
        self.encode_into(&mut |bytes| hasher.update(bytes));
        Key(hex(&hasher.finalize()))
    }

    // One encoder for both the bytes and the hash, so they cannot drift apart.
    fn encode_into(&self, sink: &mut dyn FnMut(&[u8])) {
        sink(KEY_ENCODING_TAG);
        sink(&(self.values.len() as u64).to_le_bytes());
        for (name, value) in &self.values {
            sink(&(name.len() as u64).to_le_bytes());
            sink(name.as_bytes());
            sink(&(value.len() as u64).to_le_bytes());
            sink(value);
        }
    }

    /// How the entry should be named in messages: the kernel name (if any) and the short key.
    pub(crate) fn label(&self, key: &Key) -> String {
        match self.kernel_name() {
            Some(name) => format!("{} (kernel {name})", key.short()),
            None => key.short().to_owned(),
        }
    }
}

/// A cache key: 64 lowercase hex digits of a sha256.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(String);

impl Key {
    /// Accepts exactly 64 lowercase hex digits.
    pub fn parse(text: &str) -> Option<Key> {
        let ok = text.len() == 64
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| Key(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, enough to tell entries apart in messages.
    pub fn short(&self) -> &str {
        &self.0[..12]
    }

    /// The directory level that keeps any one directory of entries small.
    pub(crate) fn shard(&self) -> &str {
        &self.0[..2]
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lowercase hex of bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_inputs() -> Inputs {
        Inputs::empty()
            .text(VERSION_INPUT, "0.1.0")
            .text("kernel_ir", "module { func.func @add_kernel() { return } }")
            .text("grid", "4,1,1")
            .text(KERNEL_NAME_INPUT, "add_kernel")
            .text("output_format", "elf")
            .text("runtime", "hsa")
            .text("target", "npu2")
            .text("bf16_emulation", "0")
            .text("transform_script", "")
            .text("tool.aircc", "aircc 0.0.1")
    }

    #[test]
    fn encoding_is_the_documented_one() {
        let inputs = Inputs::empty().text("b", "xy").bytes("a", [0u8, 255]);
        let mut expected = b"triton-npu-cache-key/1\n".to_vec();
        expected.extend_from_slice(&2u64.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(b"a");
        expected.extend_from_slice(&2u64.to_le_bytes());
        expected.extend_from_slice(&[0, 255]);
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(b"b");
        expected.extend_from_slice(&2u64.to_le_bytes());
        expected.extend_from_slice(b"xy");
        assert_eq!(inputs.canonical_encoding(), expected);
        assert_eq!(inputs.key().as_str(), hex(&Sha256::digest(&expected)));
    }

    #[test]
    fn golden_key_is_stable() {
        // Computed independently (Python hashlib + struct) from the documented encoding.
        assert_eq!(
            kernel_inputs().key().as_str(),
            "d39a958ab42e596f32bd6dfc5955f55e79c8711cb9f12f25be6142dab2a9a5c5"
        );
    }

    #[test]
    fn empty_set_has_a_golden_key_too() {
        // sha256("triton-npu-cache-key/1\n" ++ 0u64 le)
        assert_eq!(
            Inputs::empty().key().as_str(),
            hex(&Sha256::digest(
                [KEY_ENCODING_TAG, &0u64.to_le_bytes()].concat()
            ))
        );
    }

    #[test]
    fn insertion_order_does_not_matter() {
        let a = Inputs::empty().text("x", "1").text("y", "2");
        let b = Inputs::empty().text("y", "2").text("x", "1");
        assert_eq!(a.key(), b.key());
    }

    #[test]
    fn every_change_changes_the_key() {
        let base = kernel_inputs();
        let base_key = base.key();
        let names: Vec<String> = base.iter().map(|(n, _)| n.to_owned()).collect();
        for name in &names {
            let mut changed = base.clone();
            let mut value = changed.get(name).unwrap().to_vec();
            value.push(b' ');
            changed.insert(name.clone(), value);
            assert_ne!(changed.key(), base_key, "changing {name} kept the key");

            let mut removed = base.clone();
            removed.values.remove(name);
            assert_ne!(removed.key(), base_key, "removing {name} kept the key");

            let mut renamed = base.clone();
            let v = renamed.values.remove(name).unwrap();
            renamed.insert(format!("{name}_"), v);
            assert_ne!(renamed.key(), base_key, "renaming {name} kept the key");
        }
        assert_ne!(base.clone().text("extra", "").key(), base_key);
    }

    #[test]
    fn lengths_keep_names_and_values_apart() {
        let a = Inputs::empty().text("ab", "c");
        let b = Inputs::empty().text("a", "bc");
        assert_ne!(a.key(), b.key());
        let c = Inputs::empty().text("a", "").text("b", "");
        let d = Inputs::empty().text("a", "b");
        assert_ne!(c.key(), d.key());
    }

    #[test]
    fn new_includes_the_crate_version() {
        let inputs = Inputs::new();
        assert_eq!(
            inputs.get(VERSION_INPUT),
            Some(npu_target::VERSION.as_bytes())
        );
        let other = Inputs::new().text(VERSION_INPUT, "0.0.0-other");
        assert_ne!(inputs.key(), other.key());
    }

    #[test]
    fn key_parse_accepts_only_sha256_hex() {
        let key = kernel_inputs().key();
        assert_eq!(Key::parse(key.as_str()), Some(key.clone()));
        assert_eq!(Key::parse(&key.as_str().to_uppercase()), None);
        assert_eq!(Key::parse(&key.as_str()[1..]), None);
        assert_eq!(Key::parse("../../etc/passwd"), None);
        assert_eq!(key.short().len(), 12);
        assert_eq!(key.shard(), &key.as_str()[..2]);
    }

    #[test]
    fn label_names_the_kernel() {
        let inputs = kernel_inputs();
        let key = inputs.key();
        assert_eq!(
            inputs.label(&key),
            format!("{} (kernel add_kernel)", key.short())
        );
    }
}
