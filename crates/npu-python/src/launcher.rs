//! `NPULauncher`: what Triton calls at every launch of a compiled kernel.
//!
//! Built once per compiled kernel from its signature; no compiler runs, ever. Each call:
//! enter hook → on the first launch of a grid, the driver's `prepare` (cache, toolchain,
//! load) → arguments mapped to host buffers → dispatch with the GIL released → exit hook.
//! Later launches of the same grid find the loaded kernel in a small table without looking at
//! the IR again.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use npu_driver::{Host, KernelRequest, Prepared};
use npu_runtime::{HostArg, MAX_KERNEL_ARGS, PageFault, Pages};
use npu_target::{Config, RuntimeKind};
use pyo3::Borrowed;
use pyo3::exceptions::{PyAttributeError, PyException, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};
use smallvec::SmallVec;

use crate::errors::{config_error, driver_error};
use crate::known::{Facts, KnownObjects};
use crate::torch_reads::TorchReads;

/// What a kernel parameter is, from its Triton signature type.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Param {
    /// Compiled into the kernel; the launch still passes it, and it is dropped.
    Constexpr,
    /// `*fp32` and friends: a host buffer.
    Pointer,
    /// A scalar: checked against its type, then dropped (scalars never reach the NPU).
    Int,
    Float,
}

impl Param {
    fn from_signature(ty: &str) -> Param {
        if ty == "constexpr" {
            Param::Constexpr
        } else if ty.starts_with('*') {
            Param::Pointer
        } else if ty.starts_with("fp") || ty.starts_with("bf") {
            Param::Float
        } else {
            Param::Int
        }
    }
}

/// Grids a launcher remembers before forgetting the oldest (kernels whose grid follows the
/// data would otherwise grow the table forever; forgotten ones stay in `PREPARED`).
const MAX_GRIDS_PER_LAUNCHER: usize = 16;

thread_local! {
    /// This thread's dispatches so far and the device time of the last one, for the
    /// benchmarker (per thread, so another thread's kernels do not pollute a measurement).
    static LAST_DISPATCH: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

#[pyclass(module = "triton_npu._native", name = "NPULauncher", frozen)]
pub struct Launcher {
    name: String,
    params: Vec<(String, Param)>,
    runtime: RuntimeKind,
    actual_sizes: Option<[u64; 3]>,
    host: Host,
    /// Kernels loaded per grid; a list because a kernel rarely sees more than a few grids.
    /// Weak: the driver's bounded table of prepared kernels owns them, so a process with
    /// thousands of launchers keeps only that table's kernels loaded; a kernel the table let
    /// go is prepared again (from the cache) at its next launch.
    loaded: Mutex<Vec<([u32; 3], Weak<Prepared>)>>,
    /// Compile-only as last read, with the configuration generation it was read at
    /// (`generation << 1 | compile_only`; all ones before the first read): compile-only is
    /// honoured at every launch, re-reading the configuration only after it changed.
    compile_only: AtomicU64,
    last_cache_dir: Mutex<Option<PathBuf>>,
    /// The buffer objects of earlier launches: their pages, and torch tensors' length and
    /// contiguity (`known`).
    known: KnownObjects,
}

/// A launch's buffer arguments, in signature order and on the stack (a launch allocates
/// nothing it need not): the host buffers, as the dispatch takes them, and beside each the
/// object it was read from.
#[derive(Default)]
struct GivenArgs<'a, 'py> {
    buffers: SmallVec<[HostArg; MAX_KERNEL_ARGS]>,
    objects: SmallVec<[GivenObject<'a, 'py>; MAX_KERNEL_ARGS]>,
}

/// The object behind one buffer argument (borrowed from the argument tuple, which holds it for
/// the whole call), its torch `_version` when it has one, and whether its buffer was recalled
/// from an earlier launch.
struct GivenObject<'a, 'py> {
    object: Borrowed<'a, 'py, PyAny>,
    version: Option<i64>,
    recalled: bool,
}

#[pymethods]
impl Launcher {
    /// `NPULauncher(src, metadata, runtime="xrt", host=None)`: Triton's `launcher_cls(src,
    /// metadata)` with the runtime bound by the driver.
    #[new]
    #[pyo3(signature = (src, metadata, runtime = "xrt", host = None))]
    fn new(
        src: &Bound<'_, PyAny>,
        metadata: &Bound<'_, PyAny>,
        runtime: &str,
        host: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Launcher> {
        let runtime =
            RuntimeKind::parse_named(runtime, "the runtime argument").map_err(config_error)?;
        let signature = src.getattr("signature")?;
        let signature = signature.cast::<PyDict>().map_err(|_| {
            PyTypeError::new_err("src.signature must be a dict of parameter name → type")
        })?;
        let mut params = Vec::with_capacity(signature.len());
        for (name, ty) in signature.iter() {
            let ty: String = ty.str()?.extract()?;
            params.push((name.extract::<String>()?, Param::from_signature(&ty)));
        }
        // Constexpr values by name, for upstream's actual-sizes rule.
        let mut constexprs: Vec<(String, i64)> = Vec::new();
        if let Ok(constants) = src.getattr("constants")
            && let Ok(constants) = constants.cast::<PyDict>()
        {
            for (key, value) in constants.iter() {
                let index = key
                    .cast::<PyTuple>()
                    .ok()
                    .and_then(|t| t.get_item(0).ok())
                    .and_then(|i| i.extract::<usize>().ok());
                if let (Some(i), Ok(v)) = (index, value.extract::<i64>())
                    && let Some((name, _)) = params.get(i)
                {
                    constexprs.push((name.clone(), v));
                }
            }
        }
        let actual_sizes =
            npu_toolchain::lower::actual_sizes(constexprs.iter().map(|(k, v)| (k.as_str(), *v)));
        Ok(Launcher {
            name: metadata.getattr("name")?.extract()?,
            params,
            runtime,
            actual_sizes,
            host: crate::host::host_from(host)?,
            loaded: Mutex::new(Vec::new()),
            compile_only: AtomicU64::new(u64::MAX),
            last_cache_dir: Mutex::new(None),
            known: KnownObjects::default(),
        })
    }

    /// `launcher(gridX, gridY, gridZ, stream, function, packed_metadata, launch_metadata,
    /// enter_hook, exit_hook, *args)`.
    #[pyo3(signature = (*args))]
    fn __call__(slf: &Bound<'_, Self>, args: &Bound<'_, PyTuple>) -> PyResult<()> {
        const FIXED: usize = 9;
        let (this, py) = (slf.get(), slf.py());
        if args.len() < FIXED {
            return Err(PyTypeError::new_err(format!(
                "NPULauncher expects (gridX, gridY, gridZ, stream, function, packed_metadata, \
                 launch_metadata, enter_hook, exit_hook, *args); got {} arguments",
                args.len()
            )));
        }
        let grid = [
            args.get_borrowed_item(0)?.extract::<u32>()?,
            args.get_borrowed_item(1)?.extract::<u32>()?,
            args.get_borrowed_item(2)?.extract::<u32>()?,
        ];
        let launch_metadata = args.get_borrowed_item(6)?;
        let enter_hook = args.get_borrowed_item(7)?;
        if !enter_hook.is_none() {
            enter_hook.call1((&launch_metadata,))?;
        }
        // Read in place: a slice would be a new tuple per launch for the collector to track.
        let mut given = GivenArgs::default();
        this.buffers(args, FIXED, &mut given)?;
        if grid.contains(&0) {
            return this.exit(&*args.get_borrowed_item(8)?, &launch_metadata);
        }
        let function = args.get_borrowed_item(4)?;
        let prepared = if this.compile_only_now()? {
            // Build and cache, never dispatch (upstream's compile-only); the loaded-kernel
            // table is skipped so that a kernel loaded earlier is not run.
            this.prepare(py, grid, &function, false)?
        } else {
            this.prepared(py, grid, &function)?
        };
        // As upstream, the kernel about to be dispatched is the last dispatched module.
        crate::dispatched::record(slf, &function);
        if prepared.loaded.is_some() {
            this.probe(&mut given, &prepared.io.written)?;
            let buffers = &given.buffers;
            // Ctrl-C or SIGTERM stops the wait for the device (KeyboardInterrupt here).
            let report =
                crate::interrupt::detach_interruptible(py, || prepared.dispatch(buffers, None))?
                    .map_err(|e| this.dispatch_error(e))?;
            let ns = u64::try_from(report.device_time.as_nanos()).unwrap_or(u64::MAX);
            LAST_DISPATCH.with(|d| d.set((d.get().0 + 1, ns)));
            crate::shared::record_dispatch(
                this.runtime,
                report.in_place.into(),
                report.staged.into(),
            );
        }
        this.exit(&*args.get_borrowed_item(8)?, &launch_metadata)
    }

    /// The cache directory of the kernel's artifacts once it has been launched (upstream's
    /// `npu_cache_dir`), else `None`.
    #[getter]
    fn npu_cache_dir(&self) -> Option<String> {
        self.last_cache_dir
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|p| p.display().to_string())
    }

    #[getter]
    fn runtime(&self) -> &'static str {
        self.runtime.as_str()
    }

    #[getter]
    fn kernel_name(&self) -> &str {
        &self.name
    }

    /// The format this launcher's kernels are built in (upstream's `output_format`): `"elf"`,
    /// `"xclbin"` or `"pdi"`, for the current configuration and the NPU a launch would use.
    #[getter]
    fn output_format(&self, py: Python<'_>) -> PyResult<&'static str> {
        let mut config = npu_target::Config::current().map_err(config_error)?;
        config.runtime = self.runtime;
        crate::target::output_format_under(py, &config, &self.host)
    }
}

impl Launcher {
    fn compile_only_now(&self) -> PyResult<bool> {
        let generation = npu_target::config::generation();
        let cached = self.compile_only.load(Ordering::Acquire);
        if cached != u64::MAX && cached >> 1 == generation {
            return Ok(cached & 1 == 1);
        }
        let compile_only = Config::current().map_err(config_error)?.compile_only;
        self.compile_only
            .store(generation << 1 | u64::from(compile_only), Ordering::Release);
        Ok(compile_only)
    }

    /// Prepares the kernel for `grid`: through the process's memo of prepared kernels
    /// (`npu_driver::memo`), or afresh (`memo = false`, for compile-only launches, which must
    /// build but never reuse a loaded kernel).
    fn prepare(
        &self,
        py: Python<'_>,
        grid: [u32; 3],
        function: &Bound<'_, PyAny>,
        memo: bool,
    ) -> PyResult<Arc<Prepared>> {
        let mut config = Config::current().map_err(config_error)?;
        config.runtime = self.runtime;
        let request = KernelRequest {
            name: self.name.clone(),
            ttsharedir: ttsharedir_text(function)?,
            grid,
            actual_sizes: self.actual_sizes,
        };
        let host = &self.host;
        let prepared = crate::interrupt::detach_interruptible(py, || {
            if memo {
                npu_driver::memo::prepared(&config, host, &request)
            } else {
                npu_driver::prepare(&config, host, &request).map(Arc::new)
            }
        })?
        .map_err(driver_error)?;
        *self
            .last_cache_dir
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(prepared.cache_dir().to_owned());
        Ok(prepared)
    }

    /// Makes sure every buffer's memory can be read, and written where the kernel writes
    /// it, before anything touches it: known from an earlier launch of the same object
    /// (`known`), probed otherwise. A refusal names the argument as the signature does.
    fn probe(&self, given: &mut GivenArgs<'_, '_>, written: &[bool]) -> PyResult<()> {
        let GivenArgs { buffers, objects } = given;
        for (i, (arg, g)) in buffers.iter_mut().zip(objects.iter()).enumerate() {
            let need = if written.get(i).copied().unwrap_or(true) {
                Pages::Writable
            } else {
                Pages::Readable
            };
            if arg.pages() < need {
                match arg.probe(need) {
                    Ok(()) => {}
                    Err(PageFault::Write(reason)) => return Err(self.not_writable(i, reason)),
                    Err(PageFault::Read(reason)) => return Err(self.not_readable(i, reason)),
                }
            } else if g.recalled {
                continue;
            }
            let facts = Facts {
                arg: *arg,
                version: g.version,
            };
            self.known.remember(&g.object, facts);
        }
        Ok(())
    }

    /// The name of buffer argument `index` (counting buffer parameters only), as the
    /// signature has it: `argument <position> (<name>) of <kernel>`.
    fn buffer_name(&self, index: usize) -> String {
        match self
            .params
            .iter()
            .enumerate()
            .filter(|(_, (_, p))| *p == Param::Pointer)
            .nth(index)
        {
            Some((position, _)) => self.argument_name(position),
            None => format!("buffer argument {index} of {}", self.name),
        }
    }

    fn not_writable(&self, index: usize, reason: npu_runtime::NotWritable) -> PyErr {
        crate::errors::error_of_kind(
            npu_driver::ErrorKind::InvalidInput,
            format!(
                "{} is an output (the kernel writes it), but {reason}; nothing was dispatched: \
                 pass writable memory (e.g. a copy)",
                self.buffer_name(index)
            ),
        )
    }

    fn not_readable(&self, index: usize, reason: npu_runtime::NotReadable) -> PyErr {
        crate::errors::error_of_kind(
            npu_driver::ErrorKind::InvalidInput,
            format!(
                "{} is read by the kernel, but {reason}; nothing was dispatched: pass a tensor \
                 whose memory is alive",
                self.buffer_name(index)
            ),
        )
    }

    /// A dispatch error for Python; an output the kernel cannot write is named as the
    /// signature names it.
    fn dispatch_error(&self, e: npu_driver::DriverError) -> PyErr {
        use npu_runtime::RuntimeError::{NotReadable, NotWritable};
        match e {
            npu_driver::DriverError::Runtime(NotWritable { index, reason, .. }) => {
                self.not_writable(index, reason)
            }
            npu_driver::DriverError::Runtime(NotReadable { index, reason, .. }) => {
                self.not_readable(index, reason)
            }
            e => driver_error(e),
        }
    }

    fn exit(&self, hook: &Bound<'_, PyAny>, metadata: &Bound<'_, PyAny>) -> PyResult<()> {
        if !hook.is_none() {
            hook.call1((metadata,))?;
        }
        Ok(())
    }

    /// The prepared kernel for `grid`, preparing it on first use.
    fn prepared(
        &self,
        py: Python<'_>,
        grid: [u32; 3],
        function: &Bound<'_, PyAny>,
    ) -> PyResult<Arc<Prepared>> {
        if let Some(p) = self.held(grid) {
            return Ok(p);
        }
        let prepared = self.prepare(py, grid, function, true)?;
        if prepared.loaded.is_none() {
            return Ok(prepared);
        }
        let mut table = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        table.retain(|(g, p)| *g != grid && p.strong_count() > 0);
        if table.len() >= MAX_GRIDS_PER_LAUNCHER {
            table.remove(0);
        }
        table.push((grid, Arc::downgrade(&prepared)));
        Ok(prepared)
    }

    /// The kernel this launcher holds for `grid`, if the driver still has it loaded.
    fn held(&self, grid: [u32; 3]) -> Option<Arc<Prepared>> {
        let table = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        table
            .iter()
            .find(|(g, _)| *g == grid)
            .and_then(|(_, p)| p.upgrade())
    }

    /// Maps the kernel arguments (`args` from `first`) to host buffers (pointer parameters, in
    /// order), checking every argument against the signature.
    ///
    /// Each buffer object is read as little as what is known of it allows: first what says
    /// whether it changed (a torch tensor's `data_ptr()` and `_version`; any other object is
    /// read in full), then what an earlier launch read of it is recalled for all of them under
    /// one lock, then the torch tensors not recalled are read in full.
    fn buffers<'a, 'py>(
        &self,
        args: &'a Bound<'py, PyTuple>,
        first: usize,
        out: &mut GivenArgs<'a, 'py>,
    ) -> PyResult<()> {
        let given = args.len() - first;
        if given != self.params.len() {
            return Err(PyTypeError::new_err(format!(
                "{} takes {} arguments ({}), got {}",
                self.name,
                self.params.len(),
                self.params
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                given
            )));
        }
        let py = args.py();
        let mut seen: SmallVec<[(Borrowed<'a, 'py, PyAny>, usize, Seen); MAX_KERNEL_ARGS]> =
            SmallVec::new();
        // Once per launch: until torch is imported, finding out means a look at sys.modules.
        let torch = TorchReads::get(py);
        for (i, (name, param)) in self.params.iter().enumerate() {
            // Borrowed, not owned: the tuple holds every argument for the whole call, and a
            // reference count taken and given back per argument is work for nothing.
            let arg = args.get_borrowed_item(first + i)?;
            match param {
                Param::Constexpr => {}
                Param::Int => {
                    if arg.extract::<i64>().is_err() && arg.extract::<u64>().is_err() {
                        return Err(PyTypeError::new_err(format!(
                            "argument {i} ({name}) of {} must be an integer, got {}",
                            self.name,
                            arg.get_type().name()?
                        )));
                    }
                }
                Param::Float => {
                    if arg.extract::<f64>().is_err() {
                        return Err(PyTypeError::new_err(format!(
                            "argument {i} ({name}) of {} must be a number, got {}",
                            self.name,
                            arg.get_type().name()?
                        )));
                    }
                }
                Param::Pointer => {
                    let what = || self.argument_name(i);
                    let first_look = match torch.filter(|r| r.is_tensor(&arg)) {
                        Some(reads) => Seen::Tensor {
                            address: address(reads.data_ptr(&arg), &arg, &what)?,
                            version: reads.version(&arg).and_then(|v| v.extract::<i64>()).ok(),
                        },
                        None => Seen::Other(host_arg(py, &arg, &what)?),
                    };
                    seen.push((arg, i, first_look));
                }
            }
        }
        // Filled in place and drained (not moved): these live on the stack, and moving them
        // would copy them whole.
        let mut recalled = SmallVec::new();
        self.known
            .recall_into(seen.iter().map(|(object, _, _)| &**object), &mut recalled);
        for ((object, i, first_look), known) in seen.drain(..).zip(recalled.drain(..)) {
            let (facts, recalled) = self.resolve(py, &object, i, first_look, known)?;
            out.buffers.push(facts.arg);
            out.objects.push(GivenObject {
                object,
                version: facts.version,
                recalled,
            });
        }
        Ok(())
    }

    /// A buffer argument from its first look and what an earlier launch read of it: a torch
    /// tensor at the same address and version is taken as it was; one that changed is read in
    /// full; any other object was read in full, and only its pages may be known. Returns what
    /// is known of it now and whether that was recalled.
    fn resolve(
        &self,
        py: Python<'_>,
        object: &Bound<'_, PyAny>,
        position: usize,
        first_look: Seen,
        known: Option<Facts>,
    ) -> PyResult<(Facts, bool)> {
        Ok(match (first_look, known) {
            (Seen::Tensor { address, version }, Some(facts))
                if version.is_some()
                    && facts.version == version
                    && facts.arg.address() as u64 == address =>
            {
                (facts, true)
            }
            // Torch tensors cannot be read-only (and have no `flags`: looking for it would
            // raise and catch an AttributeError per tensor); memory mapped read-only behind
            // one is found by the page probe.
            (Seen::Tensor { address, version }, _) => {
                let what = || self.argument_name(position);
                let arg = host_arg_at(py, object, address, true, &what)?;
                (Facts { arg, version }, false)
            }
            (Seen::Other(arg), Some(k))
                if k.arg.address() == arg.address() && k.arg.len() == arg.len() =>
            {
                let arg = arg.vouched(k.arg.pages());
                (Facts { arg, version: None }, true)
            }
            (Seen::Other(arg), _) => (Facts { arg, version: None }, false),
        })
    }

    /// `argument <position> (<name>) of <kernel>`, for messages.
    fn argument_name(&self, position: usize) -> String {
        let name = self.params.get(position).map_or("?", |(n, _)| n.as_str());
        format!("argument {position} ({name}) of {}", self.name)
    }
}

/// The first look at a buffer object: what says whether it is as an earlier launch saw it.
enum Seen {
    /// An exact torch tensor: its address and in-place change count (`None` when it has
    /// none to read, so nothing recalled is trusted).
    Tensor { address: u64, version: Option<i64> },
    /// Any other object, read in full (only its pages can be known from before).
    Other(HostArg),
}

/// `elements × item size` of a tensor-like object, from its shape and dtype.
fn len_from_shape(
    py: Python<'_>,
    arg: &Bound<'_, PyAny>,
    what: &dyn Fn() -> String,
) -> PyResult<usize> {
    let itemsize: usize = arg
        .getattr(intern!(py, "dtype"))
        .and_then(|d| d.getattr(intern!(py, "itemsize")))
        .and_then(|s| s.extract())
        .map_err(|_| PyTypeError::new_err(format!("{} has no dtype with an itemsize", what())))?;
    let mut elements: usize = 1;
    for dim in arg.getattr(intern!(py, "shape"))?.try_iter()? {
        let dim: usize = dim?.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "{} has a negative or non-integer dimension",
                what()
            ))
        })?;
        elements = elements
            .checked_mul(dim)
            .ok_or_else(|| PyValueError::new_err(format!("{} is too large", what())))?;
    }
    elements
        .checked_mul(itemsize)
        .ok_or_else(|| PyValueError::new_err(format!("{} is too large", what())))
}

/// A tensor-like Python object (`data_ptr()`, `nbytes` or `shape` and `dtype`, and
/// `is_contiguous()` where it has one) as a host buffer; `what` names it in errors. The object
/// must stay alive while the buffer is used.
pub(crate) fn host_arg(
    py: Python<'_>,
    arg: &Bound<'_, PyAny>,
    what: &dyn Fn() -> String,
) -> PyResult<HostArg> {
    let address = data_ptr(py, arg, what)?;
    // An object that can be read-only says so NumPy's way (`flags.writeable`: numpy arrays,
    // SharedBuffer); torch tensors cannot, and memory that is mapped read-only behind a
    // writable-looking object is found by the dispatch's page probe.
    let writable = is_torch_tensor(arg) || declared_writable(py, arg)?;
    host_arg_at(py, arg, address, writable, what)
}

/// `data_ptr()` of a tensor-like object.
fn data_ptr(py: Python<'_>, arg: &Bound<'_, PyAny>, what: &dyn Fn() -> String) -> PyResult<u64> {
    if arg.is_none() {
        return Err(PyTypeError::new_err(format!(
            "{} is None; the NPU needs a tensor (an object with data_ptr(), dtype and shape)",
            what()
        )));
    }
    address(arg.call_method0(intern!(py, "data_ptr")), arg, what)
}

/// The address a `data_ptr()` call of `arg` returned; what it raised, if it raised, is in the
/// error (torch says why a tensor has no address, e.g. one without storage).
fn address(
    returned: PyResult<Bound<'_, PyAny>>,
    arg: &Bound<'_, PyAny>,
    what: &dyn Fn() -> String,
) -> PyResult<u64> {
    let not_a_tensor = |raised: Option<PyErr>| {
        let type_name = arg
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        // An object without `data_ptr` is simply not a tensor; one whose `data_ptr()` raised
        // says why it has no address.
        let cause = match raised {
            Some(e) if !e.is_instance_of::<PyAttributeError>(arg.py()) => {
                format!("; its data_ptr() raised {e}")
            }
            _ => String::new(),
        };
        PyTypeError::new_err(format!(
            "{} must be a tensor (an object with data_ptr(), dtype and shape), got {type_name}{cause}",
            what(),
        ))
    };
    let returned = match returned {
        Ok(returned) => returned,
        // Ctrl-C (or `SystemExit`) while a `data_ptr()` written in Python ran is not the
        // argument's fault: it goes up as it was raised.
        Err(e) if !e.is_instance_of::<PyException>(arg.py()) => return Err(e),
        Err(e) => return Err(not_a_tensor(Some(e))),
    };
    // As a C long (64 bits here), whose conversion is cheaper than an unsigned long long's
    // on the Pythons we support; user-space addresses are below 2^63.
    returned
        .extract::<i64>()
        .ok()
        .and_then(|p| u64::try_from(p).ok())
        .ok_or_else(|| not_a_tensor(None))
}

/// The host buffer of a tensor-like object whose `data_ptr()` is `address`: its contiguity
/// checked and its length read.
fn host_arg_at(
    py: Python<'_>,
    arg: &Bound<'_, PyAny>,
    address: u64,
    writable: bool,
    what: &dyn Fn() -> String,
) -> PyResult<HostArg> {
    if let Ok(contiguous) = arg.call_method0(intern!(py, "is_contiguous"))
        && !contiguous.is_truthy()?
    {
        return Err(PyValueError::new_err(format!(
            "{} is not contiguous; the NPU reads elements × item size bytes from its start: \
             pass a contiguous tensor (e.g. x.contiguous())",
            what()
        )));
    }
    // elements × item size: `nbytes` where the object has it (torch, numpy and
    // SharedBuffer: one attribute read), else from shape and dtype.
    let len = match arg
        .getattr(intern!(py, "nbytes"))
        .and_then(|n| n.extract::<usize>())
    {
        Ok(n) => n,
        Err(_) => len_from_shape(py, arg, what)?,
    };
    if len == 0 {
        return Err(PyValueError::new_err(format!(
            "{} is empty; the NPU cannot take a zero-size buffer",
            what()
        )));
    }
    // That data_ptr() addresses shape × itemsize bytes is the tensor protocol's contract
    // (torch, numpy-backed SharedBuffer); a strided view is refused above whenever the
    // object can say so (is_contiguous()).
    HostArg::from_foreign(address as usize, len, writable)
        .ok_or_else(|| PyValueError::new_err(format!("{} has a null data pointer", what())))
}

/// `torch.Tensor` itself (not a subclass), once torch has been imported by someone (never
/// imported here).
fn is_torch_tensor(arg: &Bound<'_, PyAny>) -> bool {
    TorchReads::get(arg.py()).is_some_and(|r| r.is_tensor(arg))
}

/// What the object says NumPy's way (`flags.writeable`); writable when it says nothing.
fn declared_writable(py: Python<'_>, arg: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(match arg.getattr_opt(intern!(py, "flags"))? {
        Some(flags) => match flags.getattr_opt(intern!(py, "writeable"))? {
            Some(w) => w.is_truthy()?,
            None => true,
        },
        None => true,
    })
}

/// The ttsharedir text Triton passes as the kernel "function".
fn ttsharedir_text(function: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = function.cast::<PyBytes>() {
        Ok(String::from_utf8_lossy(b.as_bytes()).into_owned())
    } else if let Ok(s) = function.cast::<PyString>() {
        Ok(s.to_str()?.to_owned())
    } else {
        Err(PyTypeError::new_err(
            "the kernel function handle must be the ttsharedir text (bytes); was the kernel \
             compiled by the NPU backend?",
        ))
    }
}

/// `(dispatches, seconds)`: how many kernels this thread has dispatched and the device time
/// of the last one (the benchmarker's clock).
#[pyfunction]
fn last_dispatch() -> (u64, f64) {
    let (count, ns) = LAST_DISPATCH.with(|d| d.get());
    (count, ns as f64 * 1e-9)
}

/// Releases every loaded kernel and the runtimes' device state: the HSA queue and its hardware
/// context, XRT's hardware contexts. Registered with Python's `atexit`, because the
/// process-wide runtimes are never dropped: without it the device state would go only when the
/// driver notices that the process ended. Launching again afterwards loads again.
#[pyfunction]
fn release_device_state(py: Python<'_>) {
    py.detach(npu_driver::memo::release_all);
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Launcher>()?;
    m.add_function(wrap_pyfunction!(last_dispatch, m)?)?;
    let release = wrap_pyfunction!(release_device_state, m)?;
    m.py()
        .import("atexit")?
        .call_method1("register", (&release,))?;
    m.add_function(release)?;
    Ok(())
}
