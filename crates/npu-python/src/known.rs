//! What a launcher remembers of the buffer objects it was given, so that launching the same
//! tensors again costs neither a system call nor most of the reads of a first launch.
//!
//! Two things are remembered per Python object, keyed by its identity, with a weak reference
//! that says whether it is still the same object:
//!
//! * **Its pages.** A launch must not read or write memory that is not there (the process would
//!   die with SIGSEGV), and a tensor's `data_ptr()` is only its word: the runtime probes the
//!   pages (`madvise(MADV_POPULATE_READ/WRITE)`, see `npu_runtime::HostArg::probe`), a system
//!   call per buffer. While an object lives, the memory it owns or keeps alive stays mapped
//!   (torch storage, a NumPy array's buffer or its base, an `mmap` that cannot be closed while
//!   exported), so a later launch with the same object, address and length skips the probe.
//! * **A torch tensor's length and contiguity.** Each read is a call into torch (its argument
//!   parser, its warning handler): `is_contiguous()` and `nbytes` cost as much as the rest of
//!   a launch. A tensor's `_version` counts its in-place changes, and every in-place change of
//!   its shape or strides (`resize_`, `t_`, `transpose_`, `as_strided_`, `set_`, …) counts
//!   as one, so a launch reads `data_ptr()` and `_version` and reuses length and contiguity
//!   when both match what they were. Not seen this way, as it is not seen by torch's own
//!   counter: `tensor.data = other` with `other` at the same address but other strides
//!   (it keeps the version); such a tensor is taken as it was.
//!
//! An object that moved its data shows another address (or, for a torch tensor, version) and
//! is read and probed again; one that cannot be weakly referenced is read and probed at every
//! launch. Not covered, as without the memo: memory freed behind a live object's back by code
//! that promised not to (NumPy's `resize(..., refcheck=False)` under a view).

use std::sync::{Mutex, PoisonError};

use npu_runtime::{HostArg, MAX_KERNEL_ARGS, Pages};
use pyo3::prelude::*;
use pyo3::types::{PyWeakrefMethods, PyWeakrefReference};
use smallvec::SmallVec;

/// Objects a launcher remembers at most; when full, the dead ones go, then the oldest.
const MAX_REMEMBERED: usize = 64;

/// What was read of one object, and when (`version`, for torch tensors).
#[derive(Clone, Copy)]
pub(crate) struct Facts {
    pub arg: HostArg,
    /// The tensor's `_version` when `arg` was read: `None` for objects other than exact torch
    /// tensors, whose length and contiguity are read at every launch.
    pub version: Option<i64>,
}

struct Known {
    identity: usize,
    object: Py<PyWeakrefReference>,
    facts: Facts,
}

/// One launcher's memory of its buffer objects (see the module docs).
#[derive(Default)]
pub(crate) struct KnownObjects {
    entries: Mutex<Vec<Known>>,
}

impl KnownObjects {
    /// Appends to `recalled` what was read of each of `objects` at an earlier launch, where it
    /// is still the same live object; one lock for all. Python is not called while the table is locked (a weak
    /// reference's referent is read without running code), so a launch from inside torch's
    /// callbacks cannot deadlock here.
    pub fn recall_into<'a, 'py: 'a>(
        &self,
        objects: impl Iterator<Item = &'a Bound<'py, PyAny>>,
        recalled: &mut SmallVec<[Option<Facts>; MAX_KERNEL_ARGS]>,
    ) {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        recalled.extend(objects.map(|object| {
            let known = entries.iter().find(|k| k.identity == identity(object))?;
            let alive = known.object.bind(object.py()).upgrade();
            alive.is_some_and(|o| o.is(object)).then_some(known.facts)
        }));
    }

    /// Remembers what was read of `object` (its pages only once something is known of them).
    pub fn remember(&self, object: &Bound<'_, PyAny>, facts: Facts) {
        if facts.arg.pages() == Pages::Unknown && facts.version.is_none() {
            return;
        }
        // Objects that cannot be weakly referenced are read at every launch.
        let Ok(weak) = PyWeakrefReference::new(object) else {
            return;
        };
        let py = object.py();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|k| k.identity != identity(object));
        if entries.len() >= MAX_REMEMBERED {
            entries.retain(|k| k.object.bind(py).upgrade().is_some());
            if entries.len() >= MAX_REMEMBERED {
                entries.remove(0);
            }
        }
        entries.push(Known {
            identity: identity(object),
            object: weak.unbind(),
            facts,
        });
    }
}

fn identity(object: &Bound<'_, PyAny>) -> usize {
    object.as_ptr() as usize
}
