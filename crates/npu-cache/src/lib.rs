//! A transactional, single-flight artifact cache for compiled NPU kernels.
//!
//! Compiling one NPU kernel takes seconds to minutes, so what users feel is this cache. It
//! differs from Triton's file cache (which upstream used) in three ways:
//!
//! * **An entry is a transaction.** A builder fills a private staging directory; the entry is
//!   published by one atomic `rename` after its [manifest](Manifest) (every file with size and
//!   sha256, the inputs, tool versions, creation time) is written. Every lookup reads the
//!   manifest and every file once, through file descriptors that follow no symlink, checks
//!   each file's sha256 and hands the checked bytes to the caller ([`Entry::bytes`]): what is
//!   loaded is what was checked. A missing, truncated or mismatching entry, or a file or
//!   symlink standing where its directory should be, is never served: it is moved to the
//!   trash, deleted and rebuilt, with a warning.
//! * **Single flight.** When threads or processes ask for the same missing key, one builds and
//!   the others wait on an OS file lock, which the kernel releases if the builder dies (even
//!   by `kill -9`), so a waiter then takes over. A waiter says whom it waits for (the
//!   builder's pid and since when, at debug level at once, at info level after 3 s) and gives
//!   up after the build wait (`AMD_TRITON_NPU_CACHE_WAIT_TIMEOUT`, default two hours) with
//!   an error naming the builder.
//! * **Private.** Directories are created with mode 0700; a root, shard, entry or lock file
//!   owned by another user, writable by group or others, or a symlink, is refused: the cache
//!   decides what runs on the NPU. `clear` removes a symlink planted inside the cache without
//!   following it.
//!
//! Keys are sha256 over a canonical, versioned encoding of named inputs; see [`key`].
//!
//! # Layout
//!
//! ```text
//! <root>/                              AMD_TRITON_NPU_CACHE_DIR, TRITON_CACHE_DIR/npu, …
//!   entries/<key[0..2]>/<key>/         a published entry
//!       manifest.json                  the commit record; readers hold a shared lock on it
//!                                      (removal takes it exclusively); its later of atime and
//!                                      mtime is the entry's last use
//!       data/…                         what the build produced
//!   staging/<key>.<pid>.<random>/      an entry being built (same layout)
//!   trash/<key>.<pid>.<random>/        an entry being deleted
//!   locks/<key>.lock                   build lock: held exclusively by the one builder, who
//!                                      writes its pid and start time into it
//!   stats                              hit/miss counters
//!   failed/<kernel>-<random>/          logs and input of a failed compile
//! ```
//!
//! A lookup that hits opens a fixed number of files whatever the number of entries and writes
//! nothing: the in-use lock is a shared lock on the manifest it reads, the last use is the
//! manifest's access time kept by the file system, and counters are added up in memory (see
//! [`Counters`]). Only `list`, `verify_all`, `clear` and eviction (after a build, when a size
//! cap is set) scan.
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
mod failed;
mod fsat;
pub mod key;
mod location;
mod lock;
mod maintenance;
mod manifest;
pub mod remote;
mod stats;

pub use cache::{Cache, DEFAULT_BUILD_WAIT, flush_shared};
pub use entry::Entry;
pub use error::CacheError;
pub use failed::FailedCompile;
pub use key::{Inputs, KERNEL_NAME_INPUT, Key, TOOL_INPUT_PREFIX, VERSION_INPUT};
pub use location::{Location, resolve as resolve_location};
pub use lock::Holder;
pub use maintenance::{CacheStats, EntryInfo, Removal, Verification};
pub use manifest::{
    BuildTimes, DATA_DIR, FileRecord, InputSummary, MANIFEST_FILE, MANIFEST_SCHEMA, Manifest,
};
pub use remote::{Remote, RemoteLink, RemoteSettings};
pub use stats::Counters;

/// A kernel or tag name made usable as one path component (work folders, failure records):
/// at most 64 characters of `[A-Za-z0-9_.-]`, others replaced by `_`, no leading dot.
pub fn file_safe(name: &str) -> String {
    let s: String = name
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_start_matches('.');
    if s.is_empty() {
        "kernel".to_owned()
    } else {
        s.to_owned()
    }
}
