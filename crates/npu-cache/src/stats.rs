//! Persistent hit/miss counters, shared by every process that uses one cache root.
//!
//! The file `<root>/stats` holds one `name value` line per counter and is updated in place
//! under an exclusive lock on itself. Counters are best effort: a failure to update them is
//! logged at debug level and never fails a lookup.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The counters of one cache root.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Lookups served from the cache.
    pub hits: u64,
    /// Lookups that found nothing (and, through `get_or_build`, built the entry).
    pub misses: u64,
    /// Damaged entries found, moved aside and rebuilt.
    pub damaged: u64,
    /// Entries removed by eviction or `clear`.
    pub removed: u64,
}

impl Counters {
    fn fields(&mut self) -> [(&'static str, &mut u64); 4] {
        [
            ("hits", &mut self.hits),
            ("misses", &mut self.misses),
            ("damaged", &mut self.damaged),
            ("removed", &mut self.removed),
        ]
    }

    fn parse(text: &str) -> Counters {
        let mut c = Counters::default();
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
                continue;
            };
            for (field, slot) in c.fields() {
                if field == name {
                    *slot = value.parse().unwrap_or(0);
                }
            }
        }
        c
    }

    fn render(mut self) -> String {
        self.fields()
            .iter()
            .map(|(name, value)| format!("{name} {value}\n"))
            .collect()
    }

    fn add(&mut self, delta: Counters) {
        self.hits = self.hits.saturating_add(delta.hits);
        self.misses = self.misses.saturating_add(delta.misses);
        self.damaged = self.damaged.saturating_add(delta.damaged);
        self.removed = self.removed.saturating_add(delta.removed);
    }
}

#[derive(Debug, Clone)]
pub(crate) struct StatsFile {
    path: PathBuf,
}

impl StatsFile {
    pub(crate) fn new(root: &Path) -> StatsFile {
        StatsFile {
            path: root.join("stats"),
        }
    }

    /// Adds `delta` to the stored counters.
    pub(crate) fn add(&self, delta: Counters) {
        if let Err(e) = self.update(delta) {
            tracing::debug!(
                "cannot update cache counters in {}: {e}",
                self.path.display()
            );
        }
    }

    fn update(&self, delta: Counters) -> io::Result<()> {
        let mut file = self.open()?;
        file.lock()?;
        let mut counters = read_all(&mut file)?;
        counters.add(delta);
        file.seek(SeekFrom::Start(0))?;
        let text = counters.render();
        file.write_all(text.as_bytes())?;
        file.set_len(text.len() as u64)
    }

    /// The stored counters (zero if none were stored yet).
    pub(crate) fn read(&self) -> io::Result<Counters> {
        let mut file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Counters::default()),
            Err(e) => return Err(e),
        };
        file.lock_shared()?;
        read_all(&mut file)
    }

    fn open(&self) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)
    }
}

fn read_all(file: &mut File) -> io::Result<Counters> {
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text)?;
    Ok(Counters::parse(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_accumulate_across_handles() {
        let tmp = tempfile::tempdir().unwrap();
        let a = StatsFile::new(tmp.path());
        let b = StatsFile::new(tmp.path());
        assert_eq!(a.read().unwrap(), Counters::default());
        a.add(Counters {
            hits: 2,
            misses: 1,
            ..Counters::default()
        });
        b.add(Counters {
            hits: 1,
            damaged: 1,
            removed: 3,
            ..Counters::default()
        });
        assert_eq!(
            a.read().unwrap(),
            Counters {
                hits: 3,
                misses: 1,
                damaged: 1,
                removed: 3
            }
        );
    }

    #[test]
    fn concurrent_updates_are_not_lost() {
        let tmp = tempfile::tempdir().unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let f = StatsFile::new(tmp.path());
                    for _ in 0..50 {
                        f.add(Counters {
                            hits: 1,
                            ..Counters::default()
                        });
                    }
                });
            }
        });
        assert_eq!(StatsFile::new(tmp.path()).read().unwrap().hits, 200);
    }

    #[test]
    fn garbage_reads_as_zero() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("stats"), "hits lots\n\u{1}\nmisses 4\n").unwrap();
        let c = StatsFile::new(tmp.path()).read().unwrap();
        assert_eq!((c.hits, c.misses), (0, 4));
    }
}
