//! Whole-cache operations: listing, verifying, clearing and evicting. These scan the cache and
//! are meant for the command line and for the miss path (after a build, which takes seconds);
//! the hit path never calls them.

use std::fs::{self, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::cache::{Cache, ENTRIES, LOCKS, STAGING, TRASH};
use crate::entry::{self, Depth, Verdict};
use crate::error::{CacheError, io_err};
use crate::fsat::{self, Opened};
use crate::key::Key;
use crate::lock::FileLock;
use crate::manifest::{self, MANIFEST_FILE, MANIFEST_MAX_BYTES, Manifest};
use crate::stats::Counters;

/// One published entry, as listed.
#[derive(Debug, Clone)]
pub struct EntryInfo {
    pub key: Key,
    /// The entry directory.
    pub path: PathBuf,
    /// Bytes of all its files, manifest included.
    pub bytes: u64,
    /// When it was last served (or built): the later of the manifest's modification time (set
    /// when the entry was built) and its access time (set by the file system when a lookup
    /// reads it; with the usual `relatime` mount option at most once a day after the first
    /// read, and never on `noatime` mounts). A hit writes nothing itself.
    pub last_used: SystemTime,
    /// The manifest, or why it cannot be read.
    pub manifest: Result<Manifest, String>,
}

impl EntryInfo {
    pub fn kernel_name(&self) -> Option<&str> {
        self.manifest.as_ref().ok().and_then(Manifest::kernel_name)
    }

    pub fn created(&self) -> Option<SystemTime> {
        self.manifest.as_ref().ok().map(Manifest::created)
    }
}

/// The result of checking one entry's checksums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub key: Key,
    /// `None` if the entry is sound.
    pub problem: Option<String>,
}

/// What `clear` or `evict_to` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removal {
    pub removed: Vec<Key>,
    pub freed_bytes: u64,
    /// Entries left in place because a live process is using them.
    pub in_use: Vec<Key>,
    /// Bytes the remaining entries take.
    pub remaining_bytes: u64,
    /// Symlinks or files found where shard directories should be, removed (not followed).
    pub strays: Vec<PathBuf>,
}

/// Sizes and counters of a cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheStats {
    pub root: PathBuf,
    pub entries: usize,
    pub bytes: u64,
    pub max_bytes: Option<u64>,
    pub counters: Counters,
}

enum Outcome {
    Removed,
    InUse,
    Gone,
}

impl Cache {
    /// Every published entry, least recently used first.
    pub fn list(&self) -> Result<Vec<EntryInfo>, CacheError> {
        let mut infos: Vec<EntryInfo> = self
            .keys()?
            .0
            .into_iter()
            .filter_map(|key| {
                let path = self.entry_path(&key);
                let manifest_path = path.join(MANIFEST_FILE);
                let meta = fs::symlink_metadata(&manifest_path)
                    .or_else(|_| fs::symlink_metadata(&path))
                    .ok()?;
                let modified = meta.modified().ok()?;
                let last_used = meta.accessed().map_or(modified, |a| a.max(modified));
                Some(EntryInfo {
                    manifest: read_manifest(&manifest_path, &key),
                    bytes: entry::disk_bytes(&path),
                    key,
                    path,
                    last_used,
                })
            })
            .collect();
        infos.sort_by(|a, b| a.last_used.cmp(&b.last_used).then(a.key.cmp(&b.key)));
        Ok(infos)
    }

    /// Checks every entry fully (manifest, sizes, every checksum, no unlisted files).
    pub fn verify_all(&self) -> Result<Vec<Verification>, CacheError> {
        let mut results = Vec::new();
        for key in self.keys()?.0 {
            let Some(shard) = self.open_shard(&key)? else {
                continue;
            };
            let problem =
                match entry::read(shard.as_fd(), &self.shard_path(&key), &key, Depth::Audit) {
                    Ok(Verdict::Missing) => continue,
                    Ok(Verdict::Damaged(reason)) => Some(reason),
                    Ok(Verdict::Sound(_)) => None,
                    Err(e) => Some(e.to_string()),
                };
            results.push(Verification { key, problem });
        }
        Ok(results)
    }

    /// Sizes and counters.
    pub fn stats(&self) -> Result<CacheStats, CacheError> {
        let infos = self.list()?;
        let mut counters = self
            .stats
            .read()
            .map_err(io_err("read the counters in", &self.root))?;
        counters.add(self.pending.peek());
        Ok(CacheStats {
            root: self.root.clone(),
            entries: infos.len(),
            bytes: infos.iter().map(|i| i.bytes).sum(),
            max_bytes: self.max_bytes(),
            counters,
        })
    }

    /// Removes every entry (or those unused for longer than `unused_for`) that no live process
    /// is using; also empties the trash and removes staging left by dead builders.
    pub fn clear(&self, unused_for: Option<Duration>) -> Result<Removal, CacheError> {
        let now = SystemTime::now();
        let mut report = Removal {
            strays: self.remove_strays(),
            ..Removal::default()
        };
        for info in self.list()? {
            let idle = now.duration_since(info.last_used).unwrap_or_default();
            if unused_for.is_some_and(|limit| idle < limit) {
                report.remaining_bytes += info.bytes;
                continue;
            }
            self.remove_into(info, &mut report)?;
        }
        self.sweep();
        Ok(report)
    }

    /// Evicts least recently used entries until all entries take at most `max_bytes`,
    /// skipping entries in use by a live process.
    pub fn evict_to(&self, max_bytes: u64) -> Result<Removal, CacheError> {
        let infos = self.list()?;
        let mut report = Removal {
            remaining_bytes: infos.iter().map(|i| i.bytes).sum(),
            ..Removal::default()
        };
        for info in infos {
            if report.remaining_bytes <= max_bytes {
                break;
            }
            let bytes = info.bytes;
            report.remaining_bytes -= bytes;
            // Given back by `remove_into` if the entry is in use.
            self.remove_into(info, &mut report)?;
        }
        if !report.removed.is_empty() {
            tracing::info!(
                "evicted {} kernel cache entries ({} bytes) to stay under {max_bytes} bytes",
                report.removed.len(),
                report.freed_bytes
            );
        }
        Ok(report)
    }

    fn remove_into(&self, info: EntryInfo, report: &mut Removal) -> Result<(), CacheError> {
        match self.remove_entry(&info.key)? {
            Outcome::Removed => {
                report.freed_bytes += info.bytes;
                report.removed.push(info.key);
                self.count(Counters {
                    removed: 1,
                    ..Counters::default()
                });
            }
            Outcome::InUse => {
                report.remaining_bytes += info.bytes;
                report.in_use.push(info.key);
            }
            Outcome::Gone => {}
        }
        Ok(())
    }

    /// Removes one entry unless a live process holds it: readers hold a shared lock on its
    /// manifest for as long as they use it, so the remover takes it exclusively (without
    /// waiting), unlinks the manifest (so a reader that was about to lock it sees it gone),
    /// then moves the entry to the trash.
    fn remove_entry(&self, key: &Key) -> Result<Outcome, CacheError> {
        let Some(shard) = self.open_shard(key)? else {
            return Ok(Outcome::Gone);
        };
        let path = self.entry_path(key);
        let dir = match fsat::open_dir(&shard, key.as_str()).map_err(io_err("open", &path))? {
            Opened::Found(dir) => Some(dir),
            Opened::Missing => return Ok(Outcome::Gone),
            Opened::WrongType => None,
        };
        let manifest = match &dir {
            Some(dir) => match fsat::open_file(dir, MANIFEST_FILE, true)
                .map_err(io_err("open", path.join(MANIFEST_FILE)))?
            {
                Opened::Found(file) => Some(file),
                Opened::Missing | Opened::WrongType => None,
            },
            None => None,
        };
        if let (Some(dir), Some(manifest)) = (&dir, &manifest) {
            match manifest.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => return Ok(Outcome::InUse),
                Err(fs::TryLockError::Error(e)) => {
                    return Err(io_err("lock", path.join(MANIFEST_FILE))(e));
                }
            }
            match rustix::fs::unlinkat(dir, MANIFEST_FILE, rustix::fs::AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(io_err("remove", path.join(MANIFEST_FILE))(e.into())),
            }
        }
        let removed = self.move_to_trash(key)?;
        if let Some(building) = FileLock::try_acquire(&self.build_lock_path(key))? {
            building.unlink();
        }
        Ok(if removed {
            Outcome::Removed
        } else {
            Outcome::Gone
        })
    }

    /// Removes symlinks and files that stand where shard directories should be, without
    /// following them.
    fn remove_strays(&self) -> Vec<PathBuf> {
        let Ok((_, strays)) = self.keys() else {
            return Vec::new();
        };
        strays
            .into_iter()
            .filter(|stray| match fs::remove_file(stray) {
                Ok(()) => {
                    tracing::warn!(
                        "removed {}, which stood where a kernel cache directory should be",
                        stray.display()
                    );
                    true
                }
                Err(e) => {
                    tracing::warn!("cannot remove {}: {e}", stray.display());
                    false
                }
            })
            .collect()
    }

    /// Empties the trash and removes staging directories whose builder is gone.
    fn sweep(&self) {
        if let Ok(items) = fs::read_dir(self.root.join(TRASH)) {
            for item in items.flatten() {
                let _ = fs::remove_dir_all(item.path());
            }
        }
        self.sweep_staging();
        self.sweep_locks();
    }

    fn sweep_staging(&self) {
        let Ok(items) = fs::read_dir(self.root.join(STAGING)) else {
            return;
        };
        for item in items.flatten() {
            let name = item.file_name().to_string_lossy().into_owned();
            let Some(key) = name.split('.').next().and_then(Key::parse) else {
                continue;
            };
            // A live builder holds the build lock of its key.
            if let Ok(Some(_free)) = FileLock::try_acquire(&self.build_lock_path(&key)) {
                let _ = fs::remove_dir_all(item.path());
            }
        }
    }

    /// Removes lock files of keys that have no entry (left by lookups that missed, or by
    /// builds that failed). A lock file someone holds is left alone; one removed under a
    /// waiting party is noticed by it (see the `lock` module).
    fn sweep_locks(&self) {
        let locks = self.root.join(LOCKS);
        let Ok(items) = fs::read_dir(&locks) else {
            return;
        };
        for item in items.flatten() {
            let name = item.file_name().to_string_lossy().into_owned();
            let Some(key) = name
                .strip_suffix(".lock")
                .or_else(|| name.strip_suffix(".use"))
                .and_then(Key::parse)
            else {
                continue;
            };
            if self.entry_path(&key).exists() {
                continue;
            }
            // `.use` files are in-use locks of earlier versions, which nothing takes any more.
            if name.ends_with(".use") {
                let _ = fs::remove_file(item.path());
            } else if let Ok(Some(lock)) = FileLock::try_acquire(&item.path())
                && !self.entry_path(&key).exists()
            {
                lock.unlink();
            }
        }
    }

    /// Keys of all published entries (directory scan), and the symlinks or files that stand
    /// where shard directories should be (never followed).
    fn keys(&self) -> Result<(Vec<Key>, Vec<PathBuf>), CacheError> {
        let entries = self.root.join(ENTRIES);
        let mut keys = Vec::new();
        let mut strays = Vec::new();
        for shard in fs::read_dir(&entries).map_err(io_err("list", &entries))? {
            let shard = shard.map_err(io_err("list", &entries))?;
            if !shard.file_type().is_ok_and(|t| t.is_dir()) {
                strays.push(shard.path());
                continue;
            }
            let shard_name = shard.file_name();
            let Some(shard_name) = shard_name.to_str() else {
                continue;
            };
            let Ok(items) = fs::read_dir(shard.path()) else {
                continue;
            };
            for item in items.flatten() {
                if let Some(key) = item.file_name().to_str().and_then(Key::parse)
                    && key.as_str().starts_with(shard_name)
                {
                    keys.push(key);
                }
            }
        }
        keys.sort();
        Ok((keys, strays))
    }
}

fn read_manifest(path: &Path, key: &Key) -> Result<Manifest, String> {
    // O_NOATIME: listing is not a use of the entry.
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOATIME)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => format!("{MANIFEST_FILE} is missing"),
            _ => format!("cannot open {MANIFEST_FILE}: {e}"),
        })?;
    let mut bytes = Vec::new();
    (&mut file)
        .take(MANIFEST_MAX_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {MANIFEST_FILE}: {e}"))?;
    manifest::parse(&bytes, key)
}
