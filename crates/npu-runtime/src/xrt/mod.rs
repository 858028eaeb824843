//! The XRT runtime, through triton-npu's XRT shim (`xrt-sys`, the checked layer over its C ABI
//! with handle types that release themselves): [`BACKEND`] and [`XrtRuntime`]. Safe code.
//!
//! * npu1 (`Artifact::XclbinInsts`): the xclbin is registered once per file; each program keeps
//!   a hardware context and its `MLIR_AIE*` kernel, its instruction buffer (cacheable, group of
//!   argument 1, uploaded once) and host-only staging buffers (group of argument 3 + i), reused
//!   and grown as needed. A run is `kernel(3, instr_bo, instr_words, bo_0, bo_1, …)`.
//! * npu2 (`Artifact::Elf`): `xrt::elf` → hardware context → `xrt::ext::kernel("main:<id>")`,
//!   with `xrt::ext::bo` staging buffers, run as `(bo_0, bo_1, …)`.
//!
//! Each session keeps one `xrt::run`, started again by every dispatch: the constant
//! arguments are set when it is made, a dispatch sets only its buffers (see
//! `session::ReusedRun`).
//!
//! Programs' device state lives in sessions, at most `AMD_TRITON_NPU_XRT_MAX_SESSIONS` of them
//! (least recently used released first). When the driver refuses a context
//! (`XrtSysError::ContextRefused`), idle sessions are released and creation is retried once;
//! a refusal that persists is a [`RuntimeError::HardwareContext`]. Every argument is synced to the
//! device before a run; only the arguments the kernel writes (`DispatchOptions::writeback`) are
//! synced back and copied out. A run that does not complete raises with its ERT state. A run
//! that does not finish within the launch's timeout, else `AMD_TRITON_NPU_XRT_TIMEOUT` (always
//! finite), raises a timeout; it is not aborted (amdxdna answers XRT's `ERT_ABORT` with
//! -EOPNOTSUPP, xdna-driver `aie2_message.c`), its hardware context is torn down instead. A
//! failed or timed-out run's session is dropped, so the next dispatch starts on a fresh context
//! (upstream saw a failed run leave a bad context behind).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};

use npu_target::{Config, NpuVersion, RuntimeKind};
use smallvec::SmallVec;
use xrt_sys::{Bo, BoFlags, BoKind, Device, Elf, SyncDirection, WaitOutcome, Xclbin, XrtSysError};

use crate::shared::SharedRegions;
use crate::{
    Artifact, BuildFiles, DispatchReport, Launch, MAX_KERNEL_ARGS, Program, Runtime, RuntimeError,
    SharedBuffer,
};

mod backend;
pub mod discovery;
mod doctor;
mod session;
mod shared;

pub use backend::{BACKEND, XrtBackend};
pub use doctor::{XrtReport, XrtTargetProbe, doctor_report};
pub use shared::XrtSharedBuffer;

use session::{FIRST_BUFFER_ARG, ProgramSpec, Session, SessionCell, Sessions, Source};

/// The prefix of the kernel an npu1 xclbin runs (aiecc's default name is `MLIR_AIE`).
pub const XCLBIN_KERNEL_PREFIX: &str = "MLIR_AIE";
/// The memory group of shared buffers on npu1: bank 0, the host memory in aiecc's xclbins.
/// A shared buffer is passed in place only when the kernel argument is in the same group.
pub const SHARED_GROUP: i32 = 0;
/// How long one wait for a run lasts before the interruption check (npu-process asks device
/// waits to check at least every ~50 ms).
const WAIT_SLICE: std::time::Duration = std::time::Duration::from_millis(20);

static RUNTIME_IDS: AtomicU64 = AtomicU64::new(1);

/// A file as of when it was read: a changed file is a different artifact.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileKey {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ArtifactKey {
    XclbinInsts(FileKey, FileKey),
    Elf(FileKey, String),
}

#[derive(Default)]
struct State {
    xclbins: HashMap<FileKey, Arc<Xclbin>>,
    programs: HashMap<ArtifactKey, Program>,
    sessions: Sessions,
    next_program: u64,
}

/// XRT on device 0.
pub struct XrtRuntime {
    id: u64,
    device: Arc<Device>,
    device_name: String,
    max_sessions: usize,
    /// How long a run may take when the launch sets no limit (`AMD_TRITON_NPU_XRT_TIMEOUT`).
    timeout: Duration,
    state: Mutex<State>,
    shared: Arc<shared::Registry>,
}

impl std::fmt::Debug for XrtRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XrtRuntime")
            .field("shim", &self.device.shim().path())
            .field("device_name", &self.device_name)
            .field("max_sessions", &self.max_sessions)
            .finish_non_exhaustive()
    }
}

impl XrtRuntime {
    /// Loads the shim (see [`discovery`]) and opens device 0. `shim_dirs` are the installed
    /// package's directories that may hold `libtriton_npu_xrt.so`.
    pub fn open(config: &Config, shim_dirs: &[PathBuf]) -> Result<XrtRuntime, RuntimeError> {
        let shim = discovery::load_shim(config, shim_dirs)?;
        let no_device = |e: XrtSysError| {
            RuntimeError::NoDevice(format!(
                "XRT (through {}) found no usable NPU: {e}. Check that the amdxdna driver is \
                 loaded and `xrt-smi examine` lists the NPU.",
                shim.path().display()
            ))
        };
        let device = Device::open(&shim, 0).map_err(no_device)?;
        let device_name = device.name().map_err(no_device)?;
        Ok(XrtRuntime {
            id: RUNTIME_IDS.fetch_add(1, Ordering::Relaxed),
            device,
            device_name,
            max_sessions: config.xrt_max_sessions.max(1),
            timeout: config.xrt_timeout,
            state: Mutex::new(State::default()),
            shared: Arc::default(),
        })
    }

    /// The shim in use.
    pub fn shim_path(&self) -> &Path {
        self.device.shim().path()
    }

    /// The NPU generation the device name implies, if it is a known one.
    pub fn generation(&self) -> Option<NpuVersion> {
        NpuVersion::from_device_name(&self.device_name)
    }

    /// How many sessions (hardware contexts) are alive.
    pub fn sessions_alive(&self) -> usize {
        self.lock().sessions.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn load_xclbin_insts(&self, xclbin: &Path, insts: &Path) -> Result<Program, RuntimeError> {
        let label = format!("xclbin {}", xclbin.display());
        let refuse = |reason: String| RuntimeError::Load {
            kernel: label.clone(),
            reason,
        };
        let xclbin_key = file_key(xclbin).map_err(&refuse)?;
        let key = ArtifactKey::XclbinInsts(xclbin_key.clone(), file_key(insts).map_err(&refuse)?);
        let mut state = self.lock();
        if let Some(program) = state.programs.get(&key) {
            return Ok(program.clone());
        }
        let words = fs::read(insts).map_err(|e| RuntimeError::reading(&label, insts, &e))?;
        if words.is_empty() || words.len() % 4 != 0 {
            return Err(refuse(format!(
                "{} holds {} bytes; an instruction stream is a non-empty sequence of 32-bit words",
                insts.display(),
                words.len()
            )));
        }
        let registered = match state.xclbins.get(&xclbin_key) {
            Some(x) => Arc::clone(x),
            None => {
                let x = self
                    .device
                    .register_xclbin(xclbin)
                    .map_err(|e| refuse(e.to_string()))?;
                state.xclbins.insert(xclbin_key, Arc::clone(&x));
                x
            }
        };
        let kernel = registered
            .find_kernel(XCLBIN_KERNEL_PREFIX)
            .map_err(|e| refuse(e.to_string()))?;
        let slots = (kernel.num_args as usize).checked_sub(FIRST_BUFFER_ARG as usize).ok_or_else(|| {
            refuse(format!(
                "kernel {} takes {} arguments; an NPU instruction-stream kernel takes the opcode, \
                 the instruction buffer and its length before its buffers",
                kernel.name, kernel.num_args
            ))
        })?;
        let spec = ProgramSpec {
            id: state.next_program,
            runtime: self.id,
            source: Source::Xclbin {
                xclbin: registered,
                kernel: kernel.name.clone(),
                insts: words.into(),
                slots,
            },
            resident: Mutex::new(Weak::new()),
        };
        let name = format!("{} ({})", kernel.name, xclbin.display());
        self.finish_load(&mut state, key, spec, name)
    }

    fn load_elf(&self, elf: &Path, kernel: &str) -> Result<Program, RuntimeError> {
        let label = format!("{kernel} ({})", elf.display());
        let refuse = |reason: String| RuntimeError::Load {
            kernel: label.clone(),
            reason,
        };
        let key = ArtifactKey::Elf(file_key(elf).map_err(&refuse)?, kernel.to_owned());
        let mut state = self.lock();
        if let Some(program) = state.programs.get(&key) {
            return Ok(program.clone());
        }
        let opened = Elf::open(self.device.shim(), elf).map_err(|e| refuse(e.to_string()))?;
        let spec = ProgramSpec {
            id: state.next_program,
            runtime: self.id,
            source: Source::Elf {
                elf: opened,
                kernel: kernel.to_owned(),
            },
            resident: Mutex::new(Weak::new()),
        };
        self.finish_load(&mut state, key, spec, label.clone())
    }

    /// Makes the program's session now, so a bad kernel fails at load, not at first dispatch.
    fn finish_load(
        &self,
        state: &mut State,
        key: ArtifactKey,
        spec: ProgramSpec,
        name: String,
    ) -> Result<Program, RuntimeError> {
        let session = self.create_session(state, &spec).map_err(|e| {
            e.into_error(&name, |kernel, reason| RuntimeError::Load {
                kernel,
                reason,
            })
        })?;
        let cell = state.sessions.insert(spec.id, session);
        spec.set_resident(&cell);
        state.next_program += 1;
        // Neither artifact says exactly how many buffers the kernel takes; an xclbin declares
        // its buffer slots, an upper bound.
        let max_args = spec.max_args();
        let mut program = Program::new(Arc::new(spec), name, None);
        if let Some(max) = max_args {
            program = program.with_max_args(max);
        }
        state.programs.insert(key, program.clone());
        Ok(program)
    }

    /// A new session for `spec`, making room under the cap first, and retrying once after
    /// releasing every idle session when the driver refuses a hardware context.
    fn create_session(
        &self,
        state: &mut State,
        spec: &ProgramSpec,
    ) -> Result<Session, SessionError> {
        state.sessions.shrink_to(self.max_sessions - 1);
        match Session::create(&self.device, spec) {
            Err(e) if e.is_context_refused() => {
                let released = state.sessions.shrink_to(0);
                tracing::info!(
                    released,
                    "the NPU driver refused a hardware context ({e}); released idle sessions, retrying"
                );
                Session::create(&self.device, spec).map_err(|e| {
                    if e.is_context_refused() {
                        SessionError::ContextRefused(format!(
                            "{e}. The NPU driver refused a hardware context even after this \
                             process released its {released} idle ones: other processes may hold \
                             contexts; otherwise lower AMD_TRITON_NPU_XRT_MAX_SESSIONS (now {})",
                            self.max_sessions
                        ))
                    } else {
                        SessionError::Other(e.to_string())
                    }
                })
            }
            Err(e) if e.is_context_refused() => Err(SessionError::ContextRefused(e.to_string())),
            other => other.map_err(|e| SessionError::Other(e.to_string())),
        }
    }

    /// The program's session, made again if it was released. Only making one takes the
    /// runtime's lock.
    fn session(&self, spec: &ProgramSpec, kernel: &str) -> Result<Arc<SessionCell>, RuntimeError> {
        if let Some(cell) = spec.resident() {
            return Ok(cell);
        }
        let mut state = self.lock();
        let cell = match state.sessions.get(spec.id) {
            Some(cell) => cell,
            None => {
                let session = self.create_session(&mut state, spec).map_err(|e| {
                    e.into_error(kernel, |kernel, reason| RuntimeError::Dispatch {
                        kernel,
                        reason,
                    })
                })?;
                state.sessions.insert(spec.id, session)
            }
        };
        spec.set_resident(&cell);
        Ok(cell)
    }

    fn spec<'p>(&self, program: &'p Program) -> Result<&'p ProgramSpec, RuntimeError> {
        match program.state::<ProgramSpec>() {
            Some(spec) if spec.runtime == self.id => Ok(spec),
            _ => Err(RuntimeError::InvalidArguments {
                kernel: program.kernel_name.clone(),
                reason: "the program was not loaded by this XRT runtime".to_owned(),
            }),
        }
    }

    fn run_once(
        &self,
        spec: &ProgramSpec,
        session: &mut Session,
        launch: &Launch<'_>,
    ) -> Result<DispatchReport, RuntimeError> {
        let fail = |e: XrtSysError| launch.failed(e.to_string());
        let args = launch.args();
        let mut report = DispatchReport::default();
        // Pass shared buffers in place, stage the rest; everything goes to the device. (Only
        // an argument the check placed in a shared buffer can be one.)
        let mut in_place: SmallVec<[Option<Arc<Bo>>; MAX_KERNEL_ARGS]> = SmallVec::new();
        for (i, arg) in args.iter().enumerate() {
            let shared = if launch.in_shared_buffer(i) {
                self.shared
                    .find(arg)
                    .filter(|bo| fits_in_place(spec, session, i, bo))
            } else {
                None
            };
            match shared {
                Some(bo) => {
                    bo.sync(SyncDirection::ToDevice, bo.len(), 0)
                        .map_err(fail)?;
                    report.in_place += 1;
                    in_place.push(Some(bo));
                }
                None => {
                    let bo = session.staging(&self.device, i, arg.len()).map_err(fail)?;
                    arg.read_into(bo.as_mut_slice());
                    bo.sync(SyncDirection::ToDevice, arg.len(), 0)
                        .map_err(fail)?;
                    report.staged += 1;
                    in_place.push(None);
                }
            }
        }
        let staging = &session.staging;
        let buffer = |i: usize| -> Result<&Bo, RuntimeError> {
            match (&in_place[i], staging.get(i).and_then(Option::as_ref)) {
                (Some(bo), _) => Ok(bo),
                (None, Some(bo)) => Ok(bo),
                (None, None) => {
                    Err(launch.failed(format!("internal error: argument {i} has no buffer")))
                }
            }
        };

        // npu1 kernels take the opcode, instructions and their length first.
        let first_buffer = match session.instr {
            Some(_) => FIRST_BUFFER_ARG,
            None => 0,
        };
        let run = session
            .run
            .prepare(&session.kernel, session.instr.as_ref(), args.len())
            .map_err(fail)?;
        for i in 0..args.len() {
            run.set_arg_bo(first_buffer + i as i32, buffer(i)?)
                .map_err(fail)?;
        }
        let started = Instant::now();
        run.start().map_err(fail)?;
        let timeout = launch.timeout().unwrap_or(self.timeout);
        let deadline = started + timeout;
        // In slices, so that Ctrl-C or SIGTERM stops the wait (npu-process's rule for device
        // waits). No abort() either way: amdxdna refuses XRT's ERT_ABORT command
        // (-EOPNOTSUPP). The caller drops the session, and with it the hardware context,
        // which ends the run. The first slice is measured from the start (no clock read: most
        // runs end within it).
        let mut slice = timeout.min(WAIT_SLICE);
        loop {
            match run.wait(Some(slice)) {
                Ok(WaitOutcome::Completed) => break,
                Ok(WaitOutcome::TimedOut) if Instant::now() >= deadline => {
                    tracing::warn!(
                        kernel = launch.kernel(),
                        "run timed out; tearing its hardware context down"
                    );
                    return Err(RuntimeError::Timeout {
                        kernel: launch.kernel().to_owned(),
                        seconds: timeout.as_secs_f64(),
                    });
                }
                Ok(WaitOutcome::TimedOut) => {
                    slice = deadline
                        .saturating_duration_since(Instant::now())
                        .min(WAIT_SLICE);
                    if let Err(cause) = npu_process::interrupt::check() {
                        tracing::warn!(
                            kernel = launch.kernel(),
                            "run interrupted; tearing its hardware context down"
                        );
                        return Err(RuntimeError::Interrupted {
                            kernel: launch.kernel().to_owned(),
                            cause,
                        });
                    }
                }
                Err(e) => return Err(fail(e)),
            }
        }
        report.device_time = started.elapsed();

        // Only what the kernel writes comes back.
        for (i, arg) in args.iter().enumerate() {
            if !launch.writes(i) {
                continue;
            }
            let bo = buffer(i)?;
            match &in_place[i] {
                // In place: the host sees the results once the mapping is synced.
                Some(_) => bo
                    .sync(SyncDirection::FromDevice, bo.len(), 0)
                    .map_err(fail)?,
                None => {
                    bo.sync(SyncDirection::FromDevice, arg.len(), 0)
                        .map_err(fail)?;
                    arg.write_from(&bo.as_slice()[..arg.len()]).map_err(|e| {
                        launch.failed(format!("argument {i} cannot take its result: {e}"))
                    })?;
                }
            }
        }
        Ok(report)
    }
}

/// Why a session could not be made.
enum SessionError {
    /// The driver refused a hardware context, even after idle ones were released.
    ContextRefused(String),
    Other(String),
}

impl SessionError {
    /// The error for `kernel`: a refused context is its own kind; anything else is what
    /// `other` makes of it (a refused load, a failed dispatch).
    fn into_error(
        self,
        kernel: &str,
        other: impl FnOnce(String, String) -> RuntimeError,
    ) -> RuntimeError {
        match self {
            SessionError::ContextRefused(reason) => RuntimeError::HardwareContext {
                kernel: kernel.to_owned(),
                reason,
            },
            SessionError::Other(reason) => other(kernel.to_owned(), reason),
        }
    }
}

/// Whether a shared buffer can stand for argument `index` as it is.
fn fits_in_place(spec: &ProgramSpec, session: &Session, index: usize, bo: &Bo) -> bool {
    match (&spec.source, bo.kind()) {
        (Source::Xclbin { .. }, BoKind::Flags { flags, group }) => {
            flags == BoFlags::HOST_ONLY && session.groups.get(index) == Some(&group)
        }
        (Source::Elf { .. }, BoKind::Ext) => true,
        _ => false,
    }
}

fn file_key(path: &Path) -> Result<FileKey, String> {
    let meta = fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    Ok(FileKey {
        path: fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

impl Runtime for XrtRuntime {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::XRT
    }

    fn device_name(&self) -> Result<String, RuntimeError> {
        Ok(self.device_name.clone())
    }

    fn load(&self, artifact: &Artifact) -> Result<Program, RuntimeError> {
        crate::opener::XRT.usable()?;
        match artifact {
            Artifact::XclbinInsts { xclbin, insts } => self.load_xclbin_insts(xclbin, insts),
            Artifact::Elf { elf, kernel_name } => self.load_elf(elf, kernel_name),
            Artifact::Directory {
                dir,
                format,
                kernel_name,
            } => self.load(&backend::artifact(
                &BuildFiles::on_disk(dir),
                *format,
                kernel_name,
            )?),
            Artifact::Hsaco { kernel_name, .. } => Err(RuntimeError::Load {
                kernel: kernel_name.clone(),
                reason: "an hsaco runs under AMD_TRITON_NPU_RUNTIME=hsa; XRT runs an xclbin with \
                         insts.bin (npu1) or a full ELF (npu2)"
                    .to_owned(),
            }),
        }
    }

    /// Forgets the program and releases its session (its hardware context) now.
    fn release(&self, program: &Program) {
        // Inherited across fork: the parent's to release, not ours.
        if crate::opener::XRT.usable().is_err() {
            return;
        }
        let Some(spec) = program.state::<ProgramSpec>() else {
            return;
        };
        if spec.runtime != self.id {
            return;
        }
        let mut state = self.lock();
        state.programs.retain(|_, p| !p.same(program));
        state.sessions.remove(spec.id);
    }

    fn release_all(&self) {
        // Inherited across fork: the parent's to release, not ours.
        if crate::opener::XRT.usable().is_err() {
            return;
        }
        let mut state = self.lock();
        state.programs.clear();
        state.xclbins.clear();
        // Sessions a dispatch is using go when that dispatch ends.
        state.sessions.clear();
    }

    fn alloc_shared(&self, len: usize) -> Result<Box<dyn SharedBuffer>, RuntimeError> {
        crate::opener::XRT.usable()?;
        let fail = |e: XrtSysError| RuntimeError::Call {
            call: format!("allocating a {len}-byte shared buffer"),
            reason: e.to_string(),
        };
        if len == 0 {
            return Err(RuntimeError::Call {
                call: "allocating a shared buffer".to_owned(),
                reason: "the size is 0; XRT buffer objects hold at least one byte".to_owned(),
            });
        }
        let bo = match self.generation() {
            Some(NpuVersion::Npu1) => self.device.alloc_bo(len, BoFlags::HOST_ONLY, SHARED_GROUP),
            _ => self.device.alloc_ext_bo(len),
        }
        .map_err(fail)?;
        Ok(Box::new(self.shared.add(bo)))
    }

    fn shared_regions(&self) -> Option<&SharedRegions> {
        Some(self.shared.regions())
    }

    fn run(&self, launch: &Launch<'_>) -> Result<DispatchReport, RuntimeError> {
        crate::opener::XRT.usable()?;
        let spec = self.spec(launch.program())?;
        let cell = self.session(spec, launch.kernel())?;
        let outcome = {
            let mut guard = cell.session.lock().unwrap_or_else(PoisonError::into_inner);
            self.run_once(spec, &mut guard, launch)
        };
        if matches!(
            outcome,
            Err(RuntimeError::Dispatch { .. }
                | RuntimeError::Timeout { .. }
                | RuntimeError::Interrupted { .. },)
        ) {
            // The context may be left in a bad state; the next dispatch makes a new one.
            self.lock().sessions.discard(spec.id, &cell);
        }
        outcome
    }
}
