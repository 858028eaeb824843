//! A published entry: checking it before it is served, and sealing a staged one.
//!
//! An entry is read through file descriptors (see [`fsat`](crate::fsat)): the manifest is
//! parsed from the same open file that is then held, under a shared lock, for as long as the
//! [`Entry`] lives, and every file's bytes are read once, checked against the manifest's
//! sha256 and handed to the caller. What the caller loads is what was checked.

use std::fs::{self, File, Permissions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::error::{CacheError, io_err};
use crate::fsat::{self, Opened};
use crate::key::{Key, hex};
use crate::location::{check_private_stat, euid};
use crate::manifest::{self, DATA_DIR, FileRecord, MANIFEST_FILE, MANIFEST_MAX_BYTES, Manifest};

/// A published, verified entry: its manifest and the verified bytes of its files. While it
/// is alive this process holds a shared lock on the entry's manifest, so no eviction or
/// `clear` removes the entry.
#[derive(Debug)]
pub struct Entry {
    pub(crate) key: Key,
    pub(crate) data: PathBuf,
    pub(crate) manifest: Manifest,
    /// The manifest as stored (what the remote cache publishes).
    pub(crate) manifest_bytes: Arc<[u8]>,
    /// The bytes of `manifest.files`, in the same order; empty after `release_contents`.
    pub(crate) contents: Vec<Arc<[u8]>>,
    /// The manifest, open and share-locked.
    pub(crate) _in_use: File,
}

impl Entry {
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The directory holding the files the build produced.
    pub fn dir(&self) -> &Path {
        &self.data
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The manifest exactly as stored in the entry (the bytes that were parsed).
    pub fn manifest_bytes(&self) -> &[u8] {
        &self.manifest_bytes
    }

    /// The path of a file the build produced (relative, `/`-separated), if the entry has it.
    /// For consumers that only take paths; [`Entry::bytes`] gives the checked bytes.
    pub fn file(&self, path: &str) -> Option<PathBuf> {
        self.manifest.file(path).map(|_| self.data.join(path))
    }

    /// The bytes of a file the build produced, exactly as they were checked against the
    /// manifest's sha256 when this entry was served. `None` if the entry has no such file or
    /// its contents were released.
    pub fn bytes(&self, path: &str) -> Option<Arc<[u8]>> {
        let index = self.manifest.files.iter().position(|f| f.path == path)?;
        self.contents.get(index).cloned()
    }

    /// Frees the file contents held in memory, keeping the entry in use (protected from
    /// eviction). For holders that keep an entry long after loading it.
    pub fn release_contents(&mut self) {
        self.contents = Vec::new();
    }
}

/// What reading an entry directory found.
#[derive(Debug)]
pub(crate) enum Verdict {
    Sound(Box<Entry>),
    Missing,
    /// Damaged: the reason, for the warning.
    Damaged(String),
}

/// How thoroughly to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    /// A lookup: everything the caller will use is checked (manifest, every listed file's
    /// type, owner, size and sha256).
    Serve,
    /// `verify`: also that `data/` holds nothing the manifest does not list, and without
    /// touching access times.
    Audit,
}

/// Reads and checks the entry `key` inside the shard directory `shard` (whose path is
/// `shard_path`). `Err` is reserved for refusals (foreign owner, writable by others) and I/O
/// failures.
pub(crate) fn read(
    shard: BorrowedFd<'_>,
    shard_path: &Path,
    key: &Key,
    depth: Depth,
) -> Result<Verdict, CacheError> {
    let entry_dir = shard_path.join(key.as_str());
    let dir = match fsat::open_dir(shard, key.as_str()).map_err(io_err("open", &entry_dir))? {
        Opened::Found(fd) => fd,
        Opened::Missing => return Ok(Verdict::Missing),
        Opened::WrongType => {
            return Ok(Verdict::Damaged(
                "a file or symlink stands where the entry directory should be".into(),
            ));
        }
    };
    let stat = fsat::fstat(&dir).map_err(io_err("inspect", &entry_dir))?;
    let me = euid();
    check_private_stat(&entry_dir, &stat, me, &entry_dir)?;

    let manifest_path = entry_dir.join(MANIFEST_FILE);
    let no_atime = depth == Depth::Audit;
    let mut file = match fsat::open_file(&dir, MANIFEST_FILE, no_atime)
        .map_err(io_err("open", &manifest_path))?
    {
        Opened::Found(f) => f,
        Opened::Missing => return Ok(Verdict::Damaged(format!("{MANIFEST_FILE} is missing"))),
        Opened::WrongType => return Ok(Verdict::Damaged(format!("{MANIFEST_FILE} is a symlink"))),
    };
    // The in-use lock. A remover holds it exclusively while it unlinks the manifest and moves
    // the entry away; once we get it, a manifest without links means the entry is gone.
    file.lock_shared().map_err(io_err("lock", &manifest_path))?;
    let stat = fsat::fstat(&file).map_err(io_err("inspect", &manifest_path))?;
    if stat.st_nlink == 0 {
        return Ok(Verdict::Missing);
    }
    check_private_stat(&manifest_path, &stat, me, &entry_dir)?;
    if !fsat::is_file(&stat) || stat.st_size as u64 > MANIFEST_MAX_BYTES {
        return Ok(Verdict::Damaged(format!(
            "{MANIFEST_FILE} is not a regular file of sensible size"
        )));
    }
    let Some(manifest_bytes) = fsat::read_exact_len(&mut file, stat.st_size as u64)
        .map_err(io_err("read", &manifest_path))?
    else {
        return Ok(Verdict::Damaged(format!(
            "{MANIFEST_FILE} shrank while being read"
        )));
    };
    let manifest = match manifest::parse(&manifest_bytes, key) {
        Ok(m) => m,
        Err(reason) => return Ok(Verdict::Damaged(reason)),
    };

    let data_path = entry_dir.join(DATA_DIR);
    let data = match fsat::open_dir(&dir, DATA_DIR).map_err(io_err("open", &data_path))? {
        Opened::Found(fd) => fd,
        Opened::Missing => return Ok(Verdict::Damaged(format!("{DATA_DIR} is missing"))),
        Opened::WrongType => {
            return Ok(Verdict::Damaged(format!("{DATA_DIR} is not a directory")));
        }
    };
    let stat = fsat::fstat(&data).map_err(io_err("inspect", &data_path))?;
    check_private_stat(&data_path, &stat, me, &entry_dir)?;

    let mut contents = Vec::with_capacity(manifest.files.len());
    for record in &manifest.files {
        match read_file(&data, &data_path, &entry_dir, record, no_atime, me)? {
            Ok(bytes) => contents.push(bytes),
            Err(reason) => return Ok(Verdict::Damaged(reason)),
        }
    }
    if depth == Depth::Audit
        && let Some(reason) = unlisted(&data, &data_path, &manifest)?
    {
        return Ok(Verdict::Damaged(reason));
    }
    Ok(Verdict::Sound(Box::new(Entry {
        key: key.clone(),
        data: data_path,
        manifest,
        manifest_bytes: Arc::from(manifest_bytes),
        contents,
        _in_use: file,
    })))
}

/// One listed file's bytes, checked; the inner `Err` says why the entry is damaged.
fn read_file(
    data: &OwnedFd,
    data_path: &Path,
    entry_dir: &Path,
    record: &FileRecord,
    no_atime: bool,
    me: u32,
) -> Result<Result<Arc<[u8]>, String>, CacheError> {
    let path = data_path.join(&record.path);
    // The file's name in a reason is written out only when something is wrong.
    let shown = || format!("{DATA_DIR}/{}", record.path);
    let mut file =
        match fsat::open_file(data, &record.path, no_atime).map_err(io_err("open", &path))? {
            Opened::Found(f) => f,
            Opened::Missing => return Ok(Err(format!("{} is missing", shown()))),
            Opened::WrongType => return Ok(Err(format!("{} is not a regular file", shown()))),
        };
    let stat = fsat::fstat(&file).map_err(io_err("inspect", &path))?;
    if !fsat::is_file(&stat) {
        return Ok(Err(format!("{} is not a regular file", shown())));
    }
    check_private_stat(&path, &stat, me, entry_dir)?;
    if stat.st_size as u64 != record.size {
        return Ok(Err(format!(
            "{} has {} bytes, the manifest says {}",
            shown(),
            stat.st_size,
            record.size
        )));
    }
    let Some(bytes) =
        fsat::read_exact_len(&mut file, record.size).map_err(io_err("read", &path))?
    else {
        return Ok(Err(format!("{} shrank while being read", shown())));
    };
    if hex(&Sha256::digest(&bytes)) != record.sha256 {
        return Ok(Err(format!(
            "{} does not match its sha256 in the manifest",
            shown()
        )));
    }
    Ok(Ok(Arc::from(bytes)))
}

/// The first thing under `data/` that the manifest does not list, if any.
fn unlisted(
    data: &OwnedFd,
    data_path: &Path,
    manifest: &Manifest,
) -> Result<Option<String>, CacheError> {
    fn visit(dir: BorrowedFd<'_>, rel: &str, manifest: &Manifest) -> io::Result<Option<String>> {
        let mut names = Vec::new();
        for item in rustix::fs::Dir::read_from(dir)? {
            let item = item?;
            let name = item.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                names.push((name, item.file_type()));
            }
        }
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in names {
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            match kind {
                rustix::fs::FileType::Directory => {
                    let Opened::Found(sub) = fsat::open_dir(dir, name.as_str())? else {
                        return Ok(Some(format!("{DATA_DIR}/{path} changed while being read")));
                    };
                    if let Some(found) = visit(sub.as_fd(), &path, manifest)? {
                        return Ok(Some(found));
                    }
                }
                rustix::fs::FileType::RegularFile if manifest.file(&path).is_some() => {}
                _ => {
                    return Ok(Some(format!(
                        "{DATA_DIR}/{path} is not listed in the manifest"
                    )));
                }
            }
        }
        Ok(None)
    }
    visit(data.as_fd(), "", manifest).map_err(io_err("list", data_path))
}

/// A sealed build output: its file records (in path order) and their bytes (same order).
pub(crate) type Sealed = Vec<(FileRecord, Arc<[u8]>)>;

/// Turns a finished staging `data/` directory into file records: makes everything private
/// (builds often leave group-writable files), reads and hashes every file. Refuses symlinks
/// and special files, which could point outside the entry.
pub(crate) fn seal(data: &Path, label: &str) -> Result<Sealed, CacheError> {
    fs::set_permissions(data, Permissions::from_mode(0o700)).map_err(io_err("seal", data))?;
    let mut records: Sealed = Vec::new();
    walk(data, &mut |rel, kind| {
        let path = data.join(rel);
        match kind {
            Kind::Dir => fs::set_permissions(&path, Permissions::from_mode(0o700))
                .map_err(|e| WalkError::Io(path.clone(), e)),
            Kind::Other => Err(WalkError::Rejected(
                path,
                "is a symlink or a special file".to_owned(),
            )),
            Kind::File => {
                let meta =
                    fs::symlink_metadata(&path).map_err(|e| WalkError::Io(path.clone(), e))?;
                if meta.uid() != euid() {
                    return Err(WalkError::Rejected(
                        path,
                        format!(
                            "is owned by uid {}, not by you (uid {})",
                            meta.uid(),
                            euid()
                        ),
                    ));
                }
                let executable = meta.permissions().mode() & 0o111 != 0;
                let mode = if executable { 0o700 } else { 0o600 };
                fs::set_permissions(&path, Permissions::from_mode(mode))
                    .map_err(|e| WalkError::Io(path.clone(), e))?;
                let bytes = fs::read(&path).map_err(|e| WalkError::Io(path.clone(), e))?;
                records.push((
                    FileRecord {
                        path: rel.to_owned(),
                        size: bytes.len() as u64,
                        sha256: hex(&Sha256::digest(&bytes)),
                        executable,
                    },
                    Arc::from(bytes),
                ));
                Ok(())
            }
        }
    })
    .map_err(|e| match e {
        WalkError::Io(path, source) => CacheError::Io {
            action: "seal build output",
            path,
            source,
        },
        WalkError::NotUtf8(path) => CacheError::BadOutput {
            label: label.to_owned(),
            path,
            problem: "has a name that is not UTF-8".to_owned(),
        },
        WalkError::Rejected(path, problem) => CacheError::BadOutput {
            label: label.to_owned(),
            path,
            problem,
        },
    })?;
    records.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    Ok(records)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Other,
}

#[derive(Debug)]
enum WalkError {
    Io(PathBuf, io::Error),
    NotUtf8(PathBuf),
    Rejected(PathBuf, String),
}

/// Visits everything under `root` (not following symlinks), parents before children, with
/// `/`-separated paths relative to `root`.
fn walk(
    root: &Path,
    visit: &mut dyn FnMut(&str, Kind) -> Result<(), WalkError>,
) -> Result<(), WalkError> {
    fn inner(
        root: &Path,
        rel: &str,
        visit: &mut dyn FnMut(&str, Kind) -> Result<(), WalkError>,
    ) -> Result<(), WalkError> {
        let dir = if rel.is_empty() {
            root.to_owned()
        } else {
            root.join(rel)
        };
        let mut children = Vec::new();
        for item in fs::read_dir(&dir).map_err(|e| WalkError::Io(dir.clone(), e))? {
            let item = item.map_err(|e| WalkError::Io(dir.clone(), e))?;
            let name = item
                .file_name()
                .into_string()
                .map_err(|_| WalkError::NotUtf8(item.path()))?;
            let ty = item
                .file_type()
                .map_err(|e| WalkError::Io(item.path(), e))?;
            children.push((name, ty));
        }
        children.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, ty) in children {
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let kind = if ty.is_dir() {
                Kind::Dir
            } else if ty.is_file() {
                Kind::File
            } else {
                Kind::Other
            };
            visit(&child, kind)?;
            if kind == Kind::Dir {
                inner(root, &child, visit)?;
            }
        }
        Ok(())
    }
    inner(root, "", visit)
}

/// The bytes an entry directory takes (regular files only, symlinks not followed).
pub(crate) fn disk_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let _ = walk(dir, &mut |rel, kind| {
        if kind == Kind::File
            && let Ok(m) = fs::symlink_metadata(dir.join(rel))
        {
            total += m.len();
        }
        Ok(())
    });
    total
}
