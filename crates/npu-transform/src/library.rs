//! triton-npu's transform library: the named sequences upstream's scripts call with
//! `transform.include` (same names, signatures and effects as amd/Triton-XDNA's
//! `transform_library/`, written for triton-npu), built into the binary so that every
//! installation has them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::error::TransformError;
use crate::script::{Script, Sequence};

/// One file of the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibraryFile {
    pub name: &'static str,
    pub text: &'static str,
}

/// A library file by its name under `src/library/`, embedded at build time.
macro_rules! library_file {
    ($name:literal) => {
        LibraryFile {
            name: $name,
            text: include_str!(concat!("library/", $name)),
        }
    };
}

/// The library's files, in the order their sequences are listed.
pub const FILES: [LibraryFile; 6] = [
    library_file!("canonicalization.mlir"),
    library_file!("elementwise.mlir"),
    library_file!("bufferization.mlir"),
    library_file!("vectorization.mlir"),
    library_file!("air_mapping.mlir"),
    library_file!("type_casting.mlir"),
];

/// The parsed library.
#[derive(Debug)]
pub struct Library {
    scripts: Vec<Script>,
    /// name → (file index, sequence index), sorted by name.
    index: BTreeMap<String, (usize, usize)>,
}

/// One sequence of the library, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub signature: String,
    pub file: &'static str,
    /// The comment above the definition, without `//`.
    pub doc: String,
}

impl Library {
    fn load() -> Result<Library, TransformError> {
        let mut scripts = Vec::new();
        let mut index = BTreeMap::new();
        for (f, file) in FILES.iter().enumerate() {
            let script = Script::parse_at(&format!("library {}", file.name), file.text, 1, false)
                .map_err(|e| TransformError::Library(e.to_string()))?;
            for (s, seq) in script.sequences.iter().enumerate() {
                if seq.body.is_none() {
                    return Err(TransformError::Library(format!(
                        "@{} in {} has no body",
                        seq.name, file.name
                    )));
                }
                if index.insert(seq.name.clone(), (f, s)).is_some() {
                    return Err(TransformError::Library(format!(
                        "@{} is defined twice",
                        seq.name
                    )));
                }
            }
            scripts.push(script);
        }
        Ok(Library { scripts, index })
    }

    /// The library, parsed once per process.
    pub fn get() -> Result<&'static Library, TransformError> {
        static LIBRARY: OnceLock<Result<Library, String>> = OnceLock::new();
        LIBRARY
            .get_or_init(|| Library::load().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| TransformError::Library(e.clone()))
    }

    /// Every sequence name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.index.keys().cloned().collect()
    }

    /// The script (library file) defining `name` and the sequence.
    pub fn lookup(&self, name: &str) -> Option<(&Script, &Sequence)> {
        let &(f, s) = self.index.get(name)?;
        let script = &self.scripts[f];
        Some((script, &script.sequences[s]))
    }

    /// The full text of `name`'s definition, with the comment above it.
    pub fn definition(&self, name: &str) -> Option<&str> {
        let (script, seq) = self.lookup(name)?;
        Some(&script.text[seq.definition.clone()])
    }

    /// Every sequence, in file order.
    pub fn entries(&self) -> Vec<Entry> {
        self.scripts
            .iter()
            .zip(FILES.iter())
            .flat_map(|(script, file)| {
                script.sequences.iter().map(move |seq| Entry {
                    name: seq.name.clone(),
                    signature: seq.signature(),
                    file: file.name,
                    doc: doc_comment(&script.text[seq.definition.clone()]),
                })
            })
            .collect()
    }
}

/// The leading `//` lines of a definition, joined.
fn doc_comment(definition: &str) -> String {
    definition
        .lines()
        .map(str::trim)
        .take_while(|l| l.starts_with("//"))
        .map(|l| l.trim_start_matches('/').trim())
        .collect::<Vec<_>>()
        .join(" ")
}

/// SHA-256 of the library's files: changes whenever a sequence does, so cache keys that
/// include it never serve artifacts built with an older library.
pub fn digest() -> &'static str {
    // The library is compiled in: hashed once per process (every launch's cache key has it).
    static DIGEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIGEST.get_or_init(|| {
        let mut h = Sha256::new();
        for f in &FILES {
            h.update(f.name.as_bytes());
            h.update([0]);
            h.update(f.text.as_bytes());
            h.update([0]);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 25 sequences of upstream's library (real-toolchain-rules.md §1), by file.
    const UPSTREAM: [(&str, &[&str]); 6] = [
        (
            "canonicalization.mlir",
            &["canonicalize_with_cse", "canonicalize_with_fold_dims"],
        ),
        (
            "elementwise.mlir",
            &[
                "fuse_elementwise_and_canonicalize",
                "flatten_tile_forall",
                "flatten_tile_forall_aie2p",
                "pad_and_promote_unary_bf16",
                "pad_and_promote_unary_f32in_bf16out",
                "pad_and_promote_binary_bf16",
                "pad_and_promote_binary_f32in_bf16out",
                "pad_and_promote_binary_f32",
            ],
        ),
        (
            "bufferization.mlir",
            &["one_shot_bufferize", "post_bufferize_cleanup"],
        ),
        (
            "vectorization.mlir",
            &[
                "vectorize_generics_at_16",
                "vectorize_generics_at_32",
                "post_vectorize_reduce_cleanup",
            ],
        ),
        (
            "air_mapping.mlir",
            &[
                "air_herd_mapping_and_vectorize",
                "air_herd_mapping_with_extern_and_vectorize",
            ],
        ),
        (
            "type_casting.mlir",
            &[
                "match_bf16_only_op",
                "action_cast_to_bf16",
                "match_cmpf",
                "action_cast_cmpf_to_bf16",
                "match_select",
                "action_cast_select_to_bf16",
                "cast_bf16_only_ops",
                "cast_cmpf_and_select_ops",
            ],
        ),
    ];

    #[test]
    fn has_every_upstream_sequence_with_its_signature() {
        let lib = Library::get().unwrap();
        let entries = lib.entries();
        assert_eq!(entries.len(), 25);
        for (file, names) in UPSTREAM {
            let here: Vec<&str> = entries
                .iter()
                .filter(|e| e.file == file)
                .map(|e| e.name.as_str())
                .collect();
            assert_eq!(here, names, "{file}");
        }
        let readonly = "!transform.any_op {transform.readonly}";
        let consumed = "!transform.any_op {transform.consumed}";
        for e in &entries {
            let (_, seq) = lib.lookup(&e.name).unwrap();
            assert_eq!(seq.params.len(), 1, "{}", e.name);
            let p = &seq.params[0];
            let written = format!("{} {{{}}}", p.ty, p.effect.clone().unwrap_or_default());
            let returns_op = e.name.starts_with("match_") || e.name.starts_with("air_herd_mapping");
            let consumes = e.name.starts_with("action_") || e.name.starts_with("cast_");
            assert_eq!(
                written,
                if consumes { consumed } else { readonly },
                "{}",
                e.name
            );
            let want: &[&str] = if returns_op {
                &["!transform.any_op"]
            } else {
                &[]
            };
            assert_eq!(seq.results, want, "{}", e.name);
            assert!(!e.doc.is_empty(), "@{} has no comment", e.name);
        }
    }

    #[test]
    fn definitions_carry_their_comment() {
        let lib = Library::get().unwrap();
        let d = lib.definition("match_cmpf").unwrap();
        assert!(d.starts_with("// match_cmpf: matcher"), "{d}");
        assert!(d.trim_end().ends_with('}'));
        assert!(lib.definition("nope").is_none());
        assert_eq!(digest().len(), 64);
    }
}
