//! Sessions: what a loaded program keeps on the device between dispatches — its hardware
//! context and kernel, its instruction buffer (npu1), its staging buffers and its run — and
//! the LRU cache that bounds how many exist at once.
//!
//! Upstream rebuilt device, xclbin, context and kernel on every npu1 launch (~95 ms); a
//! hardware context costs ~35 ms to make and the driver rations them (a few dozen per device),
//! so sessions are kept and reused, at most `AMD_TRITON_NPU_XRT_MAX_SESSIONS` of them.
//!
//! A dispatch finds its program's session without the runtime's lock: the program keeps a
//! weak reference to it, and marking it used is one atomic store. The lock is taken only to
//! make a session (and evict others for it) or to drop a failed one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use xrt_sys::{Bo, BoFlags, Device, Elf, Kernel, Run, SyncDirection, Xclbin, XrtSysError};

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
    /// The program's session while the cache holds it (weak: eviction frees it).
    pub resident: Mutex<Weak<SessionCell>>,
}

impl ProgramSpec {
    /// The program's session, if it is alive and not retired, marked as just used.
    pub fn resident(&self) -> Option<Arc<SessionCell>> {
        let cell = self
            .resident
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upgrade()
            .filter(|cell| !cell.retired.load(Ordering::Relaxed))?;
        cell.touch();
        Some(cell)
    }

    pub fn set_resident(&self, cell: &Arc<SessionCell>) {
        *self.resident.lock().unwrap_or_else(PoisonError::into_inner) = Arc::downgrade(cell);
    }

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
    /// The run every dispatch starts again. First, so it is released before the buffers it
    /// names (fields drop in order).
    pub run: ReusedRun,
    pub kernel: Arc<Kernel>,
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
                let kernel = Arc::new(context.kernel(kernel)?);
                let mut instr = device.alloc_bo(
                    insts.len(),
                    BoFlags::CACHEABLE,
                    kernel.group_id(INSTR_ARG)?,
                )?;
                instr.as_mut_slice()[..insts.len()].copy_from_slice(insts);
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
                    run: ReusedRun::default(),
                    kernel,
                    instr: Some((instr, words)),
                    groups,
                    staging: Vec::new(),
                })
            }
            Source::Elf { elf, kernel } => {
                let context = device.context_from_elf(elf)?;
                Ok(Session {
                    run: ReusedRun::default(),
                    kernel: Arc::new(context.ext_kernel(kernel)?),
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
    ) -> Result<&mut Bo, XrtSysError> {
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
        slot.as_mut().ok_or_else(|| XrtSysError::InvalidInput {
            what: format!("argument {index}"),
            reason: "no staging buffer".to_owned(),
        })
    }
}

/// One `xrt::run` per session. XRT keeps a run's arguments across starts (its command packet
/// and, for an ELF, the patched control code; a new start only resets the command's state and
/// syncs any new patches) and lets a finished run start again, so the constant arguments
/// (npu1: opcode, instruction buffer, word count) are set once, when the run is made, and a
/// dispatch sets only its buffers. It asks for every buffer to be set, even one that looks
/// unchanged (since the last dispatch a staging buffer may have been replaced by a larger
/// one, or a shared buffer freed and another allocated at its address); the run calls XRT
/// only for an argument not already set to that very buffer (`xrt_sys::Run::set_arg_bo`).
#[derive(Default)]
pub(crate) struct ReusedRun(Option<(Run, usize)>);

impl ReusedRun {
    /// The run, ready for a dispatch with `buffers` buffer arguments. A different count than
    /// the last dispatch's makes a new run: XRT cannot unset an argument, and a left-over one
    /// would hand the kernel a buffer this dispatch did not pass (perhaps freed by now).
    pub fn prepare(
        &mut self,
        kernel: &Arc<Kernel>,
        instr: Option<&(Bo, u32)>,
        buffers: usize,
    ) -> Result<&mut Run, XrtSysError> {
        let (run, _) = match self.0.take() {
            Some((run, n)) if n == buffers => self.0.insert((run, n)),
            old => {
                // Release the old run before making its replacement.
                drop(old);
                let mut run = kernel.run()?;
                if let Some((instr, words)) = instr {
                    run.set_arg_scalar(0, &OPCODE_TRANSACTION.to_le_bytes())?;
                    run.set_arg_bo(INSTR_ARG, instr)?;
                    run.set_arg_scalar(2, &words.to_le_bytes())?;
                }
                self.0.insert((run, buffers))
            }
        };
        Ok(run)
    }
}

/// Orders uses of sessions for the LRU choice; only increases.
static USE_CLOCK: AtomicU64 = AtomicU64::new(0);

/// A session with what the cache needs to know about it.
pub(crate) struct SessionCell {
    pub session: Mutex<Session>,
    /// When it was last used (a tick of [`USE_CLOCK`]).
    last_used: AtomicU64,
    /// Dropped from the cache (evicted or failed): dispatches must not pick it up again.
    retired: AtomicBool,
}

impl SessionCell {
    fn touch(&self) {
        let now = USE_CLOCK.fetch_add(1, Ordering::Relaxed) + 1;
        self.last_used.store(now, Ordering::Relaxed);
    }
}

/// The sessions alive, least recently used first out.
#[derive(Default)]
pub(crate) struct Sessions {
    entries: HashMap<u64, Arc<SessionCell>>,
}

impl Sessions {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The session of program `id`, marked as just used.
    pub fn get(&self, id: u64) -> Option<Arc<SessionCell>> {
        let cell = self.entries.get(&id)?;
        cell.touch();
        Some(Arc::clone(cell))
    }

    pub fn insert(&mut self, id: u64, session: Session) -> Arc<SessionCell> {
        let cell = Arc::new(SessionCell {
            session: Mutex::new(session),
            last_used: AtomicU64::new(0),
            retired: AtomicBool::new(false),
        });
        cell.touch();
        if let Some(old) = self.entries.insert(id, Arc::clone(&cell)) {
            old.retired.store(true, Ordering::Relaxed);
        }
        cell
    }

    /// Releases least recently used idle sessions until at most `keep` remain (sessions in use
    /// by a dispatch are not released; one a dispatch picks up just as it is released lives
    /// until that dispatch ends). Returns how many were released.
    pub fn shrink_to(&mut self, keep: usize) -> usize {
        let mut released = 0;
        while self.entries.len() > keep {
            let victim = self
                .entries
                .iter()
                .filter(|(_, cell)| Arc::strong_count(cell) == 1)
                .min_by_key(|(_, cell)| cell.last_used.load(Ordering::Relaxed))
                .map(|(id, _)| *id);
            match victim.and_then(|id| self.entries.remove(&id)) {
                Some(cell) => {
                    cell.retired.store(true, Ordering::Relaxed);
                    released += 1;
                }
                None => break,
            }
        }
        released
    }

    /// Releases every session; a dispatch using one keeps it until that dispatch ends.
    pub fn clear(&mut self) {
        for (_, cell) in self.entries.drain() {
            cell.retired.store(true, Ordering::Relaxed);
        }
    }

    /// Releases program `id`'s session (its program was released); a dispatch using it keeps
    /// it until that dispatch ends.
    pub fn remove(&mut self, id: u64) {
        if let Some(cell) = self.entries.remove(&id) {
            cell.retired.store(true, Ordering::Relaxed);
        }
    }

    /// Forgets program `id`'s session if it is still `cell` (after the device failed it).
    pub fn discard(&mut self, id: u64, cell: &Arc<SessionCell>) {
        cell.retired.store(true, Ordering::Relaxed);
        if self
            .entries
            .get(&id)
            .is_some_and(|current| Arc::ptr_eq(current, cell))
        {
            self.entries.remove(&id);
        }
    }
}
