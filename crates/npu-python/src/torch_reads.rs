//! Reading a torch tensor's `data_ptr()` and `_version` at every launch, without looking
//! either up on the tensor and without Python's call machinery.
//!
//! A launch reads both from every torch tensor it is given (`known.rs` says why both). Called
//! by name, each read first looks the name up on the tensor's type (the method cache, then
//! the descriptor checks of generic attribute access), which costs about as much as the
//! read itself; called through the descriptor object, it still goes through argument packing,
//! the descriptor's type check and its recursion guard. For an exact `torch.Tensor` the lookup
//! always finds the same two objects: `TensorBase.data_ptr` (a method descriptor of a C
//! function taking no arguments, `METH_NOARGS`) and `TensorBase._version` (a getset
//! descriptor). They are found once, the way attribute lookup finds them (on `torch.Tensor`,
//! so that a future torch defining either in Python is seen), and the C functions behind them
//! are called as CPython itself calls them: `data_ptr(tensor, NULL)` and
//! `_version_get(tensor, closure)`.
//!
//! The two functions are reached through the descriptors' C layout (`PyMethodDescrObject`,
//! `PyGetSetDescrObject` in CPython's `descrobject.h`: the common descriptor head, then the
//! method or getset definition), which the limited API does not expose. That layout is the
//! same in every CPython this package supports (3.10 to 3.14); it is used only on those, and
//! only after what it leads to checks out: the descriptor's type is a base of `torch.Tensor`,
//! its name and its definition's name are `data_ptr` / `_version`, and the method takes no
//! arguments. Anything else (subclasses, other objects, another interpreter, a torch whose
//! `data_ptr` or `_version` is not such a descriptor, or whose tensors customise attribute
//! access) is read by name.

use std::ffi::{CStr, c_int};

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// `torch.Tensor` and the C functions that read its two launch facts.
pub(crate) struct TorchReads {
    tensor: Py<PyType>,
    /// `data_ptr`'s C function, when the descriptor is the expected one.
    data_ptr: Option<Direct<ffi::PyCFunction>>,
    /// `_version`'s getter and its closure, when the descriptor is the expected one.
    version: Option<(Direct<ffi::getter>, *mut std::ffi::c_void)>,
}

/// A C function found behind a descriptor, with the descriptor kept alive (it owns the
/// definition the function pointer came from).
struct Direct<F> {
    _descriptor: Py<PyAny>,
    function: F,
}

// SAFETY: the raw closure pointer is only passed back to the getter it belongs to, with the
// GIL held; the descriptor is kept alive by `Direct`.
unsafe impl Send for TorchReads {}
// SAFETY: as above; nothing is mutated after construction.
unsafe impl Sync for TorchReads {}

static READS: PyOnceLock<Option<TorchReads>> = PyOnceLock::new();

/// CPython's `PyDescr_COMMON` (`descrobject.h`), the head of every descriptor object.
#[repr(C)]
struct DescriptorHead {
    ob_base: ffi::PyObject,
    d_type: *mut ffi::PyTypeObject,
    d_name: *mut ffi::PyObject,
    d_qualname: *mut ffi::PyObject,
}

/// CPython's `PyMethodDescrObject` up to the method definition.
#[repr(C)]
struct MethodDescriptor {
    head: DescriptorHead,
    d_method: *mut ffi::PyMethodDef,
}

/// CPython's `PyGetSetDescrObject`.
#[repr(C)]
struct GetSetDescriptor {
    head: DescriptorHead,
    d_getset: *mut ffi::PyGetSetDef,
}

/// The CPython minor versions whose descriptor layout is the one above (3.10 to 3.14).
const KNOWN_LAYOUT: std::ops::RangeInclusive<u8> = 10..=14;

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
        let by_name = TorchReads {
            tensor: tensor.clone().unbind(),
            data_ptr: None,
            version: None,
        };
        // Attribute access on a tensor is the generic one (as in torch 2.x): a torch that
        // customised it could answer differently than the descriptors, so it is read by name.
        let generic = || -> PyResult<bool> {
            let object = py.get_type::<PyAny>();
            let name = intern!(py, "__getattribute__");
            Ok(tensor.getattr(name)?.is(&object.getattr(name)?)
                && !tensor.hasattr(intern!(py, "__getattr__"))?)
        };
        let cpython = py
            .import(intern!(py, "sys"))
            .and_then(|sys| {
                sys.getattr(intern!(py, "implementation"))?
                    .getattr(intern!(py, "name"))
            })
            .is_ok_and(|name| name.eq("cpython").unwrap_or(false));
        let version = py.version_info();
        if !cpython
            || version.major != 3
            || !KNOWN_LAYOUT.contains(&version.minor)
            || !generic().unwrap_or(false)
        {
            return by_name;
        }
        TorchReads {
            data_ptr: tensor
                .getattr(intern!(py, "data_ptr"))
                .ok()
                .and_then(|d| method_without_arguments(tensor, d, c"data_ptr")),
            version: tensor
                .getattr(intern!(py, "_version"))
                .ok()
                .and_then(|d| getter(tensor, d, c"_version")),
            ..by_name
        }
    }

    /// Whether `object` is an exact `torch.Tensor` (not a subclass, whose methods may differ).
    pub fn is_tensor(&self, object: &Bound<'_, PyAny>) -> bool {
        // SAFETY: a live object's type pointer, compared, not dereferenced.
        unsafe { ffi::Py_TYPE(object.as_ptr()) == self.tensor.as_ptr().cast() }
    }

    /// `tensor.data_ptr()` of an exact tensor.
    pub fn data_ptr<'py>(&self, tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = tensor.py();
        match &self.data_ptr {
            // SAFETY: a `METH_NOARGS` function called as CPython calls it (the instance and
            // NULL), with an instance of the type that defines it and the GIL held; a new
            // reference or NULL with an exception set.
            Some(direct) => unsafe {
                let result = (direct.function)(tensor.as_ptr(), std::ptr::null_mut());
                Bound::from_owned_ptr_or_err(py, result)
            },
            None => tensor.call_method0(intern!(py, "data_ptr")),
        }
    }

    /// `tensor._version` of an exact tensor.
    pub fn version<'py>(&self, tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = tensor.py();
        match &self.version {
            // SAFETY: the getter with an instance of the type that defines it and its own
            // closure, as `getset_descriptor.__get__` calls it; a new reference or NULL with an
            // exception set.
            Some((direct, closure)) => unsafe {
                let result = (direct.function)(tensor.as_ptr(), *closure);
                Bound::from_owned_ptr_or_err(py, result)
            },
            None => tensor.getattr(intern!(py, "_version")),
        }
    }
}

/// The head of `descriptor` when it is a descriptor of type `type_name` named `name` that a
/// base of `tensor` defines (what makes reading its layout trustworthy).
fn checked_head<'a>(
    tensor: &Bound<'_, PyType>,
    descriptor: &'a Bound<'_, PyAny>,
    type_name: &str,
    name: &CStr,
) -> Option<&'a DescriptorHead> {
    let named = descriptor
        .get_type()
        .name()
        .is_ok_and(|n| n.to_str().is_ok_and(|n| n == type_name));
    if !named {
        return None;
    }
    // SAFETY: a live method or getset descriptor (its type checked above), whose layout starts
    // with the common descriptor head on the CPython versions `KNOWN_LAYOUT` admits.
    let head = unsafe { &*descriptor.as_ptr().cast::<DescriptorHead>() };
    // SAFETY: `d_type` and `d_name` of a live descriptor: a type and a str (checked before
    // use), owned by the descriptor.
    let sound = unsafe {
        !head.d_type.is_null()
            && ffi::PyType_IsSubtype(tensor.as_ptr().cast(), head.d_type) != 0
            && !head.d_name.is_null()
            && ffi::PyUnicode_Check(head.d_name) != 0
            && ffi::PyUnicode_CompareWithASCIIString(head.d_name, name.as_ptr()) == 0
    };
    sound.then_some(head)
}

/// The C function of a method descriptor named `name` that takes no arguments.
fn method_without_arguments(
    tensor: &Bound<'_, PyType>,
    descriptor: Bound<'_, PyAny>,
    name: &CStr,
) -> Option<Direct<ffi::PyCFunction>> {
    checked_head(tensor, &descriptor, "method_descriptor", name)?;
    // SAFETY: a method descriptor (checked), so its head is followed by its definition, which
    // lives as long as the descriptor (static in the extension that made it).
    let definition = unsafe {
        let method = &*descriptor.as_ptr().cast::<MethodDescriptor>();
        method.d_method.as_ref()?
    };
    let no_arguments: c_int = ffi::METH_NOARGS;
    // SAFETY: `ml_name` of a live definition is a NUL-terminated string or NULL.
    let same_name =
        !definition.ml_name.is_null() && unsafe { CStr::from_ptr(definition.ml_name) } == name;
    if !same_name || definition.ml_flags != no_arguments {
        return None;
    }
    // SAFETY: with `METH_NOARGS` alone, the definition's function is a `PyCFunction`.
    let function = unsafe { definition.ml_meth.PyCFunction };
    Some(Direct {
        _descriptor: descriptor.unbind(),
        function,
    })
}

/// The getter and closure of a getset descriptor named `name`.
fn getter(
    tensor: &Bound<'_, PyType>,
    descriptor: Bound<'_, PyAny>,
    name: &CStr,
) -> Option<(Direct<ffi::getter>, *mut std::ffi::c_void)> {
    checked_head(tensor, &descriptor, "getset_descriptor", name)?;
    // SAFETY: a getset descriptor (checked), so its head is followed by its definition, which
    // lives as long as the descriptor.
    let definition = unsafe {
        let getset = &*descriptor.as_ptr().cast::<GetSetDescriptor>();
        getset.d_getset.as_ref()?
    };
    // SAFETY: `name` of a live definition is a NUL-terminated string or NULL.
    let same_name =
        !definition.name.is_null() && unsafe { CStr::from_ptr(definition.name) } == name;
    let function = definition.get.filter(|_| same_name)?;
    Some((
        Direct {
            _descriptor: descriptor.unbind(),
            function,
        },
        definition.closure,
    ))
}
