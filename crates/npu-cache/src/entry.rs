//! A published entry: checking it before it is served, and sealing a staged one.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{CacheError, io_err};
use crate::key::Key;
use crate::location::{check_private, euid, inside_remedy};
use crate::lock::FileLock;
use crate::manifest::{self, DATA_DIR, FileRecord, MANIFEST_FILE, MANIFEST_MAX_BYTES, Manifest};

/// A published, verified entry. While it is alive this process holds a shared lock on the
/// entry's in-use lock file, so no eviction or `clear` removes it.
#[derive(Debug)]
pub struct Entry {
    pub(crate) key: Key,
    pub(crate) data: PathBuf,
    pub(crate) manifest: Manifest,
    pub(crate) _in_use: FileLock,
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

    /// The path of a file the build produced (relative, `/`-separated), if the entry has it.
    pub fn file(&self, path: &str) -> Option<PathBuf> {
        self.manifest.file(path).map(|_| self.data.join(path))
    }
}

/// What reading an entry directory found.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Manifest readable, every file present with its recorded size. The manifest's file
    /// handle comes along so the caller can record the use on it.
    Sound(Manifest, File),
    Missing,
    /// Damaged: the reason, for the warning.
    Damaged(String),
}

/// Reads an entry's manifest and checks every file's presence, type, owner and size.
/// `Err` is reserved for refusals (foreign owner, writable by others) and I/O failures.
pub(crate) fn read(entry_dir: &Path, key: &Key) -> Result<Verdict, CacheError> {
    let meta = match fs::symlink_metadata(entry_dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Verdict::Missing),
        Err(e) => return Err(io_err("inspect", entry_dir)(e)),
    };
    if !meta.is_dir() {
        return Ok(Verdict::Damaged("the entry is not a directory".into()));
    }
    check_private(entry_dir, &meta, &inside_remedy(entry_dir))?;

    let manifest_path = entry_dir.join(MANIFEST_FILE);
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&manifest_path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Verdict::Damaged(format!("{MANIFEST_FILE} is missing")));
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(Verdict::Damaged(format!("{MANIFEST_FILE} is a symlink")));
        }
        Err(e) => return Err(io_err("open", &manifest_path)(e)),
    };
    let meta = file.metadata().map_err(io_err("inspect", &manifest_path))?;
    check_private(&manifest_path, &meta, &inside_remedy(entry_dir))?;
    if !meta.is_file() || meta.len() > MANIFEST_MAX_BYTES {
        return Ok(Verdict::Damaged(format!(
            "{MANIFEST_FILE} is not a regular file of sensible size"
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&mut file)
        .take(MANIFEST_MAX_BYTES)
        .read_to_end(&mut bytes)
        .map_err(io_err("read", &manifest_path))?;
    let manifest = match manifest::parse(&bytes, key) {
        Ok(m) => m,
        Err(reason) => return Ok(Verdict::Damaged(reason)),
    };

    let data = entry_dir.join(DATA_DIR);
    match fs::symlink_metadata(&data) {
        Ok(m) if m.is_dir() => check_private(&data, &m, &inside_remedy(entry_dir))?,
        Ok(_) => return Ok(Verdict::Damaged(format!("{DATA_DIR} is not a directory"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Verdict::Damaged(format!("{DATA_DIR} is missing")));
        }
        Err(e) => return Err(io_err("inspect", &data)(e)),
    }
    for record in &manifest.files {
        if let Some(reason) = check_file(entry_dir, &data, record)? {
            return Ok(Verdict::Damaged(reason));
        }
    }
    Ok(Verdict::Sound(manifest, file))
}

fn check_file(
    entry_dir: &Path,
    data: &Path,
    record: &FileRecord,
) -> Result<Option<String>, CacheError> {
    let path = data.join(&record.path);
    let shown = format!("{DATA_DIR}/{}", record.path);
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Ok(Some(format!("{shown} is missing")));
        }
        Err(e) => return Err(io_err("inspect", &path)(e)),
    };
    if !meta.is_file() {
        return Ok(Some(format!("{shown} is not a regular file")));
    }
    check_private(&path, &meta, &inside_remedy(entry_dir))?;
    if meta.len() != record.size {
        return Ok(Some(format!(
            "{shown} has {} bytes, the manifest says {}",
            meta.len(),
            record.size
        )));
    }
    Ok(None)
}

/// Checks every file's sha256 and that `data/` holds nothing the manifest does not list.
/// Returns the reason the entry is damaged, if it is.
pub(crate) fn verify_contents(
    entry_dir: &Path,
    manifest: &Manifest,
) -> Result<Option<String>, CacheError> {
    let data = entry_dir.join(DATA_DIR);
    for record in &manifest.files {
        let path = data.join(&record.path);
        let mut file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(f) => f,
            Err(e)
                if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ELOOP) =>
            {
                return Ok(Some(format!("{DATA_DIR}/{} is missing", record.path)));
            }
            Err(e) => return Err(io_err("open", &path)(e)),
        };
        let sum = manifest::sha256_of(&mut file).map_err(io_err("read", &path))?;
        if sum != record.sha256 {
            return Ok(Some(format!(
                "{DATA_DIR}/{} does not match its sha256 in the manifest",
                record.path
            )));
        }
    }
    let mut unlisted = None;
    walk(&data, &mut |rel, kind| {
        if unlisted.is_none() {
            match kind {
                Kind::Dir => {}
                Kind::File if manifest.file(rel).is_some() => {}
                Kind::File | Kind::Other => {
                    unlisted = Some(format!("{DATA_DIR}/{rel} is not listed in the manifest"));
                }
            }
        }
        Ok(())
    })
    .map_err(|e| match e {
        WalkError::Io(path, e) => io_err("read", path)(e),
        WalkError::NotUtf8(path) | WalkError::Rejected(path, _) => CacheError::Io {
            action: "read",
            path,
            source: io::Error::new(io::ErrorKind::InvalidData, "file name is not UTF-8"),
        },
    })?;
    Ok(unlisted)
}

/// Turns a finished staging `data/` directory into file records: makes everything private
/// (builds often leave group-writable files) and hashes every file. Refuses symlinks and
/// special files, which could point outside the entry.
pub(crate) fn seal(data: &Path, label: &str) -> Result<Vec<FileRecord>, CacheError> {
    fs::set_permissions(data, Permissions::from_mode(0o700)).map_err(io_err("seal", data))?;
    let mut records = Vec::new();
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
                let sha256 =
                    manifest::sha256_file(&path).map_err(|e| WalkError::Io(path.clone(), e))?;
                records.push(FileRecord {
                    path: rel.to_owned(),
                    size: meta.len(),
                    sha256,
                    executable,
                });
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
    records.sort_by(|a, b| a.path.cmp(&b.path));
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
