//! Kernels prepared in this process, shared by every launcher of the same kernel.
//!
//! Triton builds a launcher per compiled kernel and may build several for one kernel, so the
//! process keeps what [`prepare`](crate::prepare) returned under its whole input — the request
//! and the configuration it ran with — and a second launcher of the same kernel finds it. A
//! compile-only result is never kept: once compile-only is off, the next launch must load and
//! dispatch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use npu_target::Config;

use crate::error::DriverError;
use crate::kernel::{KernelRequest, Prepared, prepare};
use crate::runtimes::Host;

type Key = (KernelRequest, Config);

static PREPARED: Mutex<Option<HashMap<Key, Arc<Prepared>>>> = Mutex::new(None);

/// The kernel prepared for `(config, req)`, preparing it on first use (outside the table's
/// lock, so that other kernels are not held up by a long build).
pub fn prepared(
    config: &Config,
    host: &Host,
    req: &KernelRequest,
) -> Result<Arc<Prepared>, DriverError> {
    let key = (req.clone(), config.clone());
    if let Some(found) = table().as_ref().and_then(|m| m.get(&key)) {
        return Ok(found.clone());
    }
    let prepared = Arc::new(prepare(config, host, req)?);
    if prepared.loaded.is_none() {
        return Ok(prepared);
    }
    Ok(table()
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert(prepared)
        .clone())
}

fn table() -> std::sync::MutexGuard<'static, Option<HashMap<Key, Arc<Prepared>>>> {
    PREPARED.lock().unwrap_or_else(PoisonError::into_inner)
}
