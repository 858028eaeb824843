//! The HSA (ROCr) runtime for the NPU's AIE agent: [`BACKEND`] (packs `kernel.hsaco` as its
//! preparation, loads it, probes the agent name) and [`HsaRuntime`].
//!
//! ROCr is loaded at run time (see [`discovery`]); nothing links against it. All calls into it
//! go through the result layer and safe types of `crate::raw::hsa`; this module is safe code.
//! The AIE agent allows one queue, so a process uses one runtime: [`HsaRuntime::global`].
//! Dispatches are serialised on that queue; loads may run concurrently and are cached by
//! (hsaco digest, kernel name, variables).
//!
//! [`HsaRuntime::open`] and [`HsaRuntime::open_library`] make independent instances for tools
//! and tests that load a ROCr of their own (each ROCr still allows one queue).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use npu_target::{Config, RuntimeKind};
use sha2::{Digest, Sha256};

use crate::raw::hsa::{HsaSharedBuffer, PoolAllocation};
use crate::shared::SharedRegions;
use crate::{
    Artifact, BuildFiles, DispatchReport, Launch, Program, Runtime, RuntimeError, SharedBuffer,
};

mod backend;
pub mod discovery;
mod dispatch;
mod doctor;
mod doorbell;
mod memory;
pub mod pack;
mod probe;
mod program;
mod session;
mod spin;

pub use backend::{BACKEND, HsaBackend};
pub use doctor::{AgentReport, HsaReport, doctor_report};
pub use pack::HSACO;
pub use probe::HsaTargetProbe;
pub use program::{CodeSource, HsaKernel, Variable};

use dispatch::{Dispatcher, Target};
use session::Session;

/// The process-wide runtime.
static GLOBAL: crate::opener::ProcessWide<HsaRuntime> =
    crate::opener::ProcessWide::new(&crate::opener::HSA);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ProgramKey {
    digest: [u8; 32],
    kernel: String,
    variables: Vec<Variable>,
}

/// The HSA runtime: an initialised ROCr, its AIE agent, the queue and the program cache.
pub struct HsaRuntime {
    id: u64,
    session: Arc<Session>,
    /// Where the library was found (e.g. `AMD_NPU_ROCR_PATH`).
    source: String,
    programs: Mutex<HashMap<ProgramKey, Program>>,
    dispatcher: Mutex<Dispatcher>,
    shared: Arc<SharedRegions>,
    default_timeout: Option<Duration>,
    verify_writeback: bool,
}

impl std::fmt::Debug for HsaRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HsaRuntime")
            .field("library", &self.session.library_path())
            .field("agent", &self.session.agent_name)
            .finish_non_exhaustive()
    }
}

impl HsaRuntime {
    /// The process's runtime, opened on first use with `config` (ROCr discovery, the HSA
    /// timeout) and the Python `site_packages` (for pip's rocm-sdk-core). Later calls return
    /// the same instance whatever they pass; a failed open is not remembered, so a later call
    /// may succeed once the setup is fixed.
    pub fn global(
        config: &Config,
        site_packages: &[PathBuf],
    ) -> Result<&'static HsaRuntime, RuntimeError> {
        GLOBAL.get_or_open(|| HsaRuntime::open(config, site_packages))
    }

    /// The process's runtime if [`HsaRuntime::global`] has opened it (in this process: one
    /// inherited across fork is not this process's to use or release).
    pub fn global_if_open() -> Option<&'static HsaRuntime> {
        GLOBAL.get()
    }

    /// A new runtime over the ROCr that discovery finds. Prefer [`HsaRuntime::global`]: the
    /// AIE agent allows one queue, so a second runtime on the same ROCr fails to create it.
    pub fn open(config: &Config, site_packages: &[PathBuf]) -> Result<HsaRuntime, RuntimeError> {
        let (found, device_error) = session::discover(config, site_packages);
        let Some((candidate, session)) = found.found else {
            // A ROCr that loaded but has no NPU to drive says more than the list of places.
            return Err(device_error.unwrap_or_else(|| {
                RuntimeError::NotFound(discovery::not_found_message(&found.refused))
            }));
        };
        HsaRuntime::start(session, candidate.source, config)
    }

    /// A new runtime over the `libhsa-runtime64` at `library` (no search).
    pub fn open_library(library: &Path, config: &Config) -> Result<HsaRuntime, RuntimeError> {
        let lib = discovery::load_file(library).map_err(|r| {
            RuntimeError::NotFound(format!(
                "cannot use {}: {}. {}",
                library.display(),
                r.reason,
                discovery::INSTALL_HINT
            ))
        })?;
        HsaRuntime::start(Session::open(lib)?, "explicit library".to_owned(), config)
    }

    fn start(
        session: Session,
        source: String,
        config: &Config,
    ) -> Result<HsaRuntime, RuntimeError> {
        let session = Arc::new(session);
        let dispatcher = Dispatcher::new(&session)?;
        tracing::debug!(
            library = %session.library_path().display(),
            agent = %session.agent_name,
            "HSA runtime ready"
        );
        Ok(HsaRuntime {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            session,
            source,
            programs: Mutex::new(HashMap::new()),
            dispatcher: Mutex::new(dispatcher),
            shared: Arc::default(),
            default_timeout: config.hsa_timeout,
            verify_writeback: config.hsa_verify_writeback,
        })
    }

    /// The AIE agent's name: `aie2` (npu1) or `aie2p` (npu2).
    pub fn agent_name(&self) -> &str {
        &self.session.agent_name
    }

    /// The agent's column count, when this ROCr reports it.
    pub fn columns(&self) -> Option<u32> {
        self.session.columns
    }

    /// Whether the agent has the device-heap pool ROCr's loader places AIE code in.
    pub fn has_device_heap(&self) -> bool {
        self.session.pools.dev_heap.is_some()
    }

    /// The `libhsa-runtime64` in use.
    pub fn library_path(&self) -> PathBuf {
        self.session.library_path()
    }

    /// Which discovery source found the library.
    pub fn library_source(&self) -> &str {
        &self.source
    }

    /// Loads `kernel_name` from the hsaco file at `path`.
    pub fn prepare(&self, path: &Path, kernel_name: &str) -> Result<Program, RuntimeError> {
        self.prepare_with_variables(CodeSource::File(path), kernel_name, &[])
    }

    /// Loads `kernel_name` from an hsaco held in memory.
    pub fn prepare_bytes(&self, hsaco: &[u8], kernel_name: &str) -> Result<Program, RuntimeError> {
        self.prepare_with_variables(CodeSource::Bytes(hsaco), kernel_name, &[])
    }

    /// Loads `kernel_name`, first defining each external variable with `size` bytes of
    /// device-visible memory (read them back with [`HsaRuntime::variable`]).
    pub fn prepare_with_variables(
        &self,
        source: CodeSource<'_>,
        kernel_name: &str,
        variables: &[Variable],
    ) -> Result<Program, RuntimeError> {
        // The cache key is the content, so the same hsaco from a file or from memory is one
        // program.
        let file_bytes;
        let (what, digest_input): (String, &[u8]) = match source {
            CodeSource::Bytes(b) => ("the hsaco".to_owned(), b),
            CodeSource::File(path) => {
                file_bytes = std::fs::read(path)
                    .map_err(|e| RuntimeError::reading(kernel_name, path, &e))?;
                (path.display().to_string(), &file_bytes)
            }
        };
        let mut sorted = variables.to_vec();
        sorted.sort();
        if let Some(w) = sorted.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(RuntimeError::Load {
                kernel: kernel_name.to_owned(),
                reason: format!("variable {:?} is given twice", w[0].name),
            });
        }
        let key = ProgramKey {
            digest: Sha256::digest(digest_input).into(),
            kernel: kernel_name.to_owned(),
            variables: sorted,
        };
        if let Some(program) = lock(&self.programs).get(&key) {
            return Ok(program.clone());
        }
        // Loaded outside the cache lock so other loads proceed; a racing duplicate is dropped.
        let loaded = program::load(&self.session, source, &what, kernel_name, variables)?;
        let num_args = (loaded.kernarg_size > 0).then_some(loaded.kernarg_size as usize / 16);
        let kernel = HsaKernel {
            runtime_id: self.id,
            code: loaded.code,
            kernel_object: loaded.kernel_object,
            kernarg_size: loaded.kernarg_size,
            reload_each_dispatch: !variables.is_empty()
                && npu_target::NpuVersion::from_arch(&self.session.agent_name)
                    == Some(npu_target::NpuVersion::Npu2),
        };
        let program = Program::new(Arc::new(kernel), kernel_name.to_owned(), num_args);
        Ok(lock(&self.programs).entry(key).or_insert(program).clone())
    }

    /// The device address and size of an external variable of a program loaded here.
    pub fn variable(&self, program: &Program, name: &str) -> Option<(*mut u8, usize)> {
        program.state::<HsaKernel>()?.variable(name)
    }

    /// The kernel state of a program this runtime loaded.
    fn kernel<'p>(&self, program: &'p Program) -> Result<&'p HsaKernel, RuntimeError> {
        let invalid = |reason: &str| RuntimeError::InvalidArguments {
            kernel: program.kernel_name.clone(),
            reason: reason.to_owned(),
        };
        let kernel = program
            .state::<HsaKernel>()
            .ok_or_else(|| invalid("the program was not loaded by the HSA runtime"))?;
        if kernel.runtime_id != self.id {
            return Err(invalid(
                "the program was loaded by another HSA runtime instance",
            ));
        }
        Ok(kernel)
    }
}

impl Runtime for HsaRuntime {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::HSA
    }

    fn device_name(&self) -> Result<String, RuntimeError> {
        Ok(self.session.agent_name.clone())
    }

    fn load(&self, artifact: &Artifact) -> Result<Program, RuntimeError> {
        crate::opener::HSA.usable()?;
        let refuse = |kernel: String, what: &str| RuntimeError::Load {
            kernel,
            reason: format!(
                "the HSA runtime loads hsaco files; {what} runs under AMD_TRITON_NPU_RUNTIME=xrt \
                 (or pack it into an hsaco)"
            ),
        };
        match artifact {
            Artifact::Hsaco {
                bytes,
                kernel_name,
                variables,
            } => {
                let variables: Vec<Variable> = variables
                    .iter()
                    .map(|(name, size)| Variable {
                        name: name.clone(),
                        size: *size,
                    })
                    .collect();
                self.prepare_with_variables(CodeSource::Bytes(bytes), kernel_name, &variables)
            }
            Artifact::XclbinInsts { xclbin, .. } => {
                Err(refuse(xclbin.display().to_string(), "an xclbin"))
            }
            Artifact::Elf { kernel_name, .. } => {
                Err(refuse(kernel_name.clone(), "a bare full ELF"))
            }
            Artifact::Directory {
                dir,
                format,
                kernel_name,
            } => self.load(&pack::artifact(
                &BuildFiles::on_disk(dir),
                *format,
                kernel_name,
            )?),
        }
    }

    fn release(&self, program: &Program) {
        // Inherited across fork: the parent's to release, not ours.
        if crate::opener::HSA.usable().is_err() {
            return;
        }
        lock(&self.programs).retain(|_, p| !p.same(program));
    }

    fn release_all(&self) {
        // Inherited across fork: the parent's to release, not ours.
        if crate::opener::HSA.usable().is_err() {
            return;
        }
        // A dispatch still waiting on another thread keeps the queue: the end of the process
        // must not wait on a device that may hang.
        match self.dispatcher.try_lock() {
            Ok(mut dispatcher) => dispatcher.close(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().close(),
            Err(std::sync::TryLockError::WouldBlock) => {
                tracing::debug!("HSA queue busy at release: kept")
            }
        }
        lock(&self.programs).clear();
    }

    fn alloc_shared(&self, len: usize) -> Result<Box<dyn SharedBuffer>, RuntimeError> {
        crate::opener::HSA.usable()?;
        if len == 0 {
            return Err(RuntimeError::Call {
                call: "alloc_shared".into(),
                reason: "a shared buffer needs at least one byte".into(),
            });
        }
        let memory = PoolAllocation::new(&self.session.hsa, self.session.pools.data, len)?;
        Ok(Box::new(HsaSharedBuffer::new(
            memory,
            Arc::clone(&self.shared),
        )))
    }

    fn shared_regions(&self) -> Option<&SharedRegions> {
        Some(&self.shared)
    }

    fn run(&self, launch: &Launch<'_>) -> Result<DispatchReport, RuntimeError> {
        crate::opener::HSA.usable()?;
        let kernel = self.kernel(launch.program())?;
        let target = Target {
            kernel_object: kernel.kernel_object,
            timeout: launch.timeout().or(self.default_timeout),
            verify_writeback: self.verify_writeback,
            reload_each_dispatch: kernel.reload_each_dispatch,
        };
        lock(&self.dispatcher).dispatch(&target, launch)
    }
}
