//! The [`Runtime`] trait an opened runtime implements, and what passes through it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use npu_target::{OutputFormat, RuntimeKind};

use crate::RuntimeError;
use crate::launch::Launch;
use crate::raw::host::{HostArg, SharedBuffer};
use crate::shared::SharedRegions;

/// What the compiler produced for one kernel, in the form a runtime loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Artifact {
    /// An hsaco (HSA): the file's bytes and the kernel symbol inside it
    /// (`main:<instance>` for a full ELF, the Triton kernel name for PdiInsts).
    Hsaco {
        bytes: Arc<[u8]>,
        kernel_name: String,
        /// Values for external variables the code relocates against (e.g. `scratch-pad-ctrl`):
        /// name → size in bytes. The runtime allocates and defines them before loading.
        variables: Vec<(String, u64)>,
    },
    /// An xclbin and its instruction stream (XRT).
    XclbinInsts { xclbin: PathBuf, insts: PathBuf },
    /// A full ELF and its `main:<instance>` kernel (XRT).
    Elf { elf: PathBuf, kernel_name: String },
    /// A build directory as the runtime's preparation left it, for runtimes that read their
    /// own files from it.
    Directory {
        dir: PathBuf,
        format: OutputFormat,
        kernel_name: String,
    },
}

/// A loaded kernel, ready to dispatch. Cheap to clone.
#[derive(Clone)]
pub struct Program {
    pub(crate) inner: Arc<dyn std::any::Any + Send + Sync>,
    pub kernel_name: String,
    /// The number of buffer arguments the kernel takes, when the artifact says so.
    pub num_args: Option<usize>,
    /// The most buffer arguments the kernel can take, when the artifact bounds it (an xclbin
    /// declares its buffer slots).
    pub max_args: Option<usize>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("kernel_name", &self.kernel_name)
            .field("num_args", &self.num_args)
            .field("max_args", &self.max_args)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Wraps a runtime's state for a loaded kernel.
    pub fn new(
        inner: Arc<dyn std::any::Any + Send + Sync>,
        kernel_name: String,
        num_args: Option<usize>,
    ) -> Program {
        Program {
            inner,
            kernel_name,
            num_args,
            max_args: None,
        }
    }

    /// With an upper bound on the buffer arguments.
    pub fn with_max_args(mut self, max_args: usize) -> Program {
        self.max_args = Some(max_args);
        self
    }

    /// The runtime's state, if it is of type `T`.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.inner.downcast_ref::<T>()
    }

    /// Whether two handles are the same loaded program.
    pub fn same(&self, other: &Program) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// Options of one dispatch.
#[derive(Debug, Clone, Default)]
pub struct DispatchOptions<'a> {
    /// Which arguments the kernel writes, one flag per buffer parameter (the kernel's
    /// signature); `None` copies all back.
    pub writeback: Option<&'a [bool]>,
    /// Bound on the wait for completion; `None` waits forever.
    pub timeout: Option<Duration>,
    /// The element size in bytes of each buffer parameter, when known: arguments must hold
    /// whole elements, and start on an element boundary inside a shared buffer.
    pub element_sizes: Option<&'a [usize]>,
}

/// What a dispatch did, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchReport {
    /// Time the device spent, as measured by the runtime (submit to completion).
    pub device_time: Duration,
    /// Arguments passed in place (inside a shared buffer).
    pub in_place: u32,
    /// Arguments copied into device-visible memory.
    pub staged: u32,
}

/// An opened runtime: loads kernels and runs them on the NPU.
///
/// Callers dispatch with [`Runtime::dispatch`], which checks the arguments the same way for
/// every runtime ([`Launch::check`]) and then calls [`Runtime::run`]; a runtime implements
/// `run` and never re-checks what the launch guarantees.
pub trait Runtime: Send + Sync {
    fn kind(&self) -> RuntimeKind;

    /// The device's name as the runtime reports it (`aie2p` for an HSA agent, `NPU Strix` for
    /// XRT); used by target detection.
    fn device_name(&self) -> Result<String, RuntimeError>;

    /// Loads an artifact. Runtimes cache programs, so loading the same artifact twice is cheap.
    fn load(&self, artifact: &Artifact) -> Result<Program, RuntimeError>;

    /// Drops the runtime's own hold on `program` (its cache entry, and the device state it
    /// keeps for it, such as an XRT hardware context); the device state goes once no handle
    /// is left. Loading the artifact again works.
    fn release(&self, program: &Program) {
        let _ = program;
    }

    /// Drops the runtime's hold on every program and the device state it keeps for them (the
    /// HSA queue and its hardware context, XRT's hardware contexts), as at process exit: the
    /// device is handed back while the process still runs its exit handlers, not whenever the
    /// driver notices the process died. The runtime stays usable: a later load and dispatch
    /// build what they need again.
    fn release_all(&self) {}

    /// Allocates memory the device can use in place.
    fn alloc_shared(&self, len: usize) -> Result<Box<dyn SharedBuffer>, RuntimeError>;

    /// Where this runtime's shared buffers are, so the checks can place each argument.
    fn shared_regions(&self) -> Option<&SharedRegions> {
        None
    }

    /// Runs a checked launch once and waits for it. Arguments the kernel writes are copied
    /// back into host memory unless they were passed in place.
    fn run(&self, launch: &Launch<'_>) -> Result<DispatchReport, RuntimeError>;

    /// Checks `args` (in signature order) against `program` and `options`, then runs it.
    /// Every runtime shares this; do not override it.
    fn dispatch(
        &self,
        program: &Program,
        args: &[HostArg],
        options: &DispatchOptions<'_>,
    ) -> Result<DispatchReport, RuntimeError> {
        let launch = Launch::check(program, args, options, self.shared_regions())?;
        self.run(&launch)
    }
}
