//! Chains for `triton_npu.multilaunch`: `ChainBuilder` (add ops, stitch, compile),
//! `CompiledChain` (the cache entry) and `ChainRunner` (dispatch over persistent buffers).
//!
//! Python hands buffers over as flat `uint8` numpy arrays (views of the caller's memory, made
//! by `triton_npu.multilaunch`); their `__array_interface__` gives the address, and the
//! arrays, held by the call's arguments, keep the memory alive while the dispatch runs with
//! the GIL released.
//!
//! Every method that takes a Rust lock releases the GIL first: a thread holding such a lock
//! may log, and logging reaches Python (`crate::logging`), so waiting for the lock with the
//! GIL held could deadlock.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use npu_driver::chain::{ChainBuilder, ChainRunner, CompiledChain, Launches, RunRequest};
use npu_driver::{DriverError, Host};
use npu_runtime::HostArg;
use npu_target::{Config, NpuVersion, OutputFormat, RuntimeKind};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::errors::{config_error, driver_error};
use crate::host::host_from;

/// Bad chain input is a `ValueError` (`NPUInputError`), as upstream raises it.
fn chain_error(e: DriverError) -> PyErr {
    driver_error(e)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The configuration a chain uses: the process's, with the chain's runtime and IR directory.
fn chain_config(runtime: Option<RuntimeKind>, air_project: &Option<PathBuf>) -> PyResult<Config> {
    let mut config = Config::current().map_err(config_error)?;
    if let Some(runtime) = runtime {
        config.runtime = runtime;
    }
    if air_project.is_some() {
        config.air_project_path = air_project.clone();
    }
    Ok(config)
}

fn parse_runtime(runtime: Option<&str>) -> PyResult<Option<RuntimeKind>> {
    runtime
        .map(|r| RuntimeKind::parse_named(r, "the runtime argument").map_err(config_error))
        .transpose()
}

/// `(x[, y[, z]])` padded with 1s.
fn grid_of(grid: &Bound<'_, PyAny>) -> PyResult<[u32; 3]> {
    let values: Vec<i64> = grid
        .extract()
        .or_else(|_| grid.extract::<i64>().map(|g| vec![g]))
        .map_err(|_| PyTypeError::new_err("grid must be an int or a tuple of 1 to 3 ints"))?;
    if values.is_empty() || values.len() > 3 {
        return Err(PyValueError::new_err(format!(
            "grid must have 1 to 3 dimensions, got {values:?}"
        )));
    }
    let mut out = [1u32; 3];
    for (slot, v) in out.iter_mut().zip(&values) {
        *slot = u32::try_from(*v)
            .map_err(|_| PyValueError::new_err(format!("grid {values:?} has a negative size")))?;
    }
    Ok(out)
}

/// Upstream passes actual sizes as the text `"M,N,1"`; a tuple works too.
fn actual_sizes_of(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<[u64; 3]>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let parts: Vec<u64> = if let Ok(text) = value.extract::<String>() {
        text.split(',')
            .map(|p| p.trim().parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| PyValueError::new_err(format!("actual_sizes {text:?} is not \"M,N,K\"")))?
    } else {
        value.extract().map_err(|_| {
            PyTypeError::new_err("actual_sizes must be \"M,N,K\" or a tuple of three ints")
        })?
    };
    match parts.as_slice() {
        [m, n, k] => Ok(Some([*m, *n, *k])),
        _ => Err(PyValueError::new_err(format!(
            "actual_sizes needs three sizes, got {parts:?}"
        ))),
    }
}

fn text_of(asm_src: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = asm_src.cast::<PyBytes>() {
        return String::from_utf8(b.as_bytes().to_vec())
            .map_err(|_| PyValueError::new_err("the ttsharedir bytes are not UTF-8 text"));
    }
    if let Ok(s) = asm_src.cast::<PyString>() {
        return Ok(s.to_str()?.to_owned());
    }
    Err(PyTypeError::new_err(format!(
        "asm_src must be the ttsharedir text (str or bytes), got {}",
        asm_src.get_type().name()?
    )))
}

fn parse_format(f: &str) -> PyResult<OutputFormat> {
    OutputFormat::parse(f).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown output format {f:?}; valid: elf, xclbin, pdi"
        ))
    })
}

/// `MultiLaunchBuilder`'s native half.
#[pyclass(module = "triton_npu._native", name = "ChainBuilder")]
pub struct PyChainBuilder {
    inner: Mutex<ChainBuilder>,
    runtime: Option<RuntimeKind>,
    host: Host,
    air_project: Option<PathBuf>,
}

#[pymethods]
impl PyChainBuilder {
    #[new]
    #[pyo3(signature = (name, runtime = None, host = None, air_project_path = None))]
    fn new(
        name: &str,
        runtime: Option<&str>,
        host: Option<&Bound<'_, PyDict>>,
        air_project_path: Option<PathBuf>,
    ) -> PyResult<PyChainBuilder> {
        Ok(PyChainBuilder {
            inner: Mutex::new(ChainBuilder::new(name).map_err(chain_error)?),
            runtime: parse_runtime(runtime)?,
            host: host_from(host)?,
            air_project: air_project_path,
        })
    }

    /// Adds the next op (nothing is compiled yet); `arg_map` maps each buffer parameter of
    /// the kernel (pointer arguments, from 0) to a combined index.
    #[pyo3(signature = (asm_src, grid, arg_map, transform_script = None, actual_sizes = None))]
    fn add_op(
        &self,
        py: Python<'_>,
        asm_src: &Bound<'_, PyAny>,
        grid: &Bound<'_, PyAny>,
        arg_map: &Bound<'_, PyAny>,
        transform_script: Option<PathBuf>,
        actual_sizes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let text = text_of(asm_src)?;
        let grid = grid_of(grid)?;
        let items = arg_map.call_method0("items").map_err(|_| {
            PyTypeError::new_err("arg_map must be a dict {op buffer index: combined index}")
        })?;
        let mut pairs = Vec::new();
        for item in items.try_iter()? {
            let (param, combined): (i64, i64) = item?
                .extract()
                .map_err(|_| PyTypeError::new_err("arg_map keys and values must be ints"))?;
            let index = |v: i64| {
                usize::try_from(v).map_err(|_| {
                    PyValueError::new_err(format!("arg_map has a negative index ({v})"))
                })
            };
            pairs.push((index(param)?, index(combined)?));
        }
        if let Some(script) = &transform_script
            && !script.is_file()
        {
            return Err(PyValueError::new_err(format!(
                "transform_script {} is not a file",
                script.display()
            )));
        }
        let actual_sizes = actual_sizes_of(actual_sizes)?;
        py.detach(|| lock(&self.inner).add_op(&text, grid, &pairs, transform_script, actual_sizes))
            .map_err(chain_error)
    }

    /// Type strings of the combined arguments, by combined index.
    fn combined_arg_types(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| lock(&self.inner).combined_arg_types())
            .map_err(chain_error)
    }

    /// Lowers every op and stitches them: the module aircc would compile.
    fn build_module_text(&self, py: Python<'_>) -> PyResult<String> {
        let config = chain_config(self.runtime, &self.air_project)?;
        crate::interrupt::detach_interruptible(py, || {
            let builder = lock(&self.inner).clone();
            builder.build_module_text(&config, &self.host)
        })?
        .map_err(chain_error)
    }

    /// Compiles the chain (or finds it in the cache).
    #[pyo3(signature = (output_format = None))]
    fn compile(&self, py: Python<'_>, output_format: Option<&str>) -> PyResult<PyCompiledChain> {
        let format = output_format.map(parse_format).transpose()?;
        let config = chain_config(self.runtime, &self.air_project)?;
        let (name, compiled) = crate::interrupt::detach_interruptible(py, || {
            let builder = lock(&self.inner).clone();
            let compiled = builder.compile(&config, &self.host, format)?;
            Ok((builder.name().to_owned(), compiled))
        })?
        .map_err(chain_error)?;
        Ok(PyCompiledChain {
            name,
            inner: Arc::new(compiled),
            runtime: config.runtime,
        })
    }

    #[getter]
    fn name(&self, py: Python<'_>) -> String {
        py.detach(|| lock(&self.inner).name().to_owned())
    }

    #[getter]
    fn num_ops(&self, py: Python<'_>) -> usize {
        py.detach(|| lock(&self.inner).ops().len())
    }

    /// The ops added so far, in order, as dicts (upstream's `ops`).
    #[getter]
    fn ops<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let ops = lock(&self.inner).ops().to_vec();
        ops.iter()
            .enumerate()
            .map(|(k, op)| {
                let d = PyDict::new(py);
                d.set_item("prefix", format!("op{k}"))?;
                d.set_item("kernel", &op.kernel)?;
                d.set_item("asm_src", op.linalg.text())?;
                d.set_item("grid", op.grid.to_vec())?;
                let arg_map = PyDict::new(py);
                for (param, combined) in op.arg_map.iter().enumerate() {
                    arg_map.set_item(param, combined)?;
                }
                d.set_item("arg_map", arg_map)?;
                d.set_item("arg_types", op.buffer_types.clone())?;
                d.set_item("transform_script", op.transform_script.clone())?;
                d.set_item("actual_sizes", op.actual_sizes.map(|s| s.to_vec()))?;
                Ok(d)
            })
            .collect()
    }

    /// The key of the cache entry the chain compiles into (upstream's `cache_key`); no tool
    /// runs. `output_format` and `npu_version` default to what `compile` would use.
    #[pyo3(signature = (output_format = None, npu_version = None))]
    fn cache_key(
        &self,
        py: Python<'_>,
        output_format: Option<&str>,
        npu_version: Option<&str>,
    ) -> PyResult<String> {
        let config = chain_config(self.runtime, &self.air_project)?;
        let target = match npu_version {
            Some(v) => NpuVersion::parse(v).ok_or_else(|| {
                PyValueError::new_err(format!("unknown NPU version {v:?}; valid: npu1, npu2"))
            })?,
            None => py
                .detach(|| npu_driver::pipeline::detect_target(&config, &self.host))
                .map_err(chain_error)?,
        };
        let format = match output_format {
            Some(f) => parse_format(f)?,
            None => OutputFormat::resolve(config.output_format, config.runtime, target)
                .map_err(|e| chain_error(e.into()))?,
        };
        py.detach(|| {
            let builder = lock(&self.inner).clone();
            builder.cache_key(&config, &self.host, format, target)
        })
        .map_err(chain_error)
    }
}

/// A compiled chain in the cache; holding it keeps the entry from eviction.
#[pyclass(module = "triton_npu._native", name = "CompiledChain", frozen)]
pub struct PyCompiledChain {
    name: String,
    inner: Arc<CompiledChain>,
    runtime: RuntimeKind,
}

#[pymethods]
impl PyCompiledChain {
    /// The full ELF of a chain compiled as one (`None` for a chain compiled op by op).
    #[getter]
    fn elf_path(&self) -> Option<String> {
        self.inner.elf_path().map(|p| p.display().to_string())
    }

    /// The symbol the runtime looks up in the full ELF (`main:<instance>`); `None` for a
    /// chain compiled op by op.
    #[getter]
    fn kernel_name(&self) -> Option<&str> {
        match &self.inner.launches {
            Launches::Stitched(c) => Some(&c.symbol),
            Launches::PerOp(_) => None,
        }
    }

    /// The output format it was compiled to (`elf`, `xclbin`, `pdi`).
    #[getter]
    fn output_format(&self) -> &'static str {
        self.inner.format.as_str()
    }

    /// Each op's binary (`aie.xclbin`/`aie.pdi`), in order, for a chain compiled op by op
    /// (empty for a full ELF).
    #[getter]
    fn bin_paths(&self) -> Vec<String> {
        let files = self.inner.op_files();
        files.iter().map(|(b, _)| b.display().to_string()).collect()
    }

    /// Each op's instruction stream (`insts.bin`), in order, for a chain compiled op by op.
    #[getter]
    fn insts_paths(&self) -> Vec<String> {
        let files = self.inner.op_files();
        files.iter().map(|(_, i)| i.display().to_string()).collect()
    }

    #[getter]
    fn cache_dir(&self) -> String {
        self.inner.dir().display().to_string()
    }

    /// The stitched AIR module aircc compiled (`None` for a chain compiled op by op).
    #[getter]
    fn module_path(&self) -> Option<String> {
        self.inner.module_path().map(|p| p.display().to_string())
    }

    #[getter]
    fn num_args(&self) -> usize {
        self.inner.num_args
    }

    #[getter]
    fn target(&self) -> &'static str {
        self.inner.target.as_str()
    }

    #[getter]
    fn runtime(&self) -> &'static str {
        self.runtime.as_str()
    }

    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
}

/// `MultiLaunchRunner`'s native half.
#[pyclass(module = "triton_npu._native", name = "ChainRunner", frozen)]
pub struct PyChainRunner {
    inner: Mutex<Option<Arc<ChainRunner>>>,
    name: String,
    /// The runtime it dispatches on, for the per-runtime dispatch counts.
    runtime: RuntimeKind,
}

/// The ops of a chain compiled op by op, from the files `compile` returned: they must be the
/// entry's own `op<k>` files, in order, as its manifest lists them.
fn per_op_launches(bins: &[PathBuf], insts: &[PathBuf]) -> PyResult<(Launches, usize, String)> {
    let first = bins.first().ok_or_else(|| {
        PyValueError::new_err("ChainRunner(bin_paths, insts_paths): bin_paths is empty")
    })?;
    let dir = first
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let (ops, num_args) = npu_driver::chain::ops_from_dir(&dir).map_err(chain_error)?;
    let expected = npu_driver::chain::op_files(&ops);
    let given: Vec<(PathBuf, PathBuf)> = bins.iter().cloned().zip(insts.iter().cloned()).collect();
    if bins.len() != insts.len() || given != expected {
        return Err(PyValueError::new_err(format!(
            "these are not the files of the chain compiled in {}: pass the (bin_paths, \
             insts_paths) MultiLaunchBuilder.compile() returned, one per op in order",
            dir.display()
        )));
    }
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((Launches::PerOp(ops), num_args, name))
}

/// A flat, C-contiguous `uint8` numpy array's memory.
fn region(obj: &Bound<'_, PyAny>, what: &str, writable: bool) -> PyResult<HostArg> {
    let bad = || {
        PyTypeError::new_err(format!(
            "{what} must be a flat uint8 numpy array (triton_npu.multilaunch makes them); got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    };
    let interface = obj.getattr("__array_interface__").map_err(|_| bad())?;
    let interface = interface.cast::<PyDict>().map_err(|_| bad())?;
    let item =
        |key: &str| -> PyResult<Bound<'_, PyAny>> { interface.get_item(key)?.ok_or_else(bad) };
    let typestr: String = item("typestr")?.extract()?;
    let shape: Vec<usize> = item("shape")?.extract()?;
    let contiguous = interface
        .get_item("strides")?
        .is_none_or(|s| s.is_none() || s.extract::<Vec<isize>>().is_ok_and(|v| v == [1]));
    if typestr != "|u1" || shape.len() != 1 || !contiguous {
        return Err(bad());
    }
    let (address, readonly): (usize, bool) = item("data")?.extract()?;
    if writable && readonly {
        return Err(PyValueError::new_err(format!(
            "{what} is read-only; the NPU writes it"
        )));
    }
    // numpy's interface describes `shape[0]` bytes at `address` owned by `obj`, which the
    // caller's argument list keeps alive for the whole call.
    HostArg::from_foreign(address, shape[0], !readonly)
        .ok_or_else(|| PyValueError::new_err(format!("{what} has a null data pointer")))
}

#[pymethods]
impl PyChainRunner {
    /// Loads a compiled chain: `ChainRunner(compiled)`; as upstream, `ChainRunner(elf_path,
    /// kernel_name)` for a chain's `aie.elf` in its cache entry; or `ChainRunner(bin_paths,
    /// insts_paths)` for a chain compiled op by op (what `compile("xclbin")` returned).
    #[new]
    #[pyo3(signature = (compiled_or_elf, kernel_name_or_insts = None, runtime = None, host = None))]
    fn new(
        py: Python<'_>,
        compiled_or_elf: &Bound<'_, PyAny>,
        kernel_name_or_insts: Option<&Bound<'_, PyAny>>,
        runtime: Option<&str>,
        host: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyChainRunner> {
        let host = host_from(host)?;
        let (launches, num_args, keep, name, runtime) = if let Ok(c) =
            compiled_or_elf.cast::<PyCompiledChain>()
        {
            let c = c.get();
            let runtime = parse_runtime(runtime)?.unwrap_or(c.runtime);
            (
                c.inner.launches.clone(),
                Some(c.inner.num_args),
                Some(c.inner.clone()),
                c.name.clone(),
                Some(runtime),
            )
        } else if let Ok(bins) = compiled_or_elf.extract::<Vec<PathBuf>>() {
            let insts: Vec<PathBuf> = kernel_name_or_insts
                .map(|i| i.extract())
                .transpose()
                .map_err(|_| {
                    PyTypeError::new_err(
                        "ChainRunner(bin_paths, insts_paths): insts_paths must be a list of paths",
                    )
                })?
                .ok_or_else(|| {
                    PyTypeError::new_err("ChainRunner(bin_paths, insts_paths): insts_paths missing")
                })?;
            let (launches, num_args, name) = per_op_launches(&bins, &insts)?;
            (
                launches,
                Some(num_args),
                None,
                name,
                parse_runtime(runtime)?,
            )
        } else {
            let elf: PathBuf = compiled_or_elf.extract().map_err(|_| {
                PyTypeError::new_err(
                    "ChainRunner takes a CompiledChain, (elf_path, kernel_name) or (bin_paths, \
                     insts_paths)",
                )
            })?;
            let kernel_name: String = kernel_name_or_insts
                .ok_or_else(|| {
                    PyTypeError::new_err("ChainRunner(elf_path, kernel_name): kernel_name missing")
                })?
                .extract()?;
            if elf.file_name() != Some(std::ffi::OsStr::new(npu_driver::artifacts::ELF)) {
                return Err(PyValueError::new_err(format!(
                    "{} is not a chain's {}; pass what MultiLaunchBuilder.compile() returned",
                    elf.display(),
                    npu_driver::artifacts::ELF
                )));
            }
            let dir = elf.parent().map(Path::to_path_buf).unwrap_or_default();
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let compiled = npu_driver::artifacts::Compiled::at(dir, OutputFormat::Elf, kernel_name);
            (
                Launches::Stitched(compiled),
                None,
                None,
                name,
                parse_runtime(runtime)?,
            )
        };
        let config = chain_config(runtime, &None)?;
        let runner = py
            .detach(|| ChainRunner::open(&config, &host, &name, &launches, num_args, keep))
            .map_err(chain_error)?;
        Ok(PyChainRunner {
            inner: Mutex::new(Some(Arc::new(runner))),
            name,
            runtime: config.runtime,
        })
    }

    /// One dispatch. `inputs`: one flat uint8 array (or None when bound) per combined
    /// argument; `outputs`: `(index, destination or None)`; `bound`: `(index, array)`.
    /// Returns `{"in_place", "staged", "device_time"}`.
    #[pyo3(signature = (inputs, bo_key, static_indices, intermediate_indices, outputs, bound, timeout = None))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<Option<Bound<'py, PyAny>>>,
        bo_key: &str,
        static_indices: Vec<usize>,
        intermediate_indices: Vec<usize>,
        outputs: Vec<(usize, Option<Bound<'py, PyAny>>)>,
        bound: Vec<(usize, Bound<'py, PyAny>)>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let runner = py.detach(|| lock(&self.inner).clone()).ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "the chain runner of {:?} is closed; open a new one",
                self.name
            ))
        })?;
        let inputs: Vec<Option<HostArg>> = inputs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                a.as_ref()
                    .map(|a| region(a, &format!("input {i}"), false))
                    .transpose()
            })
            .collect::<PyResult<_>>()?;
        let outputs: Vec<(usize, Option<HostArg>)> = outputs
            .iter()
            .map(|(i, d)| {
                let d = d
                    .as_ref()
                    .map(|d| region(d, &format!("the destination of output {i}"), true))
                    .transpose()?;
                Ok((*i, d))
            })
            .collect::<PyResult<_>>()?;
        let bound: Vec<(usize, HostArg)> = bound
            .iter()
            .map(|(i, b)| Ok((*i, region(b, &format!("bound buffer {i}"), true)?)))
            .collect::<PyResult<_>>()?;
        let timeout = timeout
            .map(|t| {
                Duration::try_from_secs_f64(t)
                    .map_err(|_| PyValueError::new_err(format!("timeout {t} is not a duration")))
            })
            .transpose()?;
        let request = RunRequest {
            bo_key,
            inputs: &inputs,
            bound: &bound,
            static_indices: &static_indices,
            intermediate_indices: &intermediate_indices,
            outputs: &outputs,
            timeout,
        };
        let report = crate::interrupt::detach_interruptible(py, || runner.run(&request))?
            .map_err(chain_error)?;
        crate::shared::record_dispatch(self.runtime, report.in_place.into(), report.staged.into());
        let out = PyDict::new(py);
        out.set_item("in_place", report.in_place)?;
        out.set_item("staged", report.staged)?;
        out.set_item("device_time", report.device_time.as_secs_f64())?;
        Ok(out)
    }

    /// Combined buffers the loaded code takes, if it says.
    #[getter]
    fn num_args(&self, py: Python<'_>) -> Option<usize> {
        py.detach(|| lock(&self.inner).as_ref().and_then(|r| r.num_args()))
    }

    /// Buffer sets alive (one per bo_key used).
    #[getter]
    fn buffer_sets(&self, py: Python<'_>) -> usize {
        py.detach(|| lock(&self.inner).as_ref().map_or(0, |r| r.buffer_sets()))
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| lock(&self.inner).is_none())
    }

    /// Frees the buffers and the loaded program (once no run uses them). Idempotent.
    fn close(&self, py: Python<'_>) {
        // Freeing calls into the runtime, which takes its locks: without the GIL.
        py.detach(|| {
            let runner = lock(&self.inner).take();
            drop(runner);
        });
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChainBuilder>()?;
    m.add_class::<PyCompiledChain>()?;
    m.add_class::<PyChainRunner>()?;
    Ok(())
}
