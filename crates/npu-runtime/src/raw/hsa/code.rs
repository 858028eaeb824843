//! Code objects: readers, executables (agent variables, load, freeze) and kernel symbols.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use hsa_sys::*;

use super::{Agent, Hsa, HsaError, PoolAllocation};

/// A code-object reader over bytes or an open file, which it borrows for its whole life.
pub(crate) struct CodeObjectReader<'a> {
    hsa: Arc<Hsa>,
    handle: hsa_code_object_reader_t,
    _source: PhantomData<&'a [u8]>,
}

impl<'a> CodeObjectReader<'a> {
    pub fn from_memory(hsa: &Arc<Hsa>, bytes: &'a [u8]) -> Result<CodeObjectReader<'a>, HsaError> {
        let mut handle = hsa_code_object_reader_t { handle: 0 };
        // SAFETY: the bytes are borrowed for the reader's life; a valid out pointer.
        let rc = unsafe {
            hsa.api().hsa_code_object_reader_create_from_memory(
                bytes.as_ptr().cast(),
                bytes.len(),
                &mut handle,
            )
        };
        hsa.check("hsa_code_object_reader_create_from_memory", rc)?;
        Ok(CodeObjectReader {
            hsa: Arc::clone(hsa),
            handle,
            _source: PhantomData,
        })
    }

    /// ROCr reads the file through its descriptor, which stays open while the reader lives.
    pub fn from_file(
        hsa: &Arc<Hsa>,
        file: &'a std::fs::File,
    ) -> Result<CodeObjectReader<'a>, HsaError> {
        let mut handle = hsa_code_object_reader_t { handle: 0 };
        // SAFETY: an open descriptor, borrowed for the reader's life; a valid out pointer.
        let rc = unsafe {
            hsa.api()
                .hsa_code_object_reader_create_from_file(file.as_raw_fd(), &mut handle)
        };
        hsa.check("hsa_code_object_reader_create_from_file", rc)?;
        Ok(CodeObjectReader {
            hsa: Arc::clone(hsa),
            handle,
            _source: PhantomData,
        })
    }
}

impl Drop for CodeObjectReader<'_> {
    fn drop(&mut self) {
        // SAFETY: created by hsa_code_object_reader_create_* and destroyed only here.
        let rc = unsafe { self.hsa.api().hsa_code_object_reader_destroy(self.handle) };
        if let Err(e) = self.hsa.check("hsa_code_object_reader_destroy", rc) {
            tracing::warn!("{e}");
        }
    }
}

/// An executable. Dropping it destroys it (ROCr frees its device copies of the code); the
/// memory given to its agent variables must outlive it, which [`Executable::define_variable`]
/// ensures by keeping that memory until the executable is gone.
pub(crate) struct Executable {
    hsa: Arc<Hsa>,
    handle: hsa_executable_t,
    /// Memory defined as agent variables, freed after the executable is destroyed.
    variables: Vec<PoolAllocation>,
}

/// A kernel symbol of a frozen executable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KernelSymbol {
    /// `KERNEL_OBJECT`: the handle a dispatch packet names.
    pub kernel_object: u64,
    /// `KERNARG_SEGMENT_SIZE` (16 bytes per buffer argument), when ROCr reports it.
    pub kernarg_size: Option<u32>,
}

impl Executable {
    /// An empty executable (full profile, default rounding, no options, as ROCr's AIE tests
    /// make them).
    pub fn new(hsa: &Arc<Hsa>) -> Result<Executable, HsaError> {
        let mut handle = hsa_executable_t { handle: 0 };
        // SAFETY: a valid out pointer; options NULL.
        let rc = unsafe {
            hsa.api().hsa_executable_create_alt(
                HSA_PROFILE_FULL,
                HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                core::ptr::null(),
                &mut handle,
            )
        };
        hsa.check("hsa_executable_create_alt", rc)?;
        Ok(Executable {
            hsa: Arc::clone(hsa),
            handle,
            variables: Vec::new(),
        })
    }

    /// Defines the external variable `name` at `memory` for `agent`; the executable keeps the
    /// memory. Must come before the code that relocates against it is loaded.
    pub fn define_variable(
        &mut self,
        agent: Agent,
        name: &CStr,
        memory: PoolAllocation,
    ) -> Result<(), HsaError> {
        // SAFETY: a live executable, a NUL-terminated name, the address of a pool allocation
        // that this executable keeps until it is destroyed.
        let rc = unsafe {
            self.hsa.api().hsa_executable_agent_global_variable_define(
                self.handle,
                self.hsa.agent_handle(agent),
                name.as_ptr(),
                memory.as_ptr().cast(),
            )
        };
        self.variables.push(memory);
        self.hsa.check(
            format!("hsa_executable_agent_global_variable_define({name:?})"),
            rc,
        )
    }

    /// The memory of each defined variable, in definition order.
    pub fn variables(&self) -> &[PoolAllocation] {
        &self.variables
    }

    /// Loads the reader's code object for `agent`.
    pub fn load(&mut self, agent: Agent, reader: &CodeObjectReader<'_>) -> Result<(), HsaError> {
        // SAFETY: a live executable and reader; options NULL; the loaded-object out pointer
        // may be NULL.
        let rc = unsafe {
            self.hsa.api().hsa_executable_load_agent_code_object(
                self.handle,
                self.hsa.agent_handle(agent),
                reader.handle,
                core::ptr::null(),
                core::ptr::null_mut(),
            )
        };
        self.hsa.check("hsa_executable_load_agent_code_object", rc)
    }

    pub fn freeze(&mut self) -> Result<(), HsaError> {
        // SAFETY: a live executable; options NULL.
        let rc = unsafe {
            self.hsa
                .api()
                .hsa_executable_freeze(self.handle, core::ptr::null())
        };
        self.hsa.check("hsa_executable_freeze", rc)
    }

    /// The kernel `name` for `agent` (frozen executables only have kernel objects).
    pub fn kernel(&self, name: &CStr, agent: Agent) -> Result<KernelSymbol, HsaError> {
        let api = self.hsa.api();
        let agent = self.hsa.agent_handle(agent);
        let mut symbol = hsa_executable_symbol_t { handle: 0 };
        // SAFETY: a live executable, a NUL-terminated name, the agent, a valid out pointer.
        let rc = unsafe {
            api.hsa_executable_get_symbol_by_name(self.handle, name.as_ptr(), &agent, &mut symbol)
        };
        self.hsa.check("hsa_executable_get_symbol_by_name", rc)?;
        let mut kernel_object = 0u64;
        // SAFETY: KERNEL_OBJECT writes a uint64_t.
        let rc = unsafe {
            api.hsa_executable_symbol_get_info(
                symbol,
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
                (&mut kernel_object as *mut u64).cast(),
            )
        };
        self.hsa
            .check("hsa_executable_symbol_get_info(KERNEL_OBJECT)", rc)?;
        let mut kernarg_size = 0u32;
        // SAFETY: KERNARG_SEGMENT_SIZE writes a uint32_t.
        let rc = unsafe {
            api.hsa_executable_symbol_get_info(
                symbol,
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
                (&mut kernarg_size as *mut u32).cast(),
            )
        };
        Ok(KernelSymbol {
            kernel_object,
            kernarg_size: (rc == HSA_STATUS_SUCCESS).then_some(kernarg_size),
        })
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        // SAFETY: created by hsa_executable_create_alt and destroyed only here.
        let rc = unsafe { self.hsa.api().hsa_executable_destroy(self.handle) };
        if let Err(e) = self.hsa.check("hsa_executable_destroy", rc) {
            tracing::warn!("{e}");
        }
        // The variables' memory is freed after this, when the field drops.
    }
}
