//! The remote cache, through an in-memory store standing in for Triton's remote backend (the
//! Python tests run the same paths against a real Redis).

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use npu_cache::remote::{CallError, VALUE_MAGIC, pack};
use npu_cache::{Cache, Inputs, Remote, RemoteLink, RemoteSettings};
use npu_target::RemoteCacheMode;

/// A key-value store with call counters; `delay` makes every call slow, `fail` makes it fail.
#[derive(Default)]
struct Store {
    values: Mutex<HashMap<String, Vec<u8>>>,
    gets: AtomicUsize,
    puts: AtomicUsize,
    delay: Option<Duration>,
    fail: bool,
}

impl Remote for Store {
    fn describe(&self) -> Option<String> {
        Some("in-memory test store".into())
    }
    fn get(&self, key: &str, timeout: Duration) -> Result<Option<Vec<u8>>, CallError> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        if let Some(d) = self.delay {
            // A store that keeps its timeout: it stops waiting for its slow answer.
            std::thread::sleep(d.min(timeout));
            if d > timeout {
                return Err(CallError::Timeout(timeout));
            }
        }
        if self.fail {
            return Err(CallError::Failed(
                "ConnectionError: Error 111 connecting to 127.0.0.1:1".into(),
            ));
        }
        Ok(self.values.lock().unwrap().get(key).cloned())
    }
    fn put(&self, key: &str, value: &[u8], _timeout: Duration) -> Result<(), CallError> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err(CallError::Failed("ConnectionError".into()));
        }
        self.values
            .lock()
            .unwrap()
            .insert(key.to_owned(), value.to_vec());
        Ok(())
    }
}

fn settings(store: &Arc<Store>, mode: RemoteCacheMode) -> RemoteSettings {
    RemoteSettings {
        link: Some(RemoteLink::new(Arc::clone(store) as Arc<dyn Remote>)),
        mode,
        max_bytes: 1 << 20,
        timeout: Duration::from_millis(300),
    }
}

fn inputs(name: &str) -> Inputs {
    Inputs::new().text("kernel_name", name)
}

fn build(runs: &AtomicUsize) -> impl FnOnce(&Path) -> std::io::Result<()> + '_ {
    move |dir| {
        runs.fetch_add(1, Ordering::SeqCst);
        fs::write(dir.join("aie.elf"), vec![5u8; 3000])?;
        fs::create_dir(dir.join("sub"))?;
        fs::write(dir.join("sub/insts.bin"), [1u8, 2, 3, 4])
    }
}

fn cache(root: &Path, remote: RemoteSettings) -> Cache {
    Cache::at(root).unwrap().with_remote(remote)
}

#[test]
fn a_second_cache_gets_the_entry_built_by_the_first_without_building() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let runs = AtomicUsize::new(0);
    let a = cache(&tmp.path().join("a"), settings(&store, RemoteCacheMode::On));
    let built = a.get_or_build(&inputs("k"), build(&runs)).unwrap();
    assert_eq!(store.puts.load(Ordering::SeqCst), 1);

    let b = cache(&tmp.path().join("b"), settings(&store, RemoteCacheMode::On));
    let fetched = b.get_or_build(&inputs("k"), build(&runs)).unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the second cache built nothing"
    );
    assert_eq!(fetched.manifest_bytes(), built.manifest_bytes());
    for file in ["aie.elf", "sub/insts.bin"] {
        assert_eq!(fetched.bytes(file), built.bytes(file));
        assert_eq!(
            fs::read(fetched.file(file).unwrap()).unwrap(),
            fs::read(built.file(file).unwrap()).unwrap()
        );
    }
    drop(fetched);
    // Published locally: the next lookup is a local hit, the remote is not asked again.
    let gets = store.gets.load(Ordering::SeqCst);
    assert!(b.lookup(&inputs("k")).unwrap().is_some());
    assert_eq!(store.gets.load(Ordering::SeqCst), gets);
    assert_eq!(b.verify_all().unwrap()[0].problem, None);
    let counters = b.stats().unwrap().counters;
    assert_eq!((counters.remote_hits, counters.remote_errors), (1, 0));
    assert_eq!(a.stats().unwrap().counters.remote_puts, 1);
}

/// Damages the value stored for `name` and checks that another cache ignores it (with a
/// remote error counted) and builds locally.
fn ignored_after(damage: impl FnOnce(&mut Vec<u8>)) {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let runs = AtomicUsize::new(0);
    let a = cache(
        &tmp.path().join("a"),
        settings(&store, RemoteCacheMode::Read),
    );
    let built = a.get_or_build(&inputs("k"), build(&runs)).unwrap();
    let key = inputs("k").key().to_string();
    let mut value = pack(
        built.manifest_bytes(),
        &[
            built.bytes("aie.elf").unwrap(),
            built.bytes("sub/insts.bin").unwrap(),
        ],
    );
    damage(&mut value);
    store.values.lock().unwrap().insert(key, value);

    let b = cache(
        &tmp.path().join("b"),
        settings(&store, RemoteCacheMode::Read),
    );
    let entry = b.get_or_build(&inputs("k"), build(&runs)).unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2, "built locally");
    assert_eq!(entry.bytes("aie.elf"), built.bytes("aie.elf"));
    let counters = b.stats().unwrap().counters;
    assert_eq!((counters.remote_hits, counters.remote_errors), (0, 1));
    assert_eq!(
        store.puts.load(Ordering::SeqCst),
        0,
        "read mode publishes nothing"
    );
}

#[test]
fn a_corrupt_value_is_ignored() {
    ignored_after(|v| {
        let last = v.len() - 10;
        v[last] ^= 0x40;
    });
}

#[test]
fn a_truncated_value_is_ignored() {
    ignored_after(|v| v.truncate(v.len() - 1));
}

#[test]
fn a_value_with_trailing_bytes_is_ignored() {
    ignored_after(|v| v.extend_from_slice(b"extra"));
}

#[test]
fn a_foreign_value_is_ignored() {
    ignored_after(|v| {
        v.clear();
        v.extend_from_slice(b"\x80\x04\x95 a pickled Triton file, not an entry");
    });
}

#[test]
fn a_value_for_another_key_is_ignored() {
    ignored_after(|v| {
        // Same shape, another key in the manifest: replace the key text.
        let text = String::from_utf8_lossy(v).into_owned();
        let key = inputs("k").key().to_string();
        let other = inputs("other").key().to_string();
        *v = text.replace(&key, &other).into_bytes();
        assert!(v.starts_with(VALUE_MAGIC));
    });
}

#[test]
fn oversized_entries_are_neither_published_nor_taken() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let runs = AtomicUsize::new(0);
    let small = |s: &Arc<Store>| RemoteSettings {
        max_bytes: 1000,
        ..settings(s, RemoteCacheMode::On)
    };
    let a = cache(&tmp.path().join("a"), small(&store));
    let built = a.get_or_build(&inputs("k"), build(&runs)).unwrap();
    assert_eq!(
        store.puts.load(Ordering::SeqCst),
        0,
        "3 KiB > 1000 bytes: not published"
    );
    // Someone with a larger cap published it; this cache does not take it.
    let value = pack(
        built.manifest_bytes(),
        &[
            built.bytes("aie.elf").unwrap(),
            built.bytes("sub/insts.bin").unwrap(),
        ],
    );
    store
        .values
        .lock()
        .unwrap()
        .insert(inputs("k").key().to_string(), value);
    let b = cache(&tmp.path().join("b"), small(&store));
    b.get_or_build(&inputs("k"), build(&runs)).unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(b.stats().unwrap().counters.remote_errors, 1);
}

#[test]
fn off_never_asks() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let runs = AtomicUsize::new(0);
    let a = cache(tmp.path(), settings(&store, RemoteCacheMode::Off));
    a.get_or_build(&inputs("k"), build(&runs)).unwrap();
    assert_eq!(store.gets.load(Ordering::SeqCst), 0);
    assert_eq!(store.puts.load(Ordering::SeqCst), 0);
}

#[test]
fn a_slow_remote_costs_one_timeout_then_is_not_asked_again() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(Store {
        delay: Some(Duration::from_secs(30)),
        ..Store::default()
    });
    let runs = AtomicUsize::new(0);
    let c = cache(tmp.path(), settings(&store, RemoteCacheMode::On));
    let started = Instant::now();
    c.get_or_build(&inputs("a"), build(&runs)).unwrap();
    c.get_or_build(&inputs("b"), build(&runs)).unwrap();
    c.get_or_build(&inputs("c"), build(&runs)).unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(10), "one timeout only: {took:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(store.gets.load(Ordering::SeqCst), 1, "asked once");
    assert_eq!(store.puts.load(Ordering::SeqCst), 0);
    let link = c.remote().link.as_ref().unwrap();
    assert!(link.given_up().unwrap().contains("no answer within 0.3 s"));
    assert_eq!(c.stats().unwrap().counters.remote_errors, 1);
}

#[test]
fn a_failing_remote_is_asked_once() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(Store {
        fail: true,
        ..Store::default()
    });
    let runs = AtomicUsize::new(0);
    let c = cache(tmp.path(), settings(&store, RemoteCacheMode::On));
    for name in ["a", "b"] {
        c.get_or_build(&inputs(name), build(&runs)).unwrap();
    }
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        store.gets.load(Ordering::SeqCst) + store.puts.load(Ordering::SeqCst),
        1
    );
    assert!(
        c.remote()
            .link
            .as_ref()
            .unwrap()
            .given_up()
            .unwrap()
            .contains("Error 111")
    );
}
