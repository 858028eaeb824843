//! `triton_npu.cache`: the kernel cache (crate `npu-cache`) for Python callers.
//!
//! Waiting for locks and checking entries happen with the GIL released; the GIL is taken
//! back only to run the caller's `build`.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use npu_cache::{Cache, CacheError, Entry, Inputs};
use npu_target::Config;
use pyo3::exceptions::{PyTimeoutError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::errors::config_error;

/// Entries handed to Python stay protected from eviction (by their shared in-use lock) while
/// they are among the most recent this many; each costs one open file.
const PINNED_ENTRIES: usize = 256;

static PINNED: Mutex<VecDeque<Entry>> = Mutex::new(VecDeque::new());

enum OpenError {
    Config(npu_target::ConfigError),
    Cache(CacheError),
}

impl From<OpenError> for PyErr {
    fn from(e: OpenError) -> PyErr {
        match e {
            OpenError::Config(e) => config_error(e),
            OpenError::Cache(e) => to_py_err(&e),
        }
    }
}

/// The cache the current configuration names (the process-wide handle).
fn current_cache(config: &Config) -> Result<Arc<Cache>, OpenError> {
    Cache::shared(config).map_err(OpenError::Cache)
}

/// The configuration, read while holding the GIL: Python threads change the environment
/// (`os.environ[...] = ...`) under the GIL, so reading it without the GIL could race.
fn current_config() -> Result<Config, OpenError> {
    Config::current().map_err(OpenError::Config)
}

/// Keeps `entry` in use; the oldest pins are released beyond [`PINNED_ENTRIES`].
fn pin(entry: Entry) {
    let mut pinned = PINNED.lock().unwrap_or_else(PoisonError::into_inner);
    pinned.retain(|e| e.dir() != entry.dir());
    pinned.push_back(entry);
    while pinned.len() > PINNED_ENTRIES {
        pinned.pop_front();
    }
}

pub(crate) fn to_py_err<B>(e: &CacheError<B>) -> PyErr
where
    CacheError<B>: std::fmt::Display,
{
    crate::errors::error_of_kind(npu_driver::error::cache_kind(e), e.to_string())
}

fn inputs_from(dict: &Bound<'_, PyDict>) -> PyResult<Inputs> {
    let mut inputs = Inputs::new();
    for (name, value) in dict.iter() {
        let name: String = name
            .cast::<PyString>()
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "cache input names must be str, got {} ({})",
                    name.repr()
                        .map_or_else(|_| "?".to_owned(), |r| r.to_string()),
                    type_name(&name)
                ))
            })?
            .to_str()?
            .to_owned();
        let bytes = if let Ok(s) = value.cast::<PyString>() {
            s.to_str()?.as_bytes().to_vec()
        } else if let Ok(b) = value.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else {
            return Err(PyTypeError::new_err(format!(
                "cache input {name:?} must be str or bytes, got {}",
                type_name(&value)
            )));
        };
        inputs.insert(name, bytes);
    }
    Ok(inputs)
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// Returns the directory of the entry for `inputs`, calling `build(path)` to fill a fresh
/// directory if there is no sound entry. An exception raised by `build` propagates unchanged
/// and publishes nothing.
#[pyfunction]
fn cache_get_or_build(
    py: Python<'_>,
    inputs: &Bound<'_, PyDict>,
    build: Py<PyAny>,
) -> PyResult<PathBuf> {
    if !build.bind(py).is_callable() {
        return Err(PyTypeError::new_err(format!(
            "build must be callable (it receives the directory to fill), got {}",
            type_name(build.bind(py))
        )));
    }
    let inputs = inputs_from(inputs)?;
    let config = current_config()?;
    let outcome = py.detach(|| -> Result<Entry, PyErr> {
        let cache = current_cache(&config)?;
        cache
            .get_or_build(&inputs, |dir| {
                Python::attach(|py| build.call1(py, (dir,)).map(drop))
            })
            .map_err(|e| match e {
                CacheError::Build { source, .. } => source,
                other => to_py_err(&other),
            })
    })?;
    let dir = outcome.dir().to_owned();
    let mut outcome = outcome;
    outcome.release_contents();
    pin(outcome);
    Ok(dir)
}

/// The cache root of the current configuration (created, private, checked).
#[pyfunction]
fn cache_dir(py: Python<'_>) -> PyResult<PathBuf> {
    let config = current_config()?;
    let cache = py.detach(|| current_cache(&config))?;
    Ok(cache.root().to_owned())
}

/// The key (64 hex digits) `cache_get_or_build` would use for `inputs`.
#[pyfunction]
fn cache_key(inputs: &Bound<'_, PyDict>) -> PyResult<String> {
    Ok(inputs_from(inputs)?.key().to_string())
}

/// The kernel cache's remote: Triton's configured remote-cache backend, reached through
/// `triton_npu.remote_cache` (taking the GIL for each call; the cache calls it from its own
/// thread, with a timeout).
struct PythonRemote;

impl PythonRemote {
    /// Calls `triton_npu.remote_cache.<name>` on this thread (the GIL taken for it); Python's
    /// `TimeoutError` means the backend did not answer in time.
    fn call<T>(
        name: &str,
        timeout: Option<std::time::Duration>,
        args: impl for<'py> FnOnce(Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>>,
        convert: impl for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
    ) -> Result<T, npu_cache::remote::CallError> {
        use npu_cache::remote::CallError;
        Python::attach(|py| {
            let run = || -> PyResult<T> {
                let module = py.import("triton_npu.remote_cache")?;
                let mut all = args(py)?;
                if let Some(t) = timeout {
                    all.push(t.as_secs_f64().into_pyobject(py)?.into_any());
                }
                let result = module
                    .getattr(name)?
                    .call1(pyo3::types::PyTuple::new(py, all)?)?;
                convert(&result)
            };
            run().map_err(|e| {
                if let (Some(t), true) = (timeout, e.is_instance_of::<PyTimeoutError>(py)) {
                    return CallError::Timeout(t);
                }
                let kind = e
                    .get_type(py)
                    .name()
                    .map_or_else(|_| "Exception".to_owned(), |n| n.to_string());
                CallError::Failed(format!("{kind}: {}", e.value(py)))
            })
        })
    }
}

impl npu_cache::Remote for PythonRemote {
    fn describe(&self) -> Option<String> {
        // Cheap when unset: no Python call at all.
        std::env::var_os("TRITON_REMOTE_CACHE_BACKEND").filter(|v| !v.is_empty())?;
        PythonRemote::call(
            "_describe",
            None,
            |_| Ok(Vec::new()),
            |r| r.extract::<Option<String>>(),
        )
        .unwrap_or_else(|e| Some(format!("TRITON_REMOTE_CACHE_BACKEND (unusable: {e})")))
    }

    fn get(
        &self,
        key: &str,
        timeout: std::time::Duration,
    ) -> Result<Option<Vec<u8>>, npu_cache::remote::CallError> {
        PythonRemote::call(
            "_get",
            Some(timeout),
            |py| Ok(vec![PyString::new(py, key).into_any()]),
            |r| {
                if r.is_none() {
                    Ok(None)
                } else {
                    Ok(Some(r.cast::<PyBytes>()?.as_bytes().to_vec()))
                }
            },
        )
    }

    fn put(
        &self,
        key: &str,
        value: &[u8],
        timeout: std::time::Duration,
    ) -> Result<(), npu_cache::remote::CallError> {
        PythonRemote::call(
            "_put",
            Some(timeout),
            |py| {
                Ok(vec![
                    PyString::new(py, key).into_any(),
                    PyBytes::new(py, value).into_any(),
                ])
            },
            |_| Ok(()),
        )
    }
}

/// Writes the hit counters the process's cache handles keep in memory (registered with
/// Python's `atexit`: process-wide handles are never dropped).
#[pyfunction]
fn cache_flush(py: Python<'_>) {
    py.detach(npu_cache::flush_shared);
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    npu_cache::remote::install(Arc::new(PythonRemote));
    let flush = wrap_pyfunction!(cache_flush, m)?;
    m.py()
        .import("atexit")?
        .call_method1("register", (&flush,))?;
    m.add_function(flush)?;
    m.add_function(wrap_pyfunction!(cache_get_or_build, m)?)?;
    m.add_function(wrap_pyfunction!(cache_dir, m)?)?;
    m.add_function(wrap_pyfunction!(cache_key, m)?)?;
    Ok(())
}
