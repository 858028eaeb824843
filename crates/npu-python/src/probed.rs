//! Tensors whose memory has been probed, so that launching the same tensors again costs no
//! system call.
//!
//! A launch must not read or write memory that is not there (the process would die with
//! SIGSEGV), and a tensor's `data_ptr()` is only its word: the runtime probes the pages
//! (`madvise(MADV_POPULATE_READ/WRITE)`, see `npu_runtime::HostArg::probe`). Probing every
//! argument of every launch costs a system call each, so a probe is remembered per Python
//! object: keyed by its identity, with a weak reference that says whether it is still the same
//! object, and with the address and length that were probed. While an object lives, the
//! memory it owns or keeps alive stays mapped (torch storage, a NumPy array's buffer or its
//! base, an `mmap` that cannot be closed while exported), so a later launch with the same
//! object, address and length may skip the probe. An object that moved its data (`resize_`,
//! `set_`) shows another address or length and is probed again; one that cannot be weakly
//! referenced is probed at every launch.
//!
//! Not covered, as without the memo: memory freed behind a live object's back by code that
//! promised not to (NumPy's `resize(..., refcheck=False)` under a view).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use npu_runtime::{HostArg, Pages};
use pyo3::prelude::*;
use pyo3::types::{PyWeakrefMethods, PyWeakrefReference};

/// Objects remembered at most; when full, the dead ones go, and if none are dead, all of them.
const MAX_REMEMBERED: usize = 4096;

struct Probe {
    object: Py<PyWeakrefReference>,
    address: usize,
    len: usize,
    pages: Pages,
}

static PROBED: LazyLock<Mutex<HashMap<usize, Probe>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// `arg` (made from `object`) with what an earlier probe of the same live object, address
/// and length found.
pub(crate) fn vouch(object: &Bound<'_, PyAny>, arg: HostArg) -> HostArg {
    let table = PROBED.lock().unwrap_or_else(PoisonError::into_inner);
    match table.get(&identity(object)) {
        Some(p)
            if p.address == arg.address()
                && p.len == arg.len()
                && p.object
                    .bind(object.py())
                    .upgrade()
                    .is_some_and(|o| o.is(object)) =>
        {
            arg.vouched(p.pages)
        }
        _ => arg,
    }
}

/// Remembers what is known about `arg`'s pages (made from `object`), for later launches.
pub(crate) fn remember(object: &Bound<'_, PyAny>, arg: &HostArg) {
    if arg.pages() == Pages::Unknown {
        return;
    }
    // Objects that cannot be weakly referenced are probed every time.
    let Ok(weak) = PyWeakrefReference::new(object) else {
        return;
    };
    let py = object.py();
    let mut table = PROBED.lock().unwrap_or_else(PoisonError::into_inner);
    if table.len() >= MAX_REMEMBERED {
        table.retain(|_, p| p.object.bind(py).upgrade().is_some());
        if table.len() >= MAX_REMEMBERED {
            table.clear();
        }
    }
    let probe = Probe {
        object: weak.unbind(),
        address: arg.address(),
        len: arg.len(),
        pages: arg.pages(),
    };
    table.insert(identity(object), probe);
}

fn identity(object: &Bound<'_, PyAny>) -> usize {
    object.as_ptr() as usize
}
