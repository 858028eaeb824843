//! Loading hsaco code objects: reader → executable → external variables → load → freeze →
//! kernel symbol → kernel object. Every failure path releases what was made before it.

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;

use hsa_sys::*;

use super::memory::DeviceMemory;
use super::session::Session;
use crate::RuntimeError;

/// Where the code object comes from.
#[derive(Debug, Clone, Copy)]
pub enum CodeSource<'a> {
    /// A file, read by ROCr through a file descriptor.
    File(&'a Path),
    /// Bytes in memory.
    Bytes(&'a [u8]),
}

/// An external variable the code object relocates against: the runtime allocates `size`
/// bytes of device-visible memory and defines `name` at that address before loading.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variable {
    pub name: String,
    pub size: u64,
}

/// A loaded, frozen executable and the variables it was given. Dropping it destroys the
/// executable (ROCr frees the device copies of the code), then frees the variables.
pub(crate) struct LoadedCode {
    session: Arc<Session>,
    executable: hsa_executable_t,
    variables: Vec<(String, DeviceMemory)>,
}

impl Drop for LoadedCode {
    fn drop(&mut self) {
        // SAFETY: created by hsa_executable_create_alt and destroyed only here.
        let rc = unsafe { self.session.api().hsa_executable_destroy(self.executable) };
        if rc != HSA_STATUS_SUCCESS {
            tracing::warn!(
                "hsa_executable_destroy failed: {}",
                self.session.lib.status_text(rc)
            );
        }
        self.variables.clear();
    }
}

/// The backend state of a [`crate::Program`] loaded by the HSA runtime.
pub struct HsaKernel {
    pub(crate) runtime_id: u64,
    pub(crate) code: Arc<LoadedCode>,
    pub(crate) kernel_object: u64,
    /// `KERNARG_SEGMENT_SIZE`: 16 bytes per buffer argument.
    pub(crate) kernarg_size: u32,
}

impl HsaKernel {
    /// The device address and size of an external variable defined for this kernel.
    pub fn variable(&self, name: &str) -> Option<(*mut u8, usize)> {
        self.code
            .variables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, m)| (m.ptr(), m.len()))
    }

    /// The kernel object handle ROCr gave for the symbol.
    pub fn kernel_object(&self) -> u64 {
        self.kernel_object
    }
}

struct Reader<'a> {
    session: &'a Session,
    handle: hsa_code_object_reader_t,
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        // SAFETY: created by hsa_code_object_reader_create_* and destroyed only here.
        unsafe {
            self.session
                .api()
                .hsa_code_object_reader_destroy(self.handle)
        };
    }
}

fn load_error(kernel: &str, reason: impl Into<String>) -> RuntimeError {
    RuntimeError::Load {
        kernel: kernel.to_owned(),
        reason: reason.into(),
    }
}

/// Loads `kernel_name` from `source` with `variables` defined; `what` names the source.
pub(crate) fn load(
    session: &Arc<Session>,
    source: CodeSource<'_>,
    what: &str,
    kernel_name: &str,
    variables: &[Variable],
) -> Result<(Arc<LoadedCode>, u64, u32), RuntimeError> {
    let api = session.api();
    let lib = session.lib;
    let status_error = |call: &str, rc: hsa_status_t| {
        load_error(
            kernel_name,
            format!("{call} on {what} failed: {}", lib.status_text(rc)),
        )
    };
    let c_kernel = CString::new(kernel_name)
        .map_err(|_| load_error(kernel_name, "the kernel name contains a NUL byte"))?;

    let mut reader = hsa_code_object_reader_t { handle: 0 };
    // The file stays open until the reader is destroyed.
    let file;
    let rc = match source {
        CodeSource::File(path) => {
            file = std::fs::File::open(path).map_err(|e| {
                load_error(kernel_name, format!("cannot open {}: {e}", path.display()))
            })?;
            // SAFETY: an open descriptor and a valid out pointer.
            unsafe { api.hsa_code_object_reader_create_from_file(file.as_raw_fd(), &mut reader) }
        }
        CodeSource::Bytes(bytes) => {
            if bytes.is_empty() {
                return Err(load_error(kernel_name, format!("{what} is empty")));
            }
            // SAFETY: the bytes outlive the reader (destroyed before this function returns).
            unsafe {
                api.hsa_code_object_reader_create_from_memory(
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    &mut reader,
                )
            }
        }
    };
    if rc != HSA_STATUS_SUCCESS {
        return Err(status_error("hsa_code_object_reader_create", rc));
    }
    let reader = Reader {
        session,
        handle: reader,
    };

    let mut executable = hsa_executable_t { handle: 0 };
    // SAFETY: valid out pointer; options NULL as ROCr's AIE tests pass.
    let rc = unsafe {
        api.hsa_executable_create_alt(
            HSA_PROFILE_FULL,
            HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
            core::ptr::null(),
            &mut executable,
        )
    };
    if rc != HSA_STATUS_SUCCESS {
        return Err(status_error("hsa_executable_create_alt", rc));
    }
    let mut code = LoadedCode {
        session: session.clone(),
        executable,
        variables: Vec::new(),
    };

    // External variables must exist before the code that relocates against them is loaded.
    for v in variables {
        let c_name = CString::new(v.name.as_str()).map_err(|_| {
            load_error(
                kernel_name,
                format!("variable name {:?} contains NUL", v.name),
            )
        })?;
        let size = usize::try_from(v.size)
            .ok()
            .filter(|s| *s > 0)
            .ok_or_else(|| {
                load_error(
                    kernel_name,
                    format!(
                        "variable {:?} has size {}; it needs at least one byte",
                        v.name, v.size
                    ),
                )
            })?;
        let memory = DeviceMemory::allocate(session, session.pools.data, size)?;
        // SAFETY: live executable, NUL-terminated name, address of a pool allocation.
        let rc = unsafe {
            api.hsa_executable_agent_global_variable_define(
                executable,
                session.agent,
                c_name.as_ptr(),
                memory.ptr().cast(),
            )
        };
        code.variables.push((v.name.clone(), memory));
        if rc != HSA_STATUS_SUCCESS {
            return Err(status_error(&format!("defining variable {:?}", v.name), rc));
        }
    }

    // SAFETY: live executable and reader; options NULL; the loaded-object out pointer may be NULL.
    let rc = unsafe {
        api.hsa_executable_load_agent_code_object(
            executable,
            session.agent,
            reader.handle,
            core::ptr::null(),
            core::ptr::null_mut(),
        )
    };
    if rc != HSA_STATUS_SUCCESS {
        let agent = &session.agent_name;
        let reason = match rc {
            HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS => format!(
                "{what} has no code for this NPU ({agent}): it was built for another NPU \
                 generation; rebuild it for {agent} ({})",
                lib.status_text(rc)
            ),
            HSA_STATUS_ERROR_INVALID_CODE_OBJECT => format!(
                "ROCr refused {what} as a malformed AIE code object ({}); check it with \
                 `triton-npu hsaco dump`",
                lib.status_text(rc)
            ),
            HSA_STATUS_ERROR_VARIABLE_UNDEFINED => format!(
                "{what} relocates against an external variable that was not defined ({}); pass \
                 each variable the kernel needs (e.g. scratch-pad-ctrl) with its size",
                lib.status_text(rc)
            ),
            _ => format!(
                "hsa_executable_load_agent_code_object on {what} failed: {}",
                lib.status_text(rc)
            ),
        };
        return Err(load_error(kernel_name, reason));
    }
    // SAFETY: live executable; options NULL.
    let rc = unsafe { api.hsa_executable_freeze(executable, core::ptr::null()) };
    if rc != HSA_STATUS_SUCCESS {
        return Err(status_error("hsa_executable_freeze", rc));
    }
    let mut symbol = hsa_executable_symbol_t { handle: 0 };
    // SAFETY: frozen executable, NUL-terminated name, the agent, a valid out pointer.
    let rc = unsafe {
        api.hsa_executable_get_symbol_by_name(
            executable,
            c_kernel.as_ptr(),
            &session.agent,
            &mut symbol,
        )
    };
    if rc == HSA_STATUS_ERROR_INVALID_SYMBOL_NAME {
        return Err(load_error(
            kernel_name,
            format!(
                "{what} has no kernel named {kernel_name:?} for {}; full-ELF kernels are named \
                 `main:<instance>`, PdiInsts kernels by their Triton name (list them with \
                 `triton-npu hsaco dump`)",
                session.agent_name
            ),
        ));
    }
    if rc != HSA_STATUS_SUCCESS {
        return Err(status_error("hsa_executable_get_symbol_by_name", rc));
    }
    let mut kernel_object = 0u64;
    // SAFETY: KERNEL_OBJECT writes a uint64_t.
    let rc = unsafe {
        api.hsa_executable_symbol_get_info(
            symbol,
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
            (&mut kernel_object as *mut u64).cast(),
        )
    };
    if rc != HSA_STATUS_SUCCESS {
        return Err(status_error(
            "hsa_executable_symbol_get_info(KERNEL_OBJECT)",
            rc,
        ));
    }
    if kernel_object == 0 {
        return Err(load_error(
            kernel_name,
            "ROCr returned a null kernel object after freezing",
        ));
    }
    let mut kernarg_size = 0u32;
    // SAFETY: KERNARG_SEGMENT_SIZE writes a uint32_t.
    let rc = unsafe {
        api.hsa_executable_symbol_get_info(
            symbol,
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
            (&mut kernarg_size as *mut u32).cast(),
        )
    };
    if rc != HSA_STATUS_SUCCESS {
        kernarg_size = 0;
    }
    drop(reader);
    Ok((Arc::new(code), kernel_object, kernarg_size))
}
