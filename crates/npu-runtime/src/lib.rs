//! One small, backend-neutral [`Runtime`] trait with a module per backend (`hsa`, `xrt`).
//!
//! The driver loads a compiled kernel into a [`Program`] once and dispatches it many times.
//! Arguments are host memory ranges ([`HostArg`]); a backend stages them into device-visible
//! memory, or passes them in place when they lie inside a [`SharedBuffer`] it allocated.

use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use npu_target::RuntimeKind;

pub mod error;
pub mod hsa;
pub mod xrt;
pub use error::RuntimeError;

/// Upstream's limit on kernel arguments (`TRITON_NPU_HSA_MAX_KERNARGS`).
pub const MAX_KERNEL_ARGS: usize = 16;

/// What the compiler produced for one kernel, in the form a backend loads.
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
    /// npu1 under XRT: an xclbin and its instruction stream.
    XclbinInsts { xclbin: PathBuf, insts: PathBuf },
    /// npu2 under XRT: a full ELF and its `main:<instance>` kernel.
    Elf { elf: PathBuf, kernel_name: String },
}

/// A host memory range handed to a dispatch.
#[derive(Debug, Clone, Copy)]
pub struct HostArg {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a HostArg is only a description of memory whose validity the creator guaranteed in
// `from_raw`; moving the description between threads does not touch the memory.
unsafe impl Send for HostArg {}
unsafe impl Sync for HostArg {}

impl HostArg {
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes, and must stay valid and not be
    /// accessed by anything else until every dispatch given this argument has returned.
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Option<HostArg> {
        NonNull::new(ptr).map(|ptr| HostArg { ptr, len })
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Memory the device reads and writes in place (HSA shared region, XRT buffer object),
/// mapped into this process. Dropping it frees it.
pub trait SharedBuffer: Send + Sync {
    fn as_ptr(&self) -> *mut u8;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A loaded kernel, ready to dispatch. Cheap to clone.
#[derive(Clone)]
pub struct Program {
    pub(crate) inner: Arc<dyn std::any::Any + Send + Sync>,
    pub kernel_name: String,
    /// The number of buffer arguments the kernel expects, when the artifact says so.
    pub num_args: Option<usize>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("kernel_name", &self.kernel_name)
            .field("num_args", &self.num_args)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Wraps backend state; used by backends.
    pub fn new(
        inner: Arc<dyn std::any::Any + Send + Sync>,
        kernel_name: String,
        num_args: Option<usize>,
    ) -> Program {
        Program {
            inner,
            kernel_name,
            num_args,
        }
    }

    /// The backend state, if it is of type `T`.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.inner.downcast_ref::<T>()
    }
}

/// Options of one dispatch.
#[derive(Debug, Clone, Default)]
pub struct DispatchOptions<'a> {
    /// Which arguments the kernel writes, one flag per argument; `None` copies all back.
    pub writeback: Option<&'a [bool]>,
    /// Bound on the wait for completion; `None` waits forever.
    pub timeout: Option<Duration>,
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

/// A way of running kernels on the NPU.
pub trait Runtime: Send + Sync {
    fn kind(&self) -> RuntimeKind;

    /// The device's name as the runtime reports it (`aie2p` for an HSA agent, `NPU Strix` for
    /// XRT); used by target detection.
    fn device_name(&self) -> Result<String, RuntimeError>;

    /// Loads an artifact. Backends cache programs, so loading the same artifact twice is cheap.
    fn load(&self, artifact: &Artifact) -> Result<Program, RuntimeError>;

    /// Allocates memory the device can use in place.
    fn alloc_shared(&self, len: usize) -> Result<Box<dyn SharedBuffer>, RuntimeError>;

    /// Runs `program` once over `args` (in signature order) and waits for it. Arguments the
    /// kernel writes are copied back into host memory unless they were passed in place.
    fn dispatch(
        &self,
        program: &Program,
        args: &[HostArg],
        options: &DispatchOptions<'_>,
    ) -> Result<DispatchReport, RuntimeError>;
}
