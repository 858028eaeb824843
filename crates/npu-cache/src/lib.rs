//! A transactional, single-flight artifact cache for compiled NPU kernels.
//!
//! Compiling one NPU kernel takes seconds to minutes, so what users feel is this cache. It
//! differs from Triton's file cache (which upstream used) in three ways:
//!
//! * **An entry is a transaction.** A builder fills a private staging directory; the entry is
//!   published by one atomic `rename` after its [manifest](Manifest) (every file with size and
//!   sha256, the inputs, tool versions, creation time) is written. Readers check the manifest
//!   and every file's size on each lookup and the checksums on first use through a [`Cache`]
//!   handle. A missing, truncated or mismatching entry is never served: it is moved to the
//!   trash, deleted and rebuilt, with a warning.
//! * **Single flight.** When threads or processes ask for the same missing key, one builds and
//!   the others wait on an OS file lock, which the kernel releases if the builder dies (even
//!   by `kill -9`), so a waiter then takes over.
//! * **Private.** Directories are created with mode 0700; a root or entry owned by another
//!   user, or writable by group or others, is refused: the cache decides what runs on the NPU.
//!
//! Keys are sha256 over a canonical, versioned encoding of named inputs; see [`key`].
//!
//! # Layout
//!
//! ```text
//! <root>/                              AMD_TRITON_NPU_CACHE_DIR, TRITON_CACHE_DIR/npu, …
//!   entries/<key[0..2]>/<key>/         a published entry
//!       manifest.json                  the commit record; its mtime is the entry's last use
//!       data/…                         what the build produced
//!   staging/<key>.<pid>.<random>/      an entry being built (same layout)
//!   trash/<key>.<pid>.<random>/        an entry being deleted
//!   locks/<key>.lock                   build lock: held exclusively by the one builder
//!   locks/<key>.use                    in-use lock: shared by readers, exclusive for removal
//!   stats                              hit/miss counters
//! ```
//!
//! A lookup that hits touches a fixed number of files whatever the number of entries; only
//! `list`, `verify_all`, `clear` and eviction (after a build, when a size cap is set) scan.
//!
//! # Example
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! use npu_cache::{Cache, Inputs};
//! let cache = Cache::at(tmp.path().join("cache"))?;
//! let inputs = Inputs::new()
//!     .text("kernel_name", "add_kernel")
//!     .text("kernel_ir", "module { }")
//!     .text("grid", "4,1,1");
//! let entry = cache.get_or_build(&inputs, |dir| std::fs::write(dir.join("aie.elf"), b"\x7fELF"))?;
//! assert_eq!(std::fs::read(entry.file("aie.elf").unwrap())?, b"\x7fELF");
//! # Ok(()) }
//! ```

mod cache;
mod entry;
mod error;
pub mod key;
mod location;
mod lock;
mod maintenance;
mod manifest;
mod stats;

pub use cache::Cache;
pub use entry::Entry;
pub use error::CacheError;
pub use key::{Inputs, KERNEL_NAME_INPUT, Key, TOOL_INPUT_PREFIX, VERSION_INPUT};
pub use location::{Location, resolve as resolve_location};
pub use maintenance::{CacheStats, EntryInfo, Removal, Verification};
pub use manifest::{DATA_DIR, FileRecord, InputSummary, MANIFEST_FILE, MANIFEST_SCHEMA, Manifest};
pub use stats::Counters;
