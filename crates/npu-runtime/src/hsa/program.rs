//! Loading hsaco code objects, one step per function: reader → executable → external variables
//! → load → freeze → kernel symbol. Each step's object frees itself on drop, so a failure at
//! any step releases what the earlier ones made.

use std::ffi::CString;
use std::path::Path;
use std::sync::Arc;

use super::session::Session;
use crate::RuntimeError;
use crate::raw::hsa::{CodeObjectReader, Executable, HsaError, HsaStatus, PoolAllocation};

/// Where the code object comes from.
#[derive(Debug, Clone, Copy)]
pub enum CodeSource<'a> {
    /// A file, read by ROCr through a file descriptor.
    File(&'a Path),
    /// Bytes in memory.
    Bytes(&'a [u8]),
}

/// An external variable the code object relocates against: the runtime allocates `size`
/// bytes in the agent's device heap and defines `name` at that address before loading.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variable {
    pub name: String,
    pub size: u64,
}

/// A loaded, frozen executable and the names of the variables it was given (its memory, in
/// the same order, lives in the executable).
pub(crate) struct LoadedCode {
    executable: Executable,
    variable_names: Vec<String>,
}

/// The runtime state of a [`crate::Program`] loaded by the HSA runtime.
pub struct HsaKernel {
    pub(crate) runtime_id: u64,
    pub(crate) code: Arc<LoadedCode>,
    pub(crate) kernel_object: u64,
    /// `KERNARG_SEGMENT_SIZE`: 16 bytes per buffer argument (0 when ROCr did not say).
    pub(crate) kernarg_size: u32,
    /// Decided at load: a kernel with external variables on an aie2p agent, whose firmware
    /// would not load it again for a repeated dispatch (see `dispatch::Target`).
    pub(crate) reload_each_dispatch: bool,
}

impl HsaKernel {
    /// The device address and size of an external variable defined for this kernel.
    pub fn variable(&self, name: &str) -> Option<(*mut u8, usize)> {
        let code = &self.code;
        let i = code.variable_names.iter().position(|n| n == name)?;
        code.executable
            .variables()
            .get(i)
            .map(|m| (m.as_ptr(), m.len()))
    }

    /// The kernel object handle ROCr gave for the symbol.
    pub fn kernel_object(&self) -> u64 {
        self.kernel_object
    }

    /// The kernarg segment size ROCr reported (0 when it did not).
    pub fn kernarg_size(&self) -> u32 {
        self.kernarg_size
    }
}

/// A loaded kernel: its code, kernel object and kernarg size.
pub(crate) struct Loaded {
    pub code: Arc<LoadedCode>,
    pub kernel_object: u64,
    pub kernarg_size: u32,
}

/// What is being loaded, for messages.
struct Job<'a> {
    session: &'a Session,
    /// The source, as messages name it (`the hsaco` or a path).
    what: &'a str,
    kernel: &'a str,
}

impl Job<'_> {
    fn refuse(&self, reason: impl Into<String>) -> RuntimeError {
        RuntimeError::Load {
            kernel: self.kernel.to_owned(),
            reason: reason.into(),
        }
    }

    /// A failed step, with the call and the source named.
    /// The device heap (64 MiB, one per driver) cannot take `what`: a resource error, so that
    /// the caller may let loaded programs go and load again.
    fn heap_full(&self, what: &str, text: &str) -> RuntimeError {
        RuntimeError::HardwareContext {
            kernel: self.kernel.to_owned(),
            reason: format!(
                "the device heap cannot hold {what} of {} (ROCr: {text}); release loaded kernels",
                self.what
            ),
        }
    }

    fn failed(&self, e: HsaError) -> RuntimeError {
        self.refuse(format!("{} on {} failed: {}", e.call, self.what, e.text))
    }
}

/// Loads `kernel_name` from `source` with `variables` defined; `what` names the source.
pub(crate) fn load(
    session: &Session,
    source: CodeSource<'_>,
    what: &str,
    kernel_name: &str,
    variables: &[Variable],
) -> Result<Loaded, RuntimeError> {
    let job = Job {
        session,
        what,
        kernel: kernel_name,
    };
    let c_kernel =
        CString::new(kernel_name).map_err(|_| job.refuse("the kernel name contains a NUL byte"))?;
    // The file stays open until the reader is gone.
    let file = match source {
        CodeSource::File(path) => Some(
            std::fs::File::open(path).map_err(|e| RuntimeError::reading(kernel_name, path, &e))?,
        ),
        CodeSource::Bytes(_) => None,
    };
    let reader = open_reader(&job, source, file.as_ref())?;
    let mut executable = Executable::new(&session.hsa).map_err(|e| job.failed(e))?;
    // External variables must exist before the code that relocates against them is loaded.
    let variable_names = define_variables(&job, &mut executable, variables)?;
    load_code(&job, &mut executable, &reader)?;
    executable.freeze().map_err(|e| job.failed(e))?;
    drop(reader);
    let (kernel_object, kernarg_size) = kernel_symbol(&job, &executable, &c_kernel)?;
    Ok(Loaded {
        code: Arc::new(LoadedCode {
            executable,
            variable_names,
        }),
        kernel_object,
        kernarg_size,
    })
}

fn open_reader<'a>(
    job: &Job<'_>,
    source: CodeSource<'a>,
    file: Option<&'a std::fs::File>,
) -> Result<CodeObjectReader<'a>, RuntimeError> {
    let hsa = &job.session.hsa;
    let reader = match (source, file) {
        (CodeSource::Bytes(bytes), _) => {
            if bytes.is_empty() {
                return Err(job.refuse(format!("{} is empty", job.what)));
            }
            CodeObjectReader::from_memory(hsa, bytes)
        }
        (CodeSource::File(_), Some(file)) => CodeObjectReader::from_file(hsa, file),
        (CodeSource::File(path), None) => {
            return Err(job.refuse(format!("{} was not opened", path.display())));
        }
    };
    reader.map_err(|e| {
        job.failed(HsaError {
            call: "hsa_code_object_reader_create".into(),
            ..e
        })
    })
}

/// Allocates and defines each variable; returns their names in definition order.
fn define_variables(
    job: &Job<'_>,
    executable: &mut Executable,
    variables: &[Variable],
) -> Result<Vec<String>, RuntimeError> {
    let session = job.session;
    let mut names = Vec::with_capacity(variables.len());
    for v in variables {
        let c_name = CString::new(v.name.as_str())
            .map_err(|_| job.refuse(format!("variable name {:?} contains NUL", v.name)))?;
        let size = usize::try_from(v.size)
            .ok()
            .filter(|s| *s > 0)
            .ok_or_else(|| {
                job.refuse(format!(
                    "variable {:?} has size {}; it needs at least one byte",
                    v.name, v.size
                ))
            })?;
        // The command processor reads external variables only from the device heap (the
        // device-SVM pool): one in the data pool loads, then every dispatch fails.
        let dev_heap = session.pools.dev_heap.ok_or_else(|| {
            job.refuse(format!(
                "variable {:?} must live in the AIE agent's device heap, and this ROCr reports \
                 no device-heap pool (COARSE_GRAINED with RUNTIME_ALLOC_REC_GRANULE 0)",
                v.name
            ))
        })?;
        let memory = PoolAllocation::new(&session.hsa, dev_heap, size).map_err(|e| {
            if e.status == HsaStatus::OutOfResources {
                job.heap_full(&format!("variable {:?} ({size} bytes)", v.name), &e.text)
            } else {
                e.into()
            }
        })?;
        executable
            .define_variable(session.agent, &c_name, memory)
            .map_err(|e| {
                job.failed(HsaError {
                    call: format!("defining variable {:?}", v.name).into(),
                    ..e
                })
            })?;
        names.push(v.name.clone());
    }
    Ok(names)
}

/// Loads the code object, explaining the refusals a user can act on.
fn load_code(
    job: &Job<'_>,
    executable: &mut Executable,
    reader: &CodeObjectReader<'_>,
) -> Result<(), RuntimeError> {
    let Err(e) = executable.load(job.session.agent, reader) else {
        return Ok(());
    };
    let (what, agent) = (job.what, &job.session.agent_name);
    let text = &e.text;
    let reason = match e.status {
        HsaStatus::IncompatibleArguments => format!(
            "{what} has no code for this NPU ({agent}): it was built for another NPU generation; \
             rebuild it for {agent} ({text})"
        ),
        HsaStatus::InvalidCodeObject => format!(
            "ROCr refused {what} as a malformed AIE code object ({text}); check it with \
             `triton-npu hsaco dump`"
        ),
        HsaStatus::VariableUndefined => format!(
            "{what} relocates against an external variable that was not defined ({text}); pass \
             each variable the kernel needs (e.g. scratch-pad-ctrl) with its size"
        ),
        HsaStatus::OutOfResources => return Err(job.heap_full("the code", text)),
        _ => return Err(job.failed(e)),
    };
    Err(job.refuse(reason))
}

/// The kernel object and kernarg size of `name` in the frozen executable.
fn kernel_symbol(
    job: &Job<'_>,
    executable: &Executable,
    name: &CString,
) -> Result<(u64, u32), RuntimeError> {
    let symbol = match executable.kernel(name, job.session.agent) {
        Ok(symbol) => symbol,
        Err(e) if e.status == HsaStatus::InvalidSymbolName => {
            return Err(job.refuse(format!(
                "{} has no kernel named {:?} for {}; full-ELF kernels are named \
                 `main:<instance>`, PdiInsts kernels by their Triton name (list them with \
                 `triton-npu hsaco dump`)",
                job.what, job.kernel, job.session.agent_name
            )));
        }
        Err(e) => return Err(job.failed(e)),
    };
    if symbol.kernel_object == 0 {
        return Err(job.refuse("ROCr returned a null kernel object after freezing"));
    }
    Ok((symbol.kernel_object, symbol.kernarg_size.unwrap_or(0)))
}
