//! The cache handle: opening a root, looking entries up and building them once.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use npu_target::Config;

use crate::entry::{self, Entry, Verdict};
use crate::error::{CacheError, io_err};
use crate::key::{Inputs, Key};
use crate::location::{self, check_private, check_private_dir, create_private_dir, root_remedy};
use crate::lock::{FileLock, LockKind};
use crate::manifest::{DATA_DIR, MANIFEST_FILE, Manifest};
use crate::stats::{Counters, StatsFile};

pub(crate) const ENTRIES: &str = "entries";
pub(crate) const STAGING: &str = "staging";
pub(crate) const TRASH: &str = "trash";
pub(crate) const LOCKS: &str = "locks";

/// A cache root, opened and checked. Cheap to share between threads (`&Cache` is enough).
#[derive(Debug)]
pub struct Cache {
    pub(crate) root: PathBuf,
    max_bytes: Option<u64>,
    /// Entries (key, build id) whose checksums this handle has verified.
    verified: Mutex<HashSet<(Key, String)>>,
    pub(crate) stats: StatsFile,
}

/// What opening an entry found.
enum Opened {
    Hit(Box<Entry>),
    Missing,
    Damaged(String),
}

/// The process's open caches, one per (root, size cap): a handle remembers which entries it
/// has checksummed, so sharing it keeps "checksums on first use" per process, not per call.
static SHARED: Mutex<Vec<SharedCache>> = Mutex::new(Vec::new());

/// An open cache with the root and size cap it was opened for.
type SharedCache = (PathBuf, Option<u64>, Arc<Cache>);

impl Cache {
    /// The process-wide handle of the cache the configuration names, opened on first use.
    pub fn shared(config: &Config) -> Result<Arc<Cache>, CacheError> {
        let location = location::resolve(&config.locations)?;
        let root = std::path::absolute(&location.root).unwrap_or(location.root);
        let mut caches = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, _, cache)) = caches
            .iter()
            .find(|(r, max, _)| *r == root && *max == config.cache_max_bytes)
        {
            return Ok(Arc::clone(cache));
        }
        let cache = Arc::new(Cache::open(config)?);
        caches.push((root, config.cache_max_bytes, Arc::clone(&cache)));
        Ok(cache)
    }

    /// Opens the cache the configuration names (see [`location::resolve`]), with its size cap.
    pub fn open(config: &Config) -> Result<Cache, CacheError> {
        let location = location::resolve(&config.locations)?;
        let cache = Cache::open_root(location.root, location.origin)?;
        Ok(cache.with_max_bytes(config.cache_max_bytes))
    }

    /// Opens (creating if needed) a cache at `root`, without a size cap.
    pub fn at(root: impl Into<PathBuf>) -> Result<Cache, CacheError> {
        Cache::open_root(root.into(), "the directory given")
    }

    /// Sets the size cap; after each build, least recently used entries are evicted above it.
    pub fn with_max_bytes(mut self, max_bytes: Option<u64>) -> Cache {
        self.max_bytes = max_bytes;
        self
    }

    fn open_root(root: PathBuf, origin: &str) -> Result<Cache, CacheError> {
        let unusable = |path: &Path, source: io::Error| CacheError::Unusable {
            path: path.to_owned(),
            origin: origin.to_owned(),
            source,
        };
        let root = std::path::absolute(&root).map_err(|e| unusable(&root, e))?;
        location::create_private_dir_all(&root).map_err(|e| unusable(&root, e))?;
        // The root may be a symlink to a directory elsewhere; what counts is the directory.
        let meta = fs::metadata(&root).map_err(|e| unusable(&root, e))?;
        if !meta.is_dir() {
            return Err(unusable(
                &root,
                io::Error::new(io::ErrorKind::NotADirectory, "it is not a directory"),
            ));
        }
        check_private(&root, &meta, &root_remedy(&root, &meta))?;
        for sub in [ENTRIES, STAGING, TRASH, LOCKS] {
            let dir = root.join(sub);
            create_private_dir(&dir).map_err(|e| unusable(&dir, e))?;
            check_private_dir(&dir)?;
        }
        // Lookups create lock files and builds create directories: fail now, with the
        // directory's name, rather than at the first kernel launch.
        tempfile::tempfile_in(root.join(STAGING)).map_err(|e| unusable(&root, e))?;
        Ok(Cache {
            stats: StatsFile::new(&root),
            root,
            max_bytes: None,
            verified: Mutex::new(HashSet::new()),
        })
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The size cap, if any.
    pub fn max_bytes(&self) -> Option<u64> {
        self.max_bytes
    }

    /// Where the entry of `key` lives when published.
    pub fn entry_path(&self, key: &Key) -> PathBuf {
        self.root.join(ENTRIES).join(key.shard()).join(key.as_str())
    }

    pub(crate) fn build_lock_path(&self, key: &Key) -> PathBuf {
        self.root.join(LOCKS).join(format!("{key}.lock"))
    }

    pub(crate) fn use_lock_path(&self, key: &Key) -> PathBuf {
        self.root.join(LOCKS).join(format!("{key}.use"))
    }

    /// The published entry for `inputs`, if there is a sound one. A damaged entry is moved
    /// aside (unless someone is rebuilding it right now) and reported as absent.
    pub fn lookup(&self, inputs: &Inputs) -> Result<Option<Entry>, CacheError> {
        let key = inputs.key();
        match self.open_entry(&key)? {
            Opened::Hit(entry) => {
                self.count(Counters {
                    hits: 1,
                    ..Counters::default()
                });
                Ok(Some(*entry))
            }
            Opened::Missing => {
                self.count(Counters {
                    misses: 1,
                    ..Counters::default()
                });
                Ok(None)
            }
            Opened::Damaged(reason) => {
                // Only the holder of the build lock may move an entry; if someone is building
                // this key right now, leave it to them.
                match FileLock::try_acquire(&self.build_lock_path(&key), LockKind::Exclusive)? {
                    Some(_building) => match self.open_entry(&key)? {
                        Opened::Hit(entry) => {
                            self.count(Counters {
                                hits: 1,
                                ..Counters::default()
                            });
                            return Ok(Some(*entry));
                        }
                        Opened::Damaged(reason) => {
                            self.set_aside(&key, &inputs.label(&key), &reason)
                        }
                        Opened::Missing => {}
                    },
                    None => tracing::debug!("cache entry {} is damaged ({reason})", key.short()),
                }
                self.count(Counters {
                    misses: 1,
                    ..Counters::default()
                });
                Ok(None)
            }
        }
    }

    /// The entry for `inputs`, built by `build` if it is missing or damaged.
    ///
    /// `build` gets an empty private directory and fills it; the entry is published only if
    /// `build` returns `Ok` and its output passes sealing. Across threads and processes, one
    /// caller builds a missing key and the others wait for it (a builder that dies releases
    /// its lock, and a waiter takes over). A failing build publishes nothing; its error goes
    /// to the caller that ran it, and waiting callers then build themselves.
    pub fn get_or_build<E, F>(&self, inputs: &Inputs, build: F) -> Result<Entry, CacheError<E>>
    where
        F: FnOnce(&Path) -> Result<(), E>,
    {
        let key = inputs.key();
        let label = inputs.label(&key);
        if let Opened::Hit(entry) = self.open_entry(&key).map_err(CacheError::widen)? {
            self.count(Counters {
                hits: 1,
                ..Counters::default()
            });
            return Ok(*entry);
        }

        let building = FileLock::acquire(&self.build_lock_path(&key), LockKind::Exclusive, || {
            tracing::info!(
                "waiting for another process or thread to build cache entry {label} (key {key})"
            )
        })
        .map_err(CacheError::widen)?;
        // Whoever held the lock may have published the entry meanwhile.
        match self.open_entry(&key).map_err(CacheError::widen)? {
            Opened::Hit(entry) => {
                self.count(Counters {
                    hits: 1,
                    ..Counters::default()
                });
                return Ok(*entry);
            }
            Opened::Missing => {}
            Opened::Damaged(reason) => self.set_aside(&key, &label, &reason),
        }
        self.remove_stale_staging(&key);

        let entry = self.build_and_publish(&key, inputs, &label, build)?;
        drop(building);
        self.count(Counters {
            misses: 1,
            ..Counters::default()
        });
        if let Some(max) = self.max_bytes
            && let Err(e) = self.evict_to(max)
        {
            tracing::warn!("cannot evict kernel cache entries to stay under {max} bytes: {e}");
        }
        Ok(entry)
    }

    fn build_and_publish<E, F>(
        &self,
        key: &Key,
        inputs: &Inputs,
        label: &str,
        build: F,
    ) -> Result<Entry, CacheError<E>>
    where
        F: FnOnce(&Path) -> Result<(), E>,
    {
        let widen = CacheError::widen::<E>;
        let staging_root = self.root.join(STAGING);
        // Removed on every early return below; kept (and renamed) only on success.
        let staging = tempfile::Builder::new()
            .prefix(&format!("{key}.{}.", std::process::id()))
            .rand_bytes(8)
            .permissions(fs::Permissions::from_mode(0o700))
            .tempdir_in(&staging_root)
            .map_err(io_err("create a staging directory in", &staging_root))
            .map_err(widen)?;
        let data = staging.path().join(DATA_DIR);
        create_private_dir(&data)
            .map_err(io_err("create", &data))
            .map_err(widen)?;

        tracing::info!("building cache entry {label}");
        let started = Instant::now();
        build(&data).map_err(|source| CacheError::Build {
            key: key.clone(),
            label: label.to_owned(),
            source,
        })?;

        let files = entry::seal(&data, label).map_err(widen)?;
        let build_id = staging
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit('.').next())
            .unwrap_or_default()
            .to_owned();
        let manifest = Manifest::new(key, inputs, build_id, files);
        let manifest_path = staging.path().join(MANIFEST_FILE);
        let text = serde_json::to_vec_pretty(&manifest).map_err(|e| {
            widen(CacheError::Io {
                action: "write",
                path: manifest_path.clone(),
                source: io::Error::other(e),
            })
        })?;
        let manifest_file = write_private(&manifest_path, &text)
            .map_err(io_err("write", &manifest_path))
            .map_err(widen)?;
        // Set explicitly: the file system's own clock may be too coarse to order entries
        // built in quick succession.
        if let Err(e) = manifest_file.set_modified(SystemTime::now()) {
            tracing::debug!("cannot record the creation of cache entry {label}: {e}");
        }

        let target = self.entry_path(key);
        let shard = target.parent().unwrap_or(&self.root).to_owned();
        create_private_dir(&shard)
            .map_err(io_err("create", &shard))
            .map_err(widen)?;
        check_private_dir(&shard).map_err(widen)?;
        // Take the in-use lock before the entry becomes visible, so no eviction can remove it
        // between publishing and returning.
        let in_use =
            FileLock::acquire(&self.use_lock_path(key), LockKind::Shared, || {}).map_err(widen)?;
        let staged = staging.keep();
        if let Err(e) = fs::rename(&staged, &target) {
            let _ = fs::remove_dir_all(&staged);
            return Err(widen(io_err("publish the entry at", &target)(e)));
        }
        tracing::debug!(
            "published cache entry {label} after {:.2?}",
            started.elapsed()
        );
        self.mark_verified(key, &manifest.build_id);
        Ok(Entry {
            key: key.clone(),
            data: target.join(DATA_DIR),
            manifest,
            _in_use: in_use,
        })
    }

    /// Opens the entry under a shared in-use lock and checks it: manifest and sizes always,
    /// checksums the first time this handle sees this build of the entry.
    fn open_entry(&self, key: &Key) -> Result<Opened, CacheError> {
        let in_use = FileLock::acquire(&self.use_lock_path(key), LockKind::Shared, || {})?;
        let dir = self.entry_path(key);
        let (manifest, manifest_file) = match entry::read(&dir, key)? {
            Verdict::Missing => return Ok(Opened::Missing),
            Verdict::Damaged(reason) => return Ok(Opened::Damaged(reason)),
            Verdict::Sound(manifest, file) => (manifest, file),
        };
        if !self.is_verified(key, &manifest.build_id) {
            if let Some(reason) = entry::verify_contents(&dir, &manifest)? {
                return Ok(Opened::Damaged(reason));
            }
            self.mark_verified(key, &manifest.build_id);
        }
        // The manifest's mtime is the entry's last use, which eviction orders by.
        if let Err(e) = manifest_file.set_modified(SystemTime::now()) {
            tracing::debug!("cannot record the use of cache entry {}: {e}", key.short());
        }
        Ok(Opened::Hit(Box::new(Entry {
            key: key.clone(),
            data: dir.join(DATA_DIR),
            manifest,
            _in_use: in_use,
        })))
    }

    /// Moves a damaged entry to the trash and deletes it. Called with the build lock held.
    fn set_aside(&self, key: &Key, label: &str, reason: &str) {
        tracing::warn!(
            "kernel cache entry {label} is damaged ({reason}); moving it aside and rebuilding it"
        );
        self.count(Counters {
            damaged: 1,
            ..Counters::default()
        });
        if let Err(e) = self.move_to_trash(key) {
            tracing::warn!("{e}");
        }
    }

    /// Renames the entry into `trash/` (one atomic step, so nobody sees half of it) and
    /// deletes it there. `Ok(false)` if there was no entry.
    pub(crate) fn move_to_trash(&self, key: &Key) -> Result<bool, CacheError> {
        let dir = self.entry_path(key);
        let trash_root = self.root.join(TRASH);
        let slot = tempfile::Builder::new()
            .prefix(&format!("{key}.{}.", std::process::id()))
            .rand_bytes(8)
            .permissions(fs::Permissions::from_mode(0o700))
            .tempdir_in(&trash_root)
            .map_err(io_err("create a directory in", &trash_root))?
            .keep();
        // Renaming a directory onto an empty directory replaces it.
        match fs::rename(&dir, &slot) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let _ = fs::remove_dir(&slot);
                return Ok(false);
            }
            Err(e) => {
                let _ = fs::remove_dir(&slot);
                return Err(io_err("move aside", &dir)(e));
            }
        }
        if let Err(e) = fs::remove_dir_all(&slot) {
            tracing::warn!(
                "cannot delete {} from the kernel cache trash: {e}",
                slot.display()
            );
        }
        Ok(true)
    }

    /// Removes staging directories of `key` left by builders that died. Called with the
    /// build lock held: a live builder of this key would hold it, so these are all stale.
    fn remove_stale_staging(&self, key: &Key) {
        let staging = self.root.join(STAGING);
        let prefix = format!("{key}.");
        let Ok(items) = fs::read_dir(&staging) else {
            return;
        };
        for item in items.flatten() {
            if item.file_name().to_string_lossy().starts_with(&prefix) {
                tracing::debug!("removing stale staging directory {}", item.path().display());
                let _ = fs::remove_dir_all(item.path());
            }
        }
    }

    fn is_verified(&self, key: &Key, build_id: &str) -> bool {
        self.verified
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&(key.clone(), build_id.to_owned()))
    }

    fn mark_verified(&self, key: &Key, build_id: &str) {
        self.verified
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((key.clone(), build_id.to_owned()));
    }

    pub(crate) fn count(&self, delta: Counters) {
        self.stats.add(delta);
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> io::Result<fs::File> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    Ok(file)
}
