//! The remote cache: kernel-cache entries shared by a team or a CI fleet.
//!
//! The remote itself is not ours: it is whatever Triton's `TRITON_REMOTE_CACHE_BACKEND`
//! names (Triton's `RedisRemoteCacheBackend`, or a user's own `RemoteCacheBackend`), reached
//! through a [`Remote`] that the Python binding installs ([`install`]). After a local miss,
//! with the build lock held, the cache asks the remote before building; after a build it
//! publishes the entry. A remote value is the **whole entry as one value** under the entry's
//! own key (see [`pack`]): the manifest exactly as stored, then every file. A fetched value is
//! used only if it is well formed, is for this key and every file matches the manifest's
//! sha256; the published local entry is then byte-identical to the builder's. Anything else
//! is ignored with a warning and the kernel is built locally.
//!
//! A remote that fails or does not answer within the timeout
//! (`AMD_TRITON_NPU_REMOTE_CACHE_TIMEOUT`, default 5 s) is not asked again by this process:
//! it costs at most one timeout. The [`Remote`] keeps the timeout itself (the Python binding
//! runs each backend call on a daemon thread of Python's and stops waiting for it): a thread of
//! ours stuck inside Python when the interpreter exits would abort the process.
//!
//! Trust: a shared cache decides what runs on every NPU that uses it, so using one means
//! trusting everyone who can write to it. Checksums protect against damage, not against a
//! writer who publishes a well-formed entry with other code. `AMD_TRITON_NPU_REMOTE_CACHE=read`
//! fetches without publishing (e.g. for pull-request CI), `off` never uses the remote.

use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use npu_target::{Config, RemoteCacheMode};
use sha2::{Digest, Sha256};

use crate::key::{Key, hex};
use crate::manifest::{self, Manifest};

/// A remote key-value store for whole entries (implemented over Triton's remote-cache
/// backend by the Python binding). Each call returns within about `timeout`, with
/// [`CallError::Timeout`] if the store has not answered by then.
pub trait Remote: Send + Sync {
    /// What the remote is, for messages and `doctor`; `None` when none is configured.
    fn describe(&self) -> Option<String>;
    /// The value stored under `key`, if any.
    fn get(&self, key: &str, timeout: Duration) -> Result<Option<Vec<u8>>, CallError>;
    /// Stores `value` under `key`.
    fn put(&self, key: &str, value: &[u8], timeout: Duration) -> Result<(), CallError>;
}

/// A remote as one process uses it: it stops asking after the first failure or timeout.
pub struct RemoteLink {
    remote: Arc<dyn Remote>,
    /// Why this process stopped asking, once it did.
    given_up: OnceLock<String>,
}

impl std::fmt::Debug for RemoteLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteLink")
            .field("given_up", &self.given_up.get())
            .finish_non_exhaustive()
    }
}

/// How one call to the remote went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// No answer within the timeout.
    Timeout(Duration),
    /// The backend raised or failed.
    Failed(String),
    /// This process gave up on the remote earlier.
    GivenUp(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Timeout(t) => write!(f, "no answer within {:.1} s", t.as_secs_f64()),
            CallError::Failed(e) => f.write_str(e),
            CallError::GivenUp(why) => write!(f, "not asked again after: {why}"),
        }
    }
}

impl RemoteLink {
    pub fn new(remote: Arc<dyn Remote>) -> Arc<RemoteLink> {
        Arc::new(RemoteLink {
            remote,
            given_up: OnceLock::new(),
        })
    }

    pub fn describe(&self) -> Option<String> {
        self.remote.describe()
    }

    /// Why this process stopped asking the remote, if it did.
    pub fn given_up(&self) -> Option<&str> {
        self.given_up.get().map(String::as_str)
    }

    pub fn get(&self, key: &str, timeout: Duration) -> Result<Option<Vec<u8>>, CallError> {
        self.call(|r| r.get(key, timeout))
    }

    pub fn put(&self, key: &str, value: &[u8], timeout: Duration) -> Result<(), CallError> {
        self.call(|r| r.put(key, value, timeout))
    }

    /// Makes one call unless this process gave up on the remote; a failure or timeout makes
    /// it give up.
    fn call<T>(&self, f: impl FnOnce(&dyn Remote) -> Result<T, CallError>) -> Result<T, CallError> {
        if let Some(why) = self.given_up.get() {
            return Err(CallError::GivenUp(why.clone()));
        }
        let outcome = f(self.remote.as_ref());
        if let Err(e) = &outcome {
            let what = self.describe().unwrap_or_else(|| "the remote cache".into());
            if self.given_up.set(format!("{what}: {e}")).is_ok() {
                tracing::warn!(
                    "remote kernel cache {what}: {e}; this process stops using it and builds \
                     locally"
                );
            }
        }
        outcome
    }
}

static INSTALLED: RwLock<Option<Arc<RemoteLink>>> = RwLock::new(None);

/// Makes `remote` the process's remote, used by caches opened from a configuration
/// ([`Cache::open`](crate::Cache::open), [`Cache::shared`](crate::Cache::shared)).
pub fn install(remote: Arc<dyn Remote>) {
    let link = RemoteLink::new(remote);
    *INSTALLED
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(link);
}

/// The process's remote, if one was installed.
pub fn installed() -> Option<Arc<RemoteLink>> {
    INSTALLED
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// How a cache uses its remote.
#[derive(Debug, Clone)]
pub struct RemoteSettings {
    pub link: Option<Arc<RemoteLink>>,
    pub mode: RemoteCacheMode,
    /// Larger entries are neither published nor taken.
    pub max_bytes: u64,
    pub timeout: Duration,
}

impl RemoteSettings {
    /// No remote.
    pub fn none() -> RemoteSettings {
        RemoteSettings {
            link: None,
            mode: RemoteCacheMode::Off,
            max_bytes: npu_target::DEFAULT_REMOTE_CACHE_MAX_BYTES,
            timeout: npu_target::DEFAULT_REMOTE_CACHE_TIMEOUT,
        }
    }

    /// The installed remote, used as the configuration says.
    pub fn from_config(config: &Config) -> RemoteSettings {
        RemoteSettings {
            link: installed(),
            mode: config.remote_cache,
            max_bytes: config.remote_cache_max_bytes,
            timeout: config.remote_cache_timeout,
        }
    }

    /// The remote to read from, if reading is on and one is configured.
    pub(crate) fn for_reading(&self) -> Option<&Arc<RemoteLink>> {
        if self.mode == RemoteCacheMode::Off {
            return None;
        }
        self.link.as_ref().filter(|l| l.describe().is_some())
    }

    /// The remote to publish to, if publishing is on and one is configured.
    pub(crate) fn for_writing(&self) -> Option<&Arc<RemoteLink>> {
        if self.mode != RemoteCacheMode::On {
            return None;
        }
        self.for_reading()
    }
}

/// The tag that starts every remote value; part of the format.
pub const VALUE_MAGIC: &[u8] = b"triton-npu-cache-entry/1\n";

/// One entry as one remote value:
///
/// ```text
/// "triton-npu-cache-entry/1\n"     the tag
/// u64-le  length of the manifest,  the manifest exactly as stored in the entry
/// the files listed in the manifest, in its order, each exactly its recorded size
/// ```
pub fn pack(manifest_bytes: &[u8], contents: &[Arc<[u8]>]) -> Vec<u8> {
    let total = VALUE_MAGIC.len()
        + 8
        + manifest_bytes.len()
        + contents.iter().map(|c| c.len()).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(VALUE_MAGIC);
    out.extend_from_slice(&(manifest_bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(manifest_bytes);
    for c in contents {
        out.extend_from_slice(c);
    }
    out
}

/// An unpacked, verified remote value.
pub(crate) struct Unpacked {
    pub manifest: Manifest,
    pub manifest_bytes: Arc<[u8]>,
    pub contents: Vec<Arc<[u8]>>,
}

/// Checks a remote value for `key` and splits it; the error says what is wrong with it.
pub(crate) fn unpack(value: &[u8], key: &Key) -> Result<Unpacked, String> {
    let rest = value
        .strip_prefix(VALUE_MAGIC)
        .ok_or("it is not a triton-npu cache entry (unknown format or version)")?;
    let (len, rest) = rest
        .split_first_chunk::<8>()
        .ok_or("it is truncated (no manifest length)")?;
    let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| "its manifest is too long")?;
    if len > rest.len() {
        return Err("it is truncated (in the manifest)".into());
    }
    let (manifest_bytes, mut rest) = rest.split_at(len);
    let manifest = manifest::parse(manifest_bytes, key)?;
    let mut contents = Vec::with_capacity(manifest.files.len());
    for record in &manifest.files {
        let size = usize::try_from(record.size).map_err(|_| "a file is too large")?;
        if size > rest.len() {
            return Err(format!("it is truncated (in {})", record.path));
        }
        let (bytes, tail) = rest.split_at(size);
        if hex(&Sha256::digest(bytes)) != record.sha256 {
            return Err(format!(
                "{} does not match its sha256 in the manifest",
                record.path
            ));
        }
        contents.push(Arc::from(bytes));
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(format!("it has {} bytes after the last file", rest.len()));
    }
    Ok(Unpacked {
        manifest,
        manifest_bytes: Arc::from(manifest_bytes),
        contents,
    })
}
