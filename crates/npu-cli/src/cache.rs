//! `triton-npu cache`: list, verify and clear the kernel cache.

use std::time::{Duration, SystemTime};

use npu_cache::{Cache, EntryInfo};

#[derive(Debug, clap::Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    pub command: CacheCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum CacheCommand {
    /// List the entries: key, kernel, size, age and time since last use.
    Ls,
    /// Show the number of entries, their size and the hit/miss counters.
    Stats,
    /// Check every file of every entry against its sha256; exit 1 if any entry is damaged.
    Verify,
    /// Remove entries (all, or those unused for longer than --older-than); with --failed, the
    /// kept logs of failed compiles instead.
    Clear(ClearArgs),
    /// List the kept logs of failed compiles (`<cache>/failed/`).
    Failed,
}

#[derive(Debug, clap::Args)]
pub struct ClearArgs {
    /// Remove only entries not used for this long: a number and a unit, e.g. 30s, 10m, 2h, 7d.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Really remove them (nothing is removed without it).
    #[arg(long)]
    pub yes: bool,
    /// Remove the kept logs of failed compiles rather than entries.
    #[arg(long)]
    pub failed: bool,
}

/// Runs a `cache` subcommand; returns the exit code (0 ok, 1 failure or damage, 2 refused).
pub fn run(args: &CacheArgs) -> u8 {
    let cache = match open() {
        Ok(c) => c,
        Err(message) => {
            eprintln!("triton-npu cache: {message}");
            return 1;
        }
    };
    let outcome = match &args.command {
        CacheCommand::Ls => ls(&cache),
        CacheCommand::Stats => stats(&cache),
        CacheCommand::Verify => verify(&cache),
        CacheCommand::Clear(clear_args) if clear_args.failed => clear_failed(&cache, clear_args),
        CacheCommand::Clear(clear_args) => clear(&cache, clear_args),
        CacheCommand::Failed => failed(&cache),
    };
    outcome.unwrap_or_else(|e| {
        eprintln!("triton-npu cache: {e}");
        1
    })
}

fn open() -> Result<Cache, String> {
    let config = npu_target::Config::current().map_err(|e| e.to_string())?;
    Cache::open(&config).map_err(|e| e.to_string())
}

fn ls(cache: &Cache) -> Result<u8, npu_cache::CacheError> {
    let entries = cache.list()?;
    let now = SystemTime::now();
    println!(
        "{:<64}  {:<24}  {:>10}  {:>6}  {:>6}",
        "KEY", "KERNEL", "SIZE", "AGE", "USED"
    );
    for info in &entries {
        println!(
            "{:<64}  {:<24}  {:>10}  {:>6}  {:>6}",
            info.key,
            kernel_column(info),
            human_bytes(info.bytes),
            info.created().map_or("?".to_owned(), |t| human_age(now, t)),
            human_age(now, info.last_used),
        );
    }
    eprintln!(
        "{} entries, {} in {}",
        entries.len(),
        human_bytes(entries.iter().map(|e| e.bytes).sum()),
        cache.root().display()
    );
    Ok(0)
}

fn kernel_column(info: &EntryInfo) -> String {
    match &info.manifest {
        Ok(m) => m.kernel_name().unwrap_or("-").to_owned(),
        Err(reason) => format!("(damaged: {reason})"),
    }
}

fn stats(cache: &Cache) -> Result<u8, npu_cache::CacheError> {
    let s = cache.stats()?;
    println!("cache:    {}", s.root.display());
    println!("entries:  {}", s.entries);
    let limit = match s.max_bytes {
        Some(max) => format!("limit {}", human_bytes(max)),
        None => "no limit; AMD_TRITON_NPU_CACHE_MAX_BYTES sets one".to_owned(),
    };
    println!("size:     {} ({limit})", human_bytes(s.bytes));
    println!("hits:     {}", s.counters.hits);
    println!("misses:   {}", s.counters.misses);
    println!(
        "damaged:  {} (found, moved aside and rebuilt)",
        s.counters.damaged
    );
    println!("removed:  {} (evicted or cleared)", s.counters.removed);
    println!(
        "remote:   {} hits, {} misses, {} errors, {} published",
        s.counters.remote_hits,
        s.counters.remote_misses,
        s.counters.remote_errors,
        s.counters.remote_puts
    );
    println!("(counters are stored in the cache and shared by every process that uses it)");
    Ok(0)
}

fn verify(cache: &Cache) -> Result<u8, npu_cache::CacheError> {
    let results = cache.verify_all()?;
    let bad: Vec<_> = results.iter().filter(|r| r.problem.is_some()).collect();
    if bad.is_empty() {
        println!("verified {} entries: all sound", results.len());
        return Ok(0);
    }
    println!("{} of {} entries are damaged:", bad.len(), results.len());
    for r in &bad {
        println!("  {}: {}", r.key, r.problem.as_deref().unwrap_or_default());
    }
    println!(
        "damaged entries are never used: each is rebuilt the next time its kernel is \
         launched; `triton-npu cache clear --yes` removes everything now"
    );
    Ok(1)
}

fn clear(cache: &Cache, args: &ClearArgs) -> Result<u8, npu_cache::CacheError> {
    let what = match args.older_than {
        Some(d) => format!("entries unused for more than {}", human_duration(d)),
        None => "all entries".to_owned(),
    };
    if !args.yes {
        let now = SystemTime::now();
        let matching: Vec<_> = cache
            .list()?
            .into_iter()
            .filter(|i| {
                args.older_than
                    .is_none_or(|d| now.duration_since(i.last_used).unwrap_or_default() >= d)
            })
            .collect();
        eprintln!(
            "triton-npu cache clear: refusing to remove {what} ({} entries, {}) from {} \
             without --yes",
            matching.len(),
            human_bytes(matching.iter().map(|i| i.bytes).sum()),
            cache.root().display()
        );
        return Ok(2);
    }
    let report = cache.clear(args.older_than)?;
    for stray in &report.strays {
        println!(
            "removed {}, a symlink or file where a cache directory should be (not followed)",
            stray.display()
        );
    }
    println!(
        "removed {} entries ({}) from {}",
        report.removed.len(),
        human_bytes(report.freed_bytes),
        cache.root().display()
    );
    if !report.in_use.is_empty() {
        println!(
            "kept {} entries in use by running processes",
            report.in_use.len()
        );
    }
    Ok(0)
}

fn failed(cache: &Cache) -> Result<u8, npu_cache::CacheError> {
    let failed = cache.failed_compiles()?;
    let now = SystemTime::now();
    for f in &failed {
        println!(
            "{}  {:<24}  {:>6} ago  {}",
            f.path.display(),
            f.kernel,
            human_age(now, f.when),
            f.files.join(" ")
        );
    }
    eprintln!(
        "{} failed compiles kept in {} (`triton-npu cache clear --failed --yes` removes them)",
        failed.len(),
        cache.root().join("failed").display()
    );
    Ok(0)
}

fn clear_failed(cache: &Cache, args: &ClearArgs) -> Result<u8, npu_cache::CacheError> {
    if !args.yes {
        let count = cache.failed_compiles()?.len();
        eprintln!(
            "triton-npu cache clear --failed: refusing to remove the logs of {count} failed \
             compiles without --yes"
        );
        return Ok(2);
    }
    let removed = cache.clear_failed(args.older_than)?;
    println!(
        "removed the logs of {} failed compiles from {}",
        removed.len(),
        cache.root().join("failed").display()
    );
    Ok(0)
}

/// Parses `30s`, `10m`, `2h`, `7d`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || {
        format!(
            "invalid duration {text:?}: expected a whole number followed by s, m, h or d \
             (e.g. 30s, 10m, 2h, 7d)"
        )
    };
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(invalid)?;
    let (number, unit) = t.split_at(split);
    let n: u64 = number.parse().map_err(|_| invalid())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(invalid()),
    };
    n.checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(invalid)
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn human_age(now: SystemTime, then: SystemTime) -> String {
    human_duration(now.duration_since(then).unwrap_or_default())
}

fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in [
            "",
            "7",
            "d",
            "1.5h",
            "-1d",
            "2w",
            "3 d",
            "99999999999999999999d",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("e.g. 30s, 10m, 2h, 7d"), "{bad}: {err}");
        }
    }

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 << 30), "5.0 GiB");
        assert_eq!(human_duration(Duration::from_secs(59)), "59s");
        assert_eq!(human_duration(Duration::from_secs(61)), "1m");
        assert_eq!(human_duration(Duration::from_secs(7200)), "2h");
        assert_eq!(human_duration(Duration::from_secs(3 * 86_400 + 5)), "3d");
    }
}
