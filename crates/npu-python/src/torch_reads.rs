//! Reading a torch tensor's `data_ptr()` and `_version` at every launch, without looking
//! either up on the tensor.
//!
//! A launch reads both from every torch tensor it is given (`known.rs` says why both). Called
//! by name, each read first looks the name up on the tensor's type (the method cache, then
//! the descriptor checks of generic attribute access), which costs about as much as the
//! read itself. For an exact `torch.Tensor` the lookup always finds the same two objects:
//! `TensorBase.data_ptr` (a method descriptor) and `TensorBase._version` (a getset
//! descriptor). They are found once, the way attribute lookup finds them (on `torch.Tensor`,
//! so that a future torch defining either in Python is seen), and called directly: the method
//! with the tensor as its only argument, the getset through its type's `__get__` slot, exactly
//! what attribute access would call. Anything else (subclasses, other objects, a torch whose
//! `data_ptr` or `_version` is not a C descriptor, or whose tensors customise attribute
//! access) is read by name, as before.

use std::ffi::c_void;
use std::ptr;

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// `torch.Tensor` and what reading its two launch facts calls.
pub(crate) struct TorchReads {
    tensor: Py<PyType>,
    /// The method descriptor, when `data_ptr` is one.
    data_ptr: Option<Py<PyAny>>,
    /// The getset descriptor and its type's `__get__`, when `_version` is one.
    version: Option<(Py<PyAny>, ffi::descrgetfunc)>,
}

static READS: PyOnceLock<Option<TorchReads>> = PyOnceLock::new();

impl TorchReads {
    /// The reads of exact `torch.Tensor`s, once torch has been imported by someone (never
    /// imported here: a process without torch launches with other buffer objects).
    pub fn get(py: Python<'_>) -> Option<&'static TorchReads> {
        if let Some(found) = READS.get(py) {
            return found.as_ref();
        }
        let tensor = py
            .import(intern!(py, "sys"))
            .and_then(|sys| sys.getattr(intern!(py, "modules")))
            .ok()
            .and_then(|modules| modules.get_item(intern!(py, "torch")).ok())
            .and_then(|torch| torch.getattr(intern!(py, "Tensor")).ok())
            .and_then(|t| t.cast_into::<PyType>().ok())?;
        READS
            .get_or_init(py, || Some(TorchReads::find(&tensor)))
            .as_ref()
    }

    fn find(tensor: &Bound<'_, PyType>) -> TorchReads {
        let py = tensor.py();
        let is = |object: &Bound<'_, PyAny>, type_name: &str| {
            object
                .get_type()
                .name()
                .is_ok_and(|n| n.to_str().is_ok_and(|n| n == type_name))
        };
        // Attribute access on a tensor is the generic one (as in torch 2.x): a torch that
        // customised it could answer differently than the descriptors, so it is read by name.
        let generic = || -> PyResult<bool> {
            let object = py.get_type::<PyAny>();
            let name = intern!(py, "__getattribute__");
            Ok(tensor.getattr(name)?.is(&object.getattr(name)?)
                && !tensor.hasattr(intern!(py, "__getattr__"))?)
        };
        if !generic().unwrap_or(false) {
            return TorchReads {
                tensor: tensor.clone().unbind(),
                data_ptr: None,
                version: None,
            };
        }
        let data_ptr = tensor
            .getattr(intern!(py, "data_ptr"))
            .ok()
            .filter(|d| is(d, "method_descriptor"))
            .map(Bound::unbind);
        let version = tensor
            .getattr(intern!(py, "_version"))
            .ok()
            .filter(|d| is(d, "getset_descriptor"))
            .and_then(|d| {
                // SAFETY: a live type object; the slot is a function pointer or NULL.
                let get =
                    unsafe { ffi::PyType_GetSlot(ffi::Py_TYPE(d.as_ptr()), ffi::Py_tp_descr_get) };
                // SAFETY: the `tp_descr_get` slot holds a `descrgetfunc` or NULL, which an
                // `Option` of a function pointer represents as `None`.
                let get =
                    unsafe { std::mem::transmute::<*mut c_void, Option<ffi::descrgetfunc>>(get) };
                get.map(|get| (d.unbind(), get))
            });
        TorchReads {
            tensor: tensor.clone().unbind(),
            data_ptr,
            version,
        }
    }

    /// Whether `object` is an exact `torch.Tensor` (not a subclass, whose methods may differ).
    pub fn is_tensor(&self, object: &Bound<'_, PyAny>) -> bool {
        object.get_type().is(self.tensor.bind(object.py()))
    }

    /// `tensor.data_ptr()` of an exact tensor.
    pub fn data_ptr<'py>(&self, tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = tensor.py();
        match &self.data_ptr {
            // SAFETY: a live callable and a live argument, NULL-terminated; the result is a
            // new reference or NULL with an exception set.
            Some(method) => unsafe {
                let result = ffi::PyObject_CallFunctionObjArgs(
                    method.as_ptr(),
                    tensor.as_ptr(),
                    ptr::null_mut::<ffi::PyObject>(),
                );
                Bound::from_owned_ptr_or_err(py, result)
            },
            None => tensor.call_method0(intern!(py, "data_ptr")),
        }
    }

    /// `tensor._version` of an exact tensor.
    pub fn version<'py>(&self, tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = tensor.py();
        match &self.version {
            // SAFETY: the descriptor's own `__get__` with a live instance and its type, as
            // attribute access calls it; a new reference or NULL with an exception set.
            Some((descriptor, get)) => unsafe {
                let result = get(descriptor.as_ptr(), tensor.as_ptr(), self.tensor.as_ptr());
                Bound::from_owned_ptr_or_err(py, result)
            },
            None => tensor.getattr(intern!(py, "_version")),
        }
    }
}
