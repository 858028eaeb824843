//! Code object readers, executables, symbols and kernel objects, with the order ROCr's AIE
//! loader relies on: variables defined before the code object is loaded, the executable frozen
//! before symbols are looked up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hsa_sys::*;
use npu_harness_program::Program;

use crate::hsaco::{self, Kernel};
use crate::memory;
use crate::state::{self, lock};

/// A loaded kernel as the queue sees it.
pub struct KernelObject {
    pub kernel: Kernel,
    /// The harness program the kernel's code carries, or why it has none.
    pub program: Result<Program, String>,
    /// The external variables the kernel relocates against: name, address the application
    /// defined, size the code object declares.
    pub variables: Vec<(String, usize, usize)>,
    /// A PdiInsts kernel's PDI as the loader placed it: (executable, offset in the blob pool).
    /// ROCr's PDI cache tells PDIs apart by where they were loaded.
    pub pdi: Option<(u64, usize)>,
}

/// Host-side descriptor whose address is the kernel object (ROCr's has version 1 first).
#[repr(C)]
struct Descriptor {
    version: u32,
    reserved: u32,
}

struct Executable {
    frozen: bool,
    loaded: bool,
    variables: HashMap<String, usize>,
    kernels: Vec<Kernel>,
    /// Kernel name → (symbol handle, kernel object address) once frozen.
    symbols: HashMap<String, (u64, u64)>,
    dev_heap_bytes: usize,
}

struct Symbol {
    name: String,
    kernel_object: u64,
    kernarg_size: u32,
}

#[derive(Default)]
struct Code {
    readers: HashMap<u64, Arc<Vec<u8>>>,
    executables: HashMap<u64, Executable>,
    symbols: HashMap<u64, Symbol>,
    kernel_objects: HashMap<u64, (Box<Descriptor>, Arc<KernelObject>)>,
}

static CODE: Mutex<Option<Code>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Code) -> R) -> R {
    f(lock(&CODE).get_or_insert_with(Code::default))
}

pub fn create_reader(bytes: Vec<u8>) -> u64 {
    let handle = state::next_handle();
    with(|c| c.readers.insert(handle, Arc::new(bytes)));
    handle
}

pub fn destroy_reader(handle: u64) -> hsa_status_t {
    match with(|c| c.readers.remove(&handle)) {
        Some(_) => HSA_STATUS_SUCCESS,
        None => HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER,
    }
}

pub fn create_executable() -> u64 {
    let handle = state::next_handle();
    with(|c| {
        c.executables.insert(
            handle,
            Executable {
                frozen: false,
                loaded: false,
                variables: HashMap::new(),
                kernels: Vec::new(),
                symbols: HashMap::new(),
                dev_heap_bytes: 0,
            },
        )
    });
    handle
}

pub fn destroy_executable(handle: u64) -> hsa_status_t {
    let Some(exe) = with(|c| {
        let exe = c.executables.remove(&handle)?;
        for (symbol, kernel_object) in exe.symbols.values() {
            c.symbols.remove(symbol);
            c.kernel_objects.remove(kernel_object);
        }
        Some(exe)
    }) else {
        return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
    };
    memory::release_dev_heap(exe.dev_heap_bytes);
    HSA_STATUS_SUCCESS
}

pub fn define_variable(exe: u64, name: &str, address: usize) -> hsa_status_t {
    with(|c| {
        let Some(e) = c.executables.get_mut(&exe) else {
            return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
        };
        if e.frozen {
            return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
        }
        if e.loaded {
            state::breach(&format!(
                "hsa_executable_agent_global_variable_define({name:?}) after a code object was \
                 loaded: variables must be defined before the code object that uses them is loaded"
            ));
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        if memory::pool_of_range(address, 1).is_none() {
            state::breach(&format!(
                "variable {name:?} at {address:#x} is not in memory allocated from an AIE pool"
            ));
            return HSA_STATUS_ERROR_INVALID_ALLOCATION;
        }
        if e.variables.contains_key(name) {
            return HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED;
        }
        e.variables.insert(name.to_owned(), address);
        HSA_STATUS_SUCCESS
    })
}

/// `hsa_executable_load_agent_code_object` for the AIE agent.
pub fn load(exe: u64, reader: u64, arch: &str, columns: u32) -> hsa_status_t {
    let Some(bytes) = with(|c| c.readers.get(&reader).cloned()) else {
        return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
    };
    let precheck = with(|c| match c.executables.get(&exe) {
        None => Err(HSA_STATUS_ERROR_INVALID_EXECUTABLE),
        Some(e) if e.frozen => Err(HSA_STATUS_ERROR_FROZEN_EXECUTABLE),
        Some(_) => Ok(()),
    });
    if let Err(status) = precheck {
        return status;
    }
    let kernels = match hsaco::read(&bytes, arch, columns) {
        Ok(k) => k,
        Err(refusal) => {
            state::device_error(&format!("load refused: {}", refusal.rule));
            return if refusal.incompatible {
                HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS
            } else {
                HSA_STATUS_ERROR_INVALID_CODE_OBJECT
            };
        }
    };
    let needed: usize = kernels
        .iter()
        .map(|k| k.code.bytes().len().next_multiple_of(64) + k.pdi_size.next_multiple_of(64))
        .sum();
    with(|c| {
        let Some(e) = c.executables.get_mut(&exe) else {
            return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
        };
        if let Some(k) = kernels
            .iter()
            .find(|k| e.kernels.iter().any(|l| l.name == k.name))
        {
            state::device_error(&format!(
                "load refused: kernel {:?} is already defined",
                k.name
            ));
            return HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED;
        }
        for k in &kernels {
            for v in &k.variables {
                let defined = e.variables.get(&v.name);
                let fits = defined
                    .is_some_and(|a| memory::pool_of_range(*a, (v.size as usize).max(1)).is_some());
                if !fits {
                    state::device_error(&format!(
                        "load refused: kernel {:?} needs the external variable {:?} ({} bytes) \
                         and it is {}; define it with hsa_executable_agent_global_variable_define \
                         before loading",
                        k.name,
                        v.name,
                        v.size,
                        if defined.is_some() {
                            "not that many bytes inside one allocation"
                        } else {
                            "not defined"
                        }
                    ));
                    // ROCr: undefined → VARIABLE_UNDEFINED; its st_size bytes not inside one
                    // allocation → INVALID_ALLOCATION (real-toolchain-rules.md §5).
                    return if defined.is_some() {
                        HSA_STATUS_ERROR_INVALID_ALLOCATION
                    } else {
                        HSA_STATUS_ERROR_VARIABLE_UNDEFINED
                    };
                }
            }
        }
        if let Err(status) = memory::reserve_dev_heap(needed) {
            return status;
        }
        e.dev_heap_bytes += needed;
        e.loaded = true;
        e.kernels.extend(kernels);
        HSA_STATUS_SUCCESS
    })
}

pub fn freeze(exe: u64) -> hsa_status_t {
    with(|c| {
        let Some(e) = c.executables.get_mut(&exe) else {
            return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
        };
        if e.frozen {
            return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
        }
        e.frozen = true;
        let mut made = Vec::new();
        for kernel in &e.kernels {
            let descriptor = Box::new(Descriptor {
                version: 1,
                reserved: 0,
            });
            let address = &*descriptor as *const Descriptor as u64;
            let symbol = state::next_handle();
            e.symbols.insert(kernel.name.clone(), (symbol, address));
            // Load checked that every variable is defined.
            let variables = kernel
                .variables
                .iter()
                .filter_map(|v| {
                    let address = *e.variables.get(&v.name)?;
                    Some((v.name.clone(), address, v.size as usize))
                })
                .collect();
            let object = KernelObject {
                program: crate::queue::program_of(kernel),
                kernel: kernel.clone(),
                variables,
                pdi: kernel.pdi_offset.map(|offset| (exe, offset)),
            };
            made.push((symbol, address, descriptor, object));
        }
        for (symbol, address, descriptor, object) in made {
            c.symbols.insert(
                symbol,
                Symbol {
                    name: object.kernel.name.clone(),
                    kernel_object: address,
                    kernarg_size: object.kernel.kernarg_size,
                },
            );
            c.kernel_objects
                .insert(address, (descriptor, Arc::new(object)));
        }
        HSA_STATUS_SUCCESS
    })
}

pub fn symbol_by_name(exe: u64, name: &str) -> Result<u64, hsa_status_t> {
    with(|c| {
        let e = c
            .executables
            .get(&exe)
            .ok_or(HSA_STATUS_ERROR_INVALID_EXECUTABLE)?;
        if !e.frozen {
            state::breach(&format!(
                "hsa_executable_get_symbol_by_name({name:?}) before hsa_executable_freeze: the \
                 kernel object does not exist until the executable is frozen"
            ));
            return Err(HSA_STATUS_ERROR_INVALID_EXECUTABLE);
        }
        e.symbols
            .get(name)
            .map(|(symbol, _)| *symbol)
            .ok_or(HSA_STATUS_ERROR_INVALID_SYMBOL_NAME)
    })
}

/// `hsa_executable_symbol_get_info`.
///
/// # Safety
/// `value` must be valid for a write of the attribute's type.
pub unsafe fn symbol_info(
    symbol: u64,
    attribute: hsa_executable_symbol_info_t,
    value: *mut u8,
    agent: u64,
) -> hsa_status_t {
    with(|c| {
        let Some(s) = c.symbols.get(&symbol) else {
            return HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL;
        };
        // SAFETY (all writes): the caller provides storage of the attribute's documented type.
        unsafe {
            match attribute {
                HSA_EXECUTABLE_SYMBOL_INFO_TYPE => {
                    value.cast::<u32>().write_unaligned(HSA_SYMBOL_KIND_KERNEL)
                }
                HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH => {
                    value.cast::<u32>().write_unaligned(s.name.len() as u32)
                }
                HSA_EXECUTABLE_SYMBOL_INFO_NAME => {
                    std::ptr::copy_nonoverlapping(s.name.as_ptr(), value, s.name.len())
                }
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT => {
                    value.cast::<u64>().write_unaligned(s.kernel_object)
                }
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE => {
                    value.cast::<u32>().write_unaligned(s.kernarg_size)
                }
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT => {
                    value.cast::<u32>().write_unaligned(64)
                }
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE
                | HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE => {
                    value.cast::<u32>().write_unaligned(0)
                }
                HSA_EXECUTABLE_SYMBOL_INFO_AGENT => value
                    .cast::<hsa_agent_t>()
                    .write_unaligned(hsa_agent_t { handle: agent }),
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            }
        }
        HSA_STATUS_SUCCESS
    })
}

/// The kernel a packet's kernel object names, if it is live.
pub fn kernel_object(address: u64) -> Option<Arc<KernelObject>> {
    with(|c| c.kernel_objects.get(&address).map(|(_, k)| k.clone()))
}

pub fn live_executables() -> u64 {
    with(|c| c.executables.len() as u64)
}

/// Drops everything at the last `hsa_shut_down`; returns how many executables were left.
pub fn destroy_all() -> u64 {
    lock(&CODE).take().map_or(0, |c| c.executables.len() as u64)
}
