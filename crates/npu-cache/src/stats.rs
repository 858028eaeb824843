//! Persistent hit/miss counters, shared by every process that uses one cache root.
//!
//! The file `<root>/stats` holds one `name value` line per counter and is updated in place
//! under an exclusive lock on itself. A cache hit writes nothing: each handle counts in memory
//! ([`Pending`]) and adds its counts to the file after a build (which takes seconds anyway),
//! when it is dropped, and at process exit for the process-wide handles. Counters are best
//! effort: a failure to update them is logged at debug level and never fails a lookup, and a
//! process killed outright loses the counts it had not written yet.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Local misses served by the remote cache.
    pub remote_hits: u64,
    /// Local misses the remote cache did not have (or had only in an unusable form).
    pub remote_misses: u64,
    /// Remote calls that failed or timed out, and remote values that did not verify.
    pub remote_errors: u64,
    /// Entries published to the remote cache.
    pub remote_puts: u64,
}

impl Counters {
    fn fields(&mut self) -> [(&'static str, &mut u64); 8] {
        [
            ("hits", &mut self.hits),
            ("misses", &mut self.misses),
            ("damaged", &mut self.damaged),
            ("removed", &mut self.removed),
            ("remote_hits", &mut self.remote_hits),
            ("remote_misses", &mut self.remote_misses),
            ("remote_errors", &mut self.remote_errors),
            ("remote_puts", &mut self.remote_puts),
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

    /// Adds `delta`, field by field.
    pub fn add(&mut self, mut delta: Counters) {
        for ((_, mine), (_, theirs)) in self.fields().into_iter().zip(delta.fields()) {
            *mine = mine.saturating_add(*theirs);
        }
    }

    fn is_zero(mut self) -> bool {
        self.fields().iter().all(|(_, v)| **v == 0)
    }
}

/// Counts not yet written to the stats file, kept in memory by one handle.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    slots: [AtomicU64; 8],
}

impl Pending {
    pub(crate) fn add(&self, mut delta: Counters) {
        for (slot, (_, value)) in self.slots.iter().zip(delta.fields()) {
            if *value != 0 {
                slot.fetch_add(*value, Ordering::Relaxed);
            }
        }
    }

    /// The pending counts, without taking them.
    pub(crate) fn peek(&self) -> Counters {
        let mut c = Counters::default();
        for (slot, (_, value)) in self.slots.iter().zip(c.fields()) {
            *value = slot.load(Ordering::Relaxed);
        }
        c
    }

    /// Takes the pending counts (they are zero afterwards).
    fn take(&self) -> Counters {
        let mut c = Counters::default();
        for (slot, (_, value)) in self.slots.iter().zip(c.fields()) {
            *value = slot.swap(0, Ordering::Relaxed);
        }
        c
    }

    /// Writes the pending counts to `file`.
    pub(crate) fn flush_to(&self, file: &StatsFile) {
        let delta = self.take();
        if !delta.is_zero() {
            file.add(delta);
        }
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
                removed: 3,
                ..Counters::default()
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
    fn pending_counts_reach_the_file_only_when_flushed() {
        let tmp = tempfile::tempdir().unwrap();
        let file = StatsFile::new(tmp.path());
        let pending = Pending::default();
        pending.add(Counters {
            hits: 2,
            remote_errors: 1,
            ..Counters::default()
        });
        assert!(!tmp.path().join("stats").exists(), "nothing written yet");
        assert_eq!(pending.peek().hits, 2);
        pending.flush_to(&file);
        pending.flush_to(&file);
        let stored = file.read().unwrap();
        assert_eq!((stored.hits, stored.remote_errors), (2, 1));
        assert_eq!(pending.peek(), Counters::default());
    }

    #[test]
    fn garbage_reads_as_zero() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("stats"), "hits lots\n\u{1}\nmisses 4\n").unwrap();
        let c = StatsFile::new(tmp.path()).read().unwrap();
        assert_eq!((c.hits, c.misses), (0, 4));
    }
}
