//! File-descriptor-relative access inside the cache.
//!
//! Every directory below the root is opened with `O_NOFOLLOW` relative to its already-checked
//! parent, so a symlink planted anywhere inside the cache is seen as a symlink and never
//! followed, and what is checked (with `fstat` on the open descriptor) is what is then read.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags, Stat};

/// What opening a name inside a cache directory found.
pub(crate) enum Opened<T> {
    Found(T),
    Missing,
    /// A symlink, or something of the wrong type, stands where it should be.
    WrongType,
}

fn classify<T>(result: rustix::io::Result<T>) -> io::Result<Opened<T>> {
    match result {
        Ok(v) => Ok(Opened::Found(v)),
        Err(rustix::io::Errno::NOENT) => Ok(Opened::Missing),
        // O_NOFOLLOW on a symlink gives ELOOP; O_DIRECTORY on a non-directory ENOTDIR.
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => Ok(Opened::WrongType),
        Err(e) => Err(e.into()),
    }
}

/// Opens the directory `name` inside `dir` without following a symlink.
pub(crate) fn open_dir(dir: impl AsFd, name: &str) -> io::Result<Opened<OwnedFd>> {
    classify(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ))
}

/// Opens the directory at `path` (absolute) without following a symlink at its last component.
pub(crate) fn open_dir_path(path: &std::path::Path) -> io::Result<Opened<OwnedFd>> {
    classify(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ))
}

/// Opens the file at the `/`-separated relative `path` below `dir` for reading, following no
/// symlink on the way. `O_NONBLOCK` keeps a FIFO planted in its place from blocking the open;
/// `no_atime` leaves the access time alone (listing must not count as use).
pub(crate) fn open_file(dir: impl AsFd, path: &str, no_atime: bool) -> io::Result<Opened<File>> {
    let (parents, leaf) = match path.rsplit_once('/') {
        Some((parents, leaf)) => (Some(parents), leaf),
        None => (None, path),
    };
    let mut owned: Option<OwnedFd> = None;
    if let Some(parents) = parents {
        for component in parents.split('/') {
            let next = match &owned {
                Some(fd) => open_dir(fd, component)?,
                None => open_dir(dir.as_fd(), component)?,
            };
            match next {
                Opened::Found(fd) => owned = Some(fd),
                Opened::Missing => return Ok(Opened::Missing),
                Opened::WrongType => return Ok(Opened::WrongType),
            }
        }
    }
    let mut flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    if no_atime {
        flags |= OFlags::NOATIME;
    }
    let opened = match &owned {
        Some(fd) => rustix::fs::openat(fd, leaf, flags, Mode::empty()),
        None => rustix::fs::openat(dir, leaf, flags, Mode::empty()),
    };
    Ok(match classify(opened)? {
        Opened::Found(fd) => Opened::Found(File::from(fd)),
        Opened::Missing => Opened::Missing,
        Opened::WrongType => Opened::WrongType,
    })
}

pub(crate) fn fstat(fd: impl AsFd) -> io::Result<Stat> {
    Ok(rustix::fs::fstat(fd)?)
}

pub(crate) fn is_file(stat: &Stat) -> bool {
    rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile
}

/// Reads exactly `len` bytes (the size `fstat` reported); `Ok(None)` if the file has fewer by
/// now. The caller checks these bytes, and only these are ever used. The buffer is not zeroed
/// first (`read_to_end` reads into its spare capacity); reading stops at `len` even if the
/// file has grown.
pub(crate) fn read_exact_len(file: &mut File, len: u64) -> io::Result<Option<Vec<u8>>> {
    let Ok(wanted) = usize::try_from(len) else {
        return Ok(None);
    };
    let mut bytes = Vec::with_capacity(wanted);
    file.take(len).read_to_end(&mut bytes)?;
    Ok((bytes.len() == wanted).then_some(bytes))
}

/// Renames `from` in `from_dir` to `to` in `to_dir`, failing if `to` exists.
pub(crate) fn rename_noreplace(
    from_dir: impl AsFd,
    from: &str,
    to_dir: impl AsFd,
    to: &str,
) -> io::Result<()> {
    Ok(rustix::fs::renameat_with(
        from_dir,
        from,
        to_dir,
        to,
        rustix::fs::RenameFlags::NOREPLACE,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        std::fs::write(&path, bytes).unwrap();
        let file = File::open(&path).unwrap();
        (tmp, file)
    }

    #[test]
    fn reads_exactly_the_size_it_is_told() {
        let (_tmp, mut file) = file_of(b"0123456789");
        assert_eq!(
            read_exact_len(&mut file, 10).unwrap().unwrap(),
            b"0123456789"
        );
    }

    #[test]
    fn a_file_shorter_than_told_is_reported_not_padded() {
        let (_tmp, mut file) = file_of(b"0123");
        assert_eq!(read_exact_len(&mut file, 10).unwrap(), None);
    }

    #[test]
    fn a_file_that_grew_is_read_only_up_to_the_size_told() {
        let (_tmp, mut file) = file_of(b"0123456789abcdef");
        assert_eq!(read_exact_len(&mut file, 4).unwrap().unwrap(), b"0123");
    }

    #[test]
    fn an_empty_read_is_empty() {
        let (_tmp, mut file) = file_of(b"");
        assert_eq!(read_exact_len(&mut file, 0).unwrap().unwrap(), b"");
    }
}
