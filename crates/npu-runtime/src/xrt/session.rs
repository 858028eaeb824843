//! Sessions: what a loaded program keeps on the device between dispatches — its hardware
//! context and kernel, its instruction buffer (npu1) and its staging buffers — and the LRU
//! cache that bounds how many exist at once.
//!
//! Upstream rebuilt device, xclbin, context and kernel on every npu1 launch (~95 ms); a
//! hardware context costs ~35 ms to make and the driver rations them (a few dozen per device),
//! so sessions are kept and reused, at most `AMD_TRITON_NPU_XRT_MAX_SESSIONS` of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use xrt_sys::{Bo, BoFlags, Device, Elf, Kernel, SyncDirection, Xclbin, XrtSysError};

/// The opcode of an instruction-stream ("transaction") command: argument 0 of an npu1 kernel.
pub const OPCODE_TRANSACTION: u64 = 3;
/// Argument index of the instruction buffer in an npu1 kernel; buffers start at 3.
pub const INSTR_ARG: i32 = 1;
pub const FIRST_BUFFER_ARG: i32 = 3;
/// Staging buffers grow in whole pages, so small size changes reuse them.
const STAGING_GRANULE: usize = 4096;

/// What a program was loaded from.
pub(crate) enum Source {
    /// npu1: an xclbin and its instruction stream. The kernel declares `slots` buffer
    /// arguments after the opcode, the instruction buffer and the instruction count; a kernel
    /// may use fewer (aiecc declares at least five), never more.
    Xclbin {
        xclbin: Arc<Xclbin>,
        kernel: String,
        insts: Arc<[u8]>,
        slots: usize,
    },
    /// npu2: a full ELF and its `main:<instance>` kernel.
    Elf { elf: Arc<Elf>, kernel: String },
}

/// A loaded program (what `Program::inner` holds for XRT).
pub(crate) struct ProgramSpec {
    /// Identifies the program's session in the cache.
    pub id: u64,
    /// The runtime that loaded it.
    pub runtime: u64,
    pub source: Source,
}

impl ProgramSpec {
    /// The most buffer arguments a dispatch may pass, when the artifact bounds it.
    pub fn max_args(&self) -> Option<usize> {
        match &self.source {
            Source::Xclbin { slots, .. } => Some(*slots),
            Source::Elf { .. } => None,
        }
    }
}

/// A program's device state.
pub(crate) struct Session {
    pub kernel: Kernel,
    /// npu1: the instruction buffer and its length in 32-bit words.
    pub instr: Option<(Bo, u32)>,
    /// npu1: the memory group of each buffer argument.
    pub groups: Vec<i32>,
    /// Staging buffers, one per argument, grown as needed.
    pub staging: Vec<Option<Bo>>,
}

impl Session {
    /// Makes the hardware context and kernel, and uploads the instruction stream once.
    pub fn create(device: &Arc<Device>, spec: &ProgramSpec) -> Result<Session, XrtSysError> {
        match &spec.source {
            Source::Xclbin {
                xclbin,
                kernel,
                insts,
                slots,
            } => {
                let context = device.context_from_xclbin(xclbin)?;
                let kernel = context.kernel(kernel)?;
                let instr = device.alloc_bo(
                    insts.len(),
                    BoFlags::CACHEABLE,
                    kernel.group_id(INSTR_ARG)?,
                )?;
                // SAFETY: the mapping holds `instr.len() == insts.len()` bytes and nothing else
                // uses the new buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(insts.as_ptr(), instr.as_ptr(), insts.len())
                };
                instr.sync(SyncDirection::ToDevice, insts.len(), 0)?;
                let words =
                    u32::try_from(insts.len() / 4).map_err(|_| XrtSysError::InvalidInput {
                        what: "instruction stream".to_owned(),
                        reason: format!(
                            "{} bytes is more than the kernel's 32-bit word count",
                            insts.len()
                        ),
                    })?;
                let groups = (0..*slots)
                    .map(|i| kernel.group_id(FIRST_BUFFER_ARG + i as i32))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Session {
                    kernel,
                    instr: Some((instr, words)),
                    groups,
                    staging: Vec::new(),
                })
            }
            Source::Elf { elf, kernel } => {
                let context = device.context_from_elf(elf)?;
                Ok(Session {
                    kernel: context.ext_kernel(kernel)?,
                    instr: None,
                    groups: Vec::new(),
                    staging: Vec::new(),
                })
            }
        }
    }

    /// The staging buffer of argument `index`, at least `len` bytes long.
    pub fn staging(
        &mut self,
        device: &Arc<Device>,
        index: usize,
        len: usize,
    ) -> Result<&Bo, XrtSysError> {
        if self.staging.len() <= index {
            self.staging.resize_with(index + 1, || None);
        }
        // npu1 buffers live in the kernel argument's memory group; npu2 uses ext buffers.
        let group =
            match self.instr {
                Some(_) => Some(self.groups.get(index).copied().ok_or_else(|| {
                    XrtSysError::InvalidInput {
                        what: format!("argument {index}"),
                        reason: format!("the kernel has {} buffer arguments", self.groups.len()),
                    }
                })?),
                None => None,
            };
        let slot = &mut self.staging[index];
        if slot.as_ref().is_none_or(|bo| bo.len() < len) {
            // Free the old buffer first: its memory is better spent on the new one.
            *slot = None;
            let size = len.max(1).div_ceil(STAGING_GRANULE) * STAGING_GRANULE;
            *slot = Some(match group {
                Some(group) => device.alloc_bo(size, BoFlags::HOST_ONLY, group)?,
                None => device.alloc_ext_bo(size)?,
            });
        }
        slot.as_ref().ok_or_else(|| XrtSysError::InvalidInput {
            what: format!("argument {index}"),
            reason: "no staging buffer".to_owned(),
        })
    }
}

/// The sessions alive, least recently used first out.
#[derive(Default)]
pub(crate) struct Sessions {
    entries: HashMap<u64, Entry>,
    clock: u64,
}

struct Entry {
    session: Arc<Mutex<Session>>,
    last_used: u64,
}

impl Sessions {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The session of program `id`, marked as just used.
    pub fn get(&mut self, id: u64) -> Option<Arc<Mutex<Session>>> {
        self.clock += 1;
        let entry = self.entries.get_mut(&id)?;
        entry.last_used = self.clock;
        Some(Arc::clone(&entry.session))
    }

    pub fn insert(&mut self, id: u64, session: Session) -> Arc<Mutex<Session>> {
        self.clock += 1;
        let session = Arc::new(Mutex::new(session));
        self.entries.insert(
            id,
            Entry {
                session: Arc::clone(&session),
                last_used: self.clock,
            },
        );
        session
    }

    /// Releases least recently used idle sessions until at most `keep` remain (sessions in use
    /// by a dispatch are never released). Returns how many were released.
    pub fn shrink_to(&mut self, keep: usize) -> usize {
        let mut released = 0;
        while self.entries.len() > keep {
            let victim = self
                .entries
                .iter()
                .filter(|(_, e)| Arc::strong_count(&e.session) == 1)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(id, _)| *id);
            match victim {
                Some(id) => {
                    self.entries.remove(&id);
                    released += 1;
                }
                None => break,
            }
        }
        released
    }

    /// Forgets program `id`'s session if it is still `session` (after the device failed it).
    pub fn discard(&mut self, id: u64, session: &Arc<Mutex<Session>>) {
        if self
            .entries
            .get(&id)
            .is_some_and(|e| Arc::ptr_eq(&e.session, session))
        {
            self.entries.remove(&id);
        }
    }
}
