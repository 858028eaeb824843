//! The cache handle: opening a root, looking entries up and building them once.

use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use npu_target::Config;

use crate::entry::{self, Depth, Entry, Verdict};
use crate::error::{CacheError, io_err};
use crate::fsat::{self, Opened};
use crate::key::{Inputs, Key};
use crate::location::{
    self, check_private, check_private_dir, check_private_stat, create_private_dir, euid,
    inside_remedy, root_remedy,
};
use crate::lock::{FileLock, Patience, Waited};
use crate::manifest::{BuildTimes, DATA_DIR, MANIFEST_FILE, Manifest};
use crate::remote::{self, RemoteSettings};
use crate::stats::{Counters, Pending, StatsFile};

pub(crate) const ENTRIES: &str = "entries";
pub(crate) const STAGING: &str = "staging";
pub(crate) const TRASH: &str = "trash";
pub(crate) const LOCKS: &str = "locks";

/// How long a process waits for another one's build of the same entry by default
/// (`AMD_TRITON_NPU_CACHE_WAIT_TIMEOUT`): two hours, longer than any sound build takes.
pub const DEFAULT_BUILD_WAIT: Duration = npu_target::DEFAULT_CACHE_WAIT_TIMEOUT;

/// After this long, waiting for another process's build is reported at info level.
const ANNOUNCE_WAIT_AFTER: Duration = Duration::from_secs(3);

/// A cache root, opened and checked. Cheap to share between threads (`&Cache` is enough).
#[derive(Debug)]
pub struct Cache {
    pub(crate) root: PathBuf,
    /// `entries/`, opened once without following symlinks; shards are opened relative to it.
    entries: OwnedFd,
    trash: OwnedFd,
    max_bytes: Option<u64>,
    build_wait: Duration,
    remote: RemoteSettings,
    pub(crate) pending: Pending,
    pub(crate) stats: StatsFile,
}

/// What opening an entry found.
enum Lookup {
    Hit(Box<Entry>),
    Missing,
    Damaged(String),
}

/// The process's open caches, one per (root, size cap, wait).
static SHARED: Mutex<Vec<SharedCache>> = Mutex::new(Vec::new());

/// An open cache with the root and the settings it was opened for.
type SharedCache = (PathBuf, SharedSettings, Arc<Cache>);

/// The settings a process-wide handle was opened with: another value opens another handle.
#[derive(Debug, Clone, PartialEq)]
struct SharedSettings {
    max_bytes: Option<u64>,
    wait: Duration,
    remote: (npu_target::RemoteCacheMode, u64, Duration),
}

impl SharedSettings {
    fn of(config: &Config) -> SharedSettings {
        SharedSettings {
            max_bytes: config.cache_max_bytes,
            wait: config.cache_wait_timeout,
            remote: (
                config.remote_cache,
                config.remote_cache_max_bytes,
                config.remote_cache_timeout,
            ),
        }
    }
}

/// Writes the counts of the process-wide handles (which are never dropped) at exit.
/// Writes the hit counters every process-wide handle keeps in memory. Programs call it as they
/// end (the `triton-npu` binary before it exits; the Python module from an `atexit` handler),
/// since process-wide handles are never dropped.
pub fn flush_shared() {
    if let Ok(caches) = SHARED.try_lock() {
        for (_, _, cache) in caches.iter() {
            cache.flush_counters();
        }
    }
}

impl Cache {
    /// The process-wide handle of the cache the configuration names, opened on first use.
    pub fn shared(config: &Config) -> Result<Arc<Cache>, CacheError> {
        let location = location::resolve(&config.locations)?;
        let root = std::path::absolute(&location.root).unwrap_or(location.root);
        let settings = SharedSettings::of(config);
        let mut caches = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, _, cache)) = caches.iter().find(|(r, s, _)| *r == root && *s == settings) {
            return Ok(Arc::clone(cache));
        }
        let cache = Arc::new(Cache::open(config)?);
        caches.push((root, settings, Arc::clone(&cache)));
        Ok(cache)
    }

    /// Opens the cache the configuration names (see [`location::resolve`]), with its size cap
    /// and build wait.
    pub fn open(config: &Config) -> Result<Cache, CacheError> {
        let location = location::resolve(&config.locations)?;
        let cache = Cache::open_root(location.root, location.origin)?;
        Ok(cache
            .with_max_bytes(config.cache_max_bytes)
            .with_build_wait(config.cache_wait_timeout)
            .with_remote(RemoteSettings::from_config(config)))
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

    /// Sets how long to wait for another process's (or thread's) build of the same entry
    /// before failing with [`CacheError::WaitTimeout`]; default [`DEFAULT_BUILD_WAIT`].
    pub fn with_build_wait(mut self, wait: Duration) -> Cache {
        self.build_wait = wait;
        self
    }

    /// Sets the remote cache consulted after a local miss and published to after a build
    /// (see [`remote`]); a cache opened with [`Cache::at`] has none.
    pub fn with_remote(mut self, remote: RemoteSettings) -> Cache {
        self.remote = remote;
        self
    }

    /// The remote cache settings.
    pub fn remote(&self) -> &RemoteSettings {
        &self.remote
    }

    fn open_root(root: PathBuf, origin: &str) -> Result<Cache, CacheError> {
        let unusable = |path: &Path, source: io::Error| CacheError::Unusable {
            path: path.to_owned(),
            origin: origin.to_owned(),
            source,
        };
        let root = std::path::absolute(&root).map_err(|e| unusable(&root, e))?;
        location::create_private_dir_all(&root).map_err(|e| unusable(&root, e))?;
        let meta = fs::symlink_metadata(&root).map_err(|e| unusable(&root, e))?;
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&root)
                .map(|t| format!(" (to {})", t.display()))
                .unwrap_or_default();
            return Err(CacheError::Unsafe {
                path: root.clone(),
                problem: format!(
                    "it is a symlink{target}; a symlinked cache root can be pointed anywhere, \
                     and `cache clear` would delete there"
                ),
                remedy: format!(
                    "set AMD_TRITON_NPU_CACHE_DIR to the real directory, or replace the link \
                     with a directory (rm '{0}' && mkdir -m 700 '{0}')",
                    root.display()
                ),
            });
        }
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
        let open_checked = |sub: &str| -> Result<OwnedFd, CacheError> {
            let path = root.join(sub);
            match fsat::open_dir_path(&path).map_err(|e| unusable(&path, e))? {
                Opened::Found(fd) => Ok(fd),
                // Replaced between the check above and this open.
                Opened::Missing | Opened::WrongType => Err(CacheError::Unsafe {
                    path: path.clone(),
                    problem: "it changed while the cache was being opened".into(),
                    remedy: inside_remedy(&path),
                }),
            }
        };
        let entries = open_checked(ENTRIES)?;
        let trash = open_checked(TRASH)?;
        // Lookups create lock files and builds create directories: fail now, with the
        // directory's name, rather than at the first kernel launch. Asking the kernel whether
        // this process may create files there (permissions, ACLs, a read-only mount) costs a
        // path lookup; creating a probe file would cost an inode on every process's first
        // launch.
        rustix::fs::accessat(
            rustix::fs::CWD,
            root.join(STAGING),
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
            rustix::fs::AtFlags::EACCESS,
        )
        .map_err(|e| unusable(&root, e.into()))?;
        Ok(Cache {
            stats: StatsFile::new(&root),
            root,
            entries,
            trash,
            max_bytes: None,
            build_wait: DEFAULT_BUILD_WAIT,
            remote: RemoteSettings::none(),
            pending: Pending::default(),
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
        self.shard_path(key).join(key.as_str())
    }

    pub(crate) fn shard_path(&self, key: &Key) -> PathBuf {
        self.root.join(ENTRIES).join(key.shard())
    }

    pub(crate) fn build_lock_path(&self, key: &Key) -> PathBuf {
        self.root.join(LOCKS).join(format!("{key}.lock"))
    }

    /// The shard directory of `key`, opened without following a symlink and checked;
    /// `None` if it does not exist yet.
    pub(crate) fn open_shard(&self, key: &Key) -> Result<Option<OwnedFd>, CacheError> {
        let path = self.shard_path(key);
        match fsat::open_dir(&self.entries, key.shard()).map_err(io_err("open", &path))? {
            Opened::Found(fd) => {
                let stat = fsat::fstat(&fd).map_err(io_err("inspect", &path))?;
                check_private_stat(&path, &stat, euid(), &path)?;
                Ok(Some(fd))
            }
            Opened::Missing => Ok(None),
            Opened::WrongType => Err(CacheError::Unsafe {
                problem: if fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink()) {
                    "it is a symlink; every directory of the cache must be a real directory, \
                     so that nothing in it can point outside"
                        .into()
                } else {
                    "it is not a directory".into()
                },
                remedy: format!(
                    "run `triton-npu cache clear --yes`, which removes it without following \
                     it, or rm '{}'",
                    path.display()
                ),
                path,
            }),
        }
    }

    /// The published entry for `inputs`, if there is a sound one. A damaged entry is moved
    /// aside (unless someone is rebuilding it right now) and reported as absent.
    pub fn lookup(&self, inputs: &Inputs) -> Result<Option<Entry>, CacheError> {
        let key = inputs.key();
        let found = match self.open_entry(&key)? {
            Lookup::Hit(entry) => Some(entry),
            Lookup::Missing => None,
            Lookup::Damaged(reason) => {
                // Only the holder of the build lock may move an entry; if someone is building
                // this key right now, leave it to them.
                match FileLock::try_acquire(&self.build_lock_path(&key))? {
                    Some(_building) => match self.open_entry(&key)? {
                        Lookup::Hit(entry) => Some(entry),
                        Lookup::Damaged(reason) => {
                            self.set_aside(&key, &inputs.label(&key), &reason);
                            None
                        }
                        Lookup::Missing => None,
                    },
                    None => {
                        tracing::debug!("cache entry {} is damaged ({reason})", key.short());
                        None
                    }
                }
            }
        };
        self.count(Counters {
            hits: u64::from(found.is_some()),
            misses: u64::from(found.is_none()),
            ..Counters::default()
        });
        Ok(found.map(|e| *e))
    }

    /// The entry for `inputs`, built by `build` if it is missing or damaged.
    ///
    /// `build` gets an empty private directory and fills it; the entry is published only if
    /// `build` returns `Ok` and its output passes sealing. Across threads and processes, one
    /// caller builds a missing key and the others wait for it (a builder that dies releases
    /// its lock, and a waiter takes over; a live builder that takes longer than the build
    /// wait makes the waiter fail with [`CacheError::WaitTimeout`]). A failing build
    /// publishes nothing; its error goes to the caller that ran it, and waiting callers then
    /// build themselves.
    pub fn get_or_build<E, F>(&self, inputs: &Inputs, build: F) -> Result<Entry, CacheError<E>>
    where
        F: FnOnce(&Path) -> Result<(), E>,
    {
        let key = inputs.key();
        if let Lookup::Hit(entry) = self.open_entry(&key).map_err(CacheError::widen)? {
            self.count(Counters {
                hits: 1,
                ..Counters::default()
            });
            return Ok(*entry);
        }

        let label = inputs.label(&key);
        let building = self.lock_build(&key, &label).map_err(CacheError::widen)?;
        // Whoever held the lock may have published the entry meanwhile.
        match self.open_entry(&key).map_err(CacheError::widen)? {
            Lookup::Hit(entry) => {
                self.count(Counters {
                    hits: 1,
                    ..Counters::default()
                });
                return Ok(*entry);
            }
            Lookup::Missing => {}
            Lookup::Damaged(reason) => self.set_aside(&key, &label, &reason),
        }
        self.remove_stale_staging(&key);

        if let Some(entry) = self.fetch_remote(&key, &label) {
            drop(building);
            self.count(Counters {
                misses: 1,
                ..Counters::default()
            });
            self.flush_counters();
            return Ok(entry);
        }
        let entry = self.build_and_publish(&key, inputs, &label, build)?;
        drop(building);
        self.count(Counters {
            misses: 1,
            ..Counters::default()
        });
        self.publish_remote(&entry, &label);
        if let Some(max) = self.max_bytes
            && let Err(e) = self.evict_to(max)
        {
            tracing::warn!("cannot evict kernel cache entries to stay under {max} bytes: {e}");
        }
        // A build took seconds; writing the counts now costs nothing in comparison.
        self.flush_counters();
        Ok(entry)
    }

    /// Takes the build lock of `key`, waiting for its holder as long as the build wait allows.
    fn lock_build(&self, key: &Key, label: &str) -> Result<FileLock, CacheError> {
        let patience = Patience {
            timeout: self.build_wait,
            announce_after: ANNOUNCE_WAIT_AFTER.min(self.build_wait / 2),
        };
        let what = format!("cache entry {label} (key {key})");
        match FileLock::acquire(&self.build_lock_path(key), patience, &what)? {
            Waited::Acquired(lock) => Ok(lock),
            Waited::TimedOut(holder) => Err(CacheError::WaitTimeout {
                label: label.to_owned(),
                holder: holder
                    .as_ref()
                    .map_or_else(|| "another process".to_owned(), ToString::to_string),
                holder_pid: holder.map(|h| h.pid),
                waited: self.build_wait,
            }),
        }
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
        let staging = self.staging_dir(key).map_err(widen)?;
        let data = staging.path().join(DATA_DIR);
        create_private_dir(&data)
            .map_err(io_err("create", &data))
            .map_err(widen)?;

        tracing::info!("building cache entry {label}");
        let started = Instant::now();
        let tools_before = npu_process::tool_time_on_this_thread();
        build(&data).map_err(|source| CacheError::Build {
            key: key.clone(),
            label: label.to_owned(),
            source,
        })?;
        let micros = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let times = BuildTimes {
            total_us: micros(started.elapsed()),
            tools_us: micros(npu_process::tool_time_on_this_thread().saturating_sub(tools_before)),
        };

        let sealed = entry::seal(&data, label).map_err(widen)?;
        let build_id = staging
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit('.').next())
            .unwrap_or_default()
            .to_owned();
        let (files, contents): (Vec<_>, Vec<_>) = sealed.into_iter().unzip();
        let mut manifest = Manifest::new(key, inputs, build_id, files);
        manifest.build = Some(times);
        let manifest_path = staging.path().join(MANIFEST_FILE);
        let text = serde_json::to_vec_pretty(&manifest).map_err(|e| {
            widen(CacheError::Io {
                action: "write",
                path: manifest_path.clone(),
                source: io::Error::other(e),
            })
        })?;
        let entry = self
            .publish(key, staging, manifest, text.into(), contents)
            .map_err(widen)?;
        tracing::debug!(
            "published cache entry {label} after {:.2?}",
            started.elapsed()
        );
        Ok(entry)
    }

    /// A fresh private staging directory for `key`; removed when dropped unless published.
    pub(crate) fn staging_dir(&self, key: &Key) -> Result<tempfile::TempDir, CacheError> {
        let staging_root = self.root.join(STAGING);
        tempfile::Builder::new()
            .prefix(&format!("{key}.{}.", std::process::id()))
            .rand_bytes(8)
            .permissions(fs::Permissions::from_mode(0o700))
            .tempdir_in(&staging_root)
            .map_err(io_err("create a staging directory in", &staging_root))
    }

    /// Writes the manifest into a filled staging directory and publishes it as the entry of
    /// `key` by one atomic rename. Called with the build lock held.
    pub(crate) fn publish(
        &self,
        key: &Key,
        staging: tempfile::TempDir,
        manifest: Manifest,
        manifest_bytes: Arc<[u8]>,
        contents: Vec<Arc<[u8]>>,
    ) -> Result<Entry, CacheError> {
        let manifest_path = staging.path().join(MANIFEST_FILE);
        let manifest_file = write_private(&manifest_path, &manifest_bytes)
            .map_err(io_err("write", &manifest_path))?;
        // Set explicitly: the file system's own clock may be too coarse to order entries
        // built in quick succession.
        if let Err(e) = manifest_file.set_modified(SystemTime::now()) {
            tracing::debug!(
                "cannot record the creation of cache entry {}: {e}",
                key.short()
            );
        }
        // Take the in-use lock before the entry becomes visible, so no eviction can remove it
        // between publishing and returning.
        manifest_file
            .lock_shared()
            .map_err(io_err("lock", &manifest_path))?;

        let shard_path = self.shard_path(key);
        create_private_dir(&shard_path).map_err(io_err("create", &shard_path))?;
        let Some(shard) = self.open_shard(key)? else {
            return Err(io_err("open", &shard_path)(io::ErrorKind::NotFound.into()));
        };
        let staged = staging.keep();
        if let Err(e) = rustix::fs::renameat(rustix::fs::CWD, &staged, &shard, key.as_str()) {
            let _ = fs::remove_dir_all(&staged);
            return Err(io_err("publish the entry at", self.entry_path(key))(
                e.into(),
            ));
        }
        Ok(Entry {
            key: key.clone(),
            data: self.entry_path(key).join(DATA_DIR),
            manifest,
            manifest_bytes,
            contents,
            _in_use: manifest_file,
        })
    }

    /// Asks the remote cache for `key` after a local miss (with the build lock held) and
    /// publishes what it has, if it verifies. Anything unusable is ignored with a warning.
    fn fetch_remote(&self, key: &Key, label: &str) -> Option<Entry> {
        let link = self.remote.for_reading()?;
        let counted = |c: Counters| {
            self.count(c);
            None
        };
        let value = match link.get(key.as_str(), self.remote.timeout) {
            Ok(Some(value)) => value,
            Ok(None) => {
                tracing::debug!("the remote kernel cache has no entry {label}");
                return counted(Counters {
                    remote_misses: 1,
                    ..Counters::default()
                });
            }
            Err(remote::CallError::GivenUp(_)) => return None,
            Err(_) => {
                return counted(Counters {
                    remote_errors: 1,
                    ..Counters::default()
                });
            }
        };
        let unusable = |reason: String| {
            tracing::warn!(
                "ignoring the remote kernel cache's value for {label}: {reason}; building it \
                 locally"
            );
            counted(Counters {
                remote_errors: 1,
                ..Counters::default()
            })
        };
        if value.len() as u64 > self.remote.max_bytes {
            return unusable(format!(
                "it has {} bytes, more than AMD_TRITON_NPU_REMOTE_CACHE_MAX_BYTES ({})",
                value.len(),
                self.remote.max_bytes
            ));
        }
        let unpacked = match remote::unpack(&value, key) {
            Ok(u) => u,
            Err(reason) => return unusable(reason),
        };
        match self.materialize(key, unpacked) {
            Ok(entry) => {
                tracing::info!("fetched cache entry {label} from the remote kernel cache");
                self.count(Counters {
                    remote_hits: 1,
                    ..Counters::default()
                });
                Some(entry)
            }
            Err(e) => unusable(format!("cannot store it locally: {e}")),
        }
    }

    /// Writes a verified remote entry into staging and publishes it unchanged.
    fn materialize(&self, key: &Key, value: remote::Unpacked) -> Result<Entry, CacheError> {
        let staging = self.staging_dir(key)?;
        let data = staging.path().join(DATA_DIR);
        create_private_dir(&data).map_err(io_err("create", &data))?;
        for (record, bytes) in value.manifest.files.iter().zip(&value.contents) {
            let path = data.join(&record.path);
            if let Some(parent) = path.parent() {
                location::create_private_dir_all(parent).map_err(io_err("create", parent))?;
            }
            let mode = if record.executable { 0o700 } else { 0o600 };
            write_private_mode(&path, bytes, mode).map_err(io_err("write", &path))?;
        }
        self.publish(
            key,
            staging,
            value.manifest,
            value.manifest_bytes,
            value.contents,
        )
    }

    /// Publishes a freshly built entry to the remote cache, unless publishing is off or the
    /// entry is larger than the cap.
    fn publish_remote(&self, entry: &Entry, label: &str) {
        let Some(link) = self.remote.for_writing() else {
            return;
        };
        let value = remote::pack(&entry.manifest_bytes, &entry.contents);
        if value.len() as u64 > self.remote.max_bytes {
            tracing::info!(
                "not publishing cache entry {label} to the remote kernel cache: {} bytes, more \
                 than AMD_TRITON_NPU_REMOTE_CACHE_MAX_BYTES ({})",
                value.len(),
                self.remote.max_bytes
            );
            return;
        }
        match link.put(entry.key.as_str(), &value, self.remote.timeout) {
            Ok(()) => {
                tracing::debug!("published cache entry {label} to the remote kernel cache");
                self.count(Counters {
                    remote_puts: 1,
                    ..Counters::default()
                });
            }
            Err(remote::CallError::GivenUp(_)) => {}
            Err(_) => self.count(Counters {
                remote_errors: 1,
                ..Counters::default()
            }),
        }
    }

    /// Opens and checks the entry: manifest, every file's type, owner, size and sha256.
    fn open_entry(&self, key: &Key) -> Result<Lookup, CacheError> {
        let Some(shard) = self.open_shard(key)? else {
            return Ok(Lookup::Missing);
        };
        Ok(
            match entry::read(shard.as_fd(), &self.shard_path(key), key, Depth::Serve)? {
                Verdict::Sound(entry) => Lookup::Hit(entry),
                Verdict::Missing => Lookup::Missing,
                Verdict::Damaged(reason) => Lookup::Damaged(reason),
            },
        )
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

    /// Renames whatever stands at the entry's place (a directory, or a file or symlink that
    /// took its place) into `trash/` (one atomic step, so nobody sees half of it) and deletes
    /// it there, never following a symlink. `Ok(false)` if there was nothing.
    pub(crate) fn move_to_trash(&self, key: &Key) -> Result<bool, CacheError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let Some(shard) = self.open_shard(key)? else {
            return Ok(false);
        };
        let trash_root = self.root.join(TRASH);
        let slot = loop {
            let name = format!(
                "{key}.{}.{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            );
            match fsat::rename_noreplace(&shard, key.as_str(), &self.trash, &name) {
                Ok(()) => break trash_root.join(name),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(io_err("move aside", self.entry_path(key))(e)),
            }
        };
        let removed = match fs::symlink_metadata(&slot) {
            Ok(m) if m.is_dir() => fs::remove_dir_all(&slot),
            _ => fs::remove_file(&slot),
        };
        if let Err(e) = removed {
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

    pub(crate) fn count(&self, delta: Counters) {
        self.pending.add(delta);
    }

    /// Adds this handle's counts to the stats file (a hit never writes; see [`crate::stats`]).
    pub fn flush_counters(&self) {
        self.pending.flush_to(&self.stats);
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.flush_counters();
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> io::Result<fs::File> {
    write_private_mode(path, bytes, 0o600)
}

fn write_private_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<fs::File> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(bytes)?;
    Ok(file)
}
