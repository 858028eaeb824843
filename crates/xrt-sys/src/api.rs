//! Owned, reference-counted wrappers around the shim's handles (buffers in [`crate::bo`],
//! runs in [`crate::run`]).
//!
//! Each wrapper keeps its parents alive (a kernel its context, a context its device and its
//! xclbin or ELF), so handles are released children-first whatever order the owner drops
//! them in, as XRT requires. Release failures cannot be returned from `Drop`; they are logged.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::bindings::{self as b};
use crate::bo::{Bo, BoFlags, BoKind};
use crate::error::XrtSysError;
use crate::loader::Shim;
use crate::run::Run;
use crate::state::CommandState;

pub(crate) const ERR_LEN: usize = 2048;
const NAME_LEN: usize = 512;

/// The error buffer of one shim call, on the caller's stack and never zeroed: the shim's
/// calls all run inside its `guarded`, which writes a NUL-terminated message (empty on
/// success) before anything else, so only the bytes up to that NUL are ever read, and they
/// are the shim's. The first byte is cleared here too, for a shim that returned before
/// writing (it cannot, but then the message reads as empty rather than as stack garbage).
pub(crate) struct ErrBuf(MaybeUninit<[c_char; ERR_LEN]>);

impl ErrBuf {
    pub(crate) fn as_mut_ptr(&mut self) -> *mut c_char {
        self.0.as_mut_ptr().cast()
    }

    /// The message the shim wrote.
    pub(crate) fn text(&self) -> String {
        // SAFETY: the first byte is initialised (by `with_err_buf`, then the shim), and the
        // shim writes a NUL-terminated message within ERR_LEN bytes (see the type's docs).
        let message = unsafe { CStr::from_ptr(self.0.as_ptr().cast::<c_char>()) };
        message.to_string_lossy().into_owned()
    }
}

/// Runs `f` with an error buffer whose first byte is NUL (an empty message). Zeroing 2 KiB
/// on every call (several per launch) would cost more than the calls themselves.
pub(crate) fn with_err_buf<R>(f: impl FnOnce(&mut ErrBuf) -> R) -> R {
    let mut buf = ErrBuf(MaybeUninit::uninit());
    // SAFETY: writes the first element of the buffer, which is in bounds. Volatile, because
    // LLVM turns a plain store of 0 into an otherwise uninitialised buffer into a memset of
    // all of it (seen with rustc 1.95: 2 KiB zeroed per call again).
    unsafe { buf.as_mut_ptr().write_volatile(0) };
    f(&mut buf)
}

pub(crate) fn text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn c_path(what: &str, path: &Path) -> Result<CString, XrtSysError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| XrtSysError::InvalidInput {
        what: format!("{what} {}", path.display()),
        reason: "the path contains a NUL byte".to_owned(),
    })
}

fn c_string(what: &str, value: &str) -> Result<CString, XrtSysError> {
    CString::new(value).map_err(|_| XrtSysError::InvalidInput {
        what: format!("{what} {value:?}"),
        reason: "the name contains a NUL byte".to_owned(),
    })
}

impl Shim {
    /// Runs one shim call with an error buffer and turns its status into a `Result`.
    pub(crate) fn call(
        &self,
        call: &'static str,
        f: impl FnOnce(*mut c_char, usize) -> c_int,
    ) -> Result<(), XrtSysError> {
        let (status, message) = with_err_buf(|err| {
            let status = f(err.as_mut_ptr(), ERR_LEN);
            let failed = status != b::TRITON_NPU_XRT_OK as c_int;
            (status, failed.then(|| err.text()))
        });
        let Some(mut message) = message else {
            return Ok(());
        };
        if message.is_empty() {
            message = format!("status {status} without a message");
        }
        Err(XrtSysError::Call {
            call,
            status,
            message,
        })
    }

    /// A call that writes a string result.
    fn call_text(
        &self,
        call: &'static str,
        f: impl FnOnce(*mut c_char, usize, *mut c_char, usize) -> c_int,
    ) -> Result<String, XrtSysError> {
        let mut out = [0 as c_char; NAME_LEN];
        self.call(call, |err, errlen| {
            f(out.as_mut_ptr(), NAME_LEN, err, errlen)
        })?;
        Ok(text(&out))
    }

    /// A call that makes a handle through an out pointer: its status, then a NULL check (a
    /// shim that reports success with a NULL handle is an error, never a handle).
    pub(crate) fn create<T>(
        &self,
        call: &'static str,
        f: impl FnOnce(*mut *mut T, *mut c_char, usize) -> c_int,
    ) -> Result<NonNull<T>, XrtSysError> {
        let mut raw = ptr::null_mut();
        self.call(call, |err, len| f(&mut raw, err, len))?;
        NonNull::new(raw).ok_or_else(|| null_handle(call))
    }

    /// The XRT library's version, e.g. `2.25.0`.
    pub fn xrt_version(&self) -> Result<String, XrtSysError> {
        // SAFETY: the buffers are valid for the lengths passed.
        self.call_text("triton_npu_xrt_version", |buf, len, err, errlen| unsafe {
            self.api.triton_npu_xrt_version(buf, len, err, errlen)
        })
    }

    /// The shim's name for a command state.
    pub fn state_name(&self, state: CommandState) -> String {
        // SAFETY: the function returns a static string or NULL.
        let name = unsafe { self.api.triton_npu_xrt_state_name(state.0) };
        if name.is_null() {
            return String::from("ERT_CMD_STATE_UNKNOWN");
        }
        // SAFETY: non-NULL, NUL-terminated, static.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    }
}

/// An opened device (`xrt::device`).
pub struct Device {
    shim: Arc<Shim>,
    raw: NonNull<b::triton_npu_xrt_device>,
}

// SAFETY: XRT's handles are reference-counted objects that XRT allows to be used from any
// thread; the shim holds no thread-affine state.
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl Device {
    /// Opens device `index` (upstream always uses 0).
    pub fn open(shim: &Arc<Shim>, index: u32) -> Result<Arc<Device>, XrtSysError> {
        // SAFETY: `out` is a valid out pointer.
        let raw = shim.create("triton_npu_xrt_device_open", |out, err, len| unsafe {
            shim.api.triton_npu_xrt_device_open(index, out, err, len)
        })?;
        Ok(Arc::new(Device {
            shim: Arc::clone(shim),
            raw,
        }))
    }

    pub fn shim(&self) -> &Arc<Shim> {
        &self.shim
    }

    /// The device's name (e.g. `NPU Strix`).
    pub fn name(&self) -> Result<String, XrtSysError> {
        // SAFETY: `raw` is a live device; the buffers are valid for the lengths passed.
        self.shim.call_text(
            "triton_npu_xrt_device_name",
            |buf, len, err, errlen| unsafe {
                self.shim
                    .api
                    .triton_npu_xrt_device_name(self.raw.as_ptr(), buf, len, err, errlen)
            },
        )
    }

    /// Reads an xclbin file and registers it with the device.
    pub fn register_xclbin(self: &Arc<Self>, path: &Path) -> Result<Arc<Xclbin>, XrtSysError> {
        let c = c_path("xclbin", path)?;
        // SAFETY: live device, NUL-terminated path, valid out pointer.
        let raw = self
            .shim
            .create("triton_npu_xrt_xclbin_register", |out, err, len| unsafe {
                self.shim.api.triton_npu_xrt_xclbin_register(
                    self.raw.as_ptr(),
                    c.as_ptr(),
                    out,
                    err,
                    len,
                )
            })?;
        Ok(Arc::new(Xclbin {
            device: Arc::clone(self),
            raw,
        }))
    }

    /// Makes a hardware context for a registered xclbin.
    pub fn context_from_xclbin(
        self: &Arc<Self>,
        xclbin: &Arc<Xclbin>,
    ) -> Result<Arc<Context>, XrtSysError> {
        // SAFETY: live device and xclbin, valid out pointer.
        let raw = self
            .shim
            .create(
                "triton_npu_xrt_context_from_xclbin",
                |out, err, len| unsafe {
                    self.shim.api.triton_npu_xrt_context_from_xclbin(
                        self.raw.as_ptr(),
                        xclbin.raw.as_ptr(),
                        out,
                        err,
                        len,
                    )
                },
            )
            .map_err(context_refused)?;
        Ok(self.context(raw, Source::Xclbin(Arc::clone(xclbin))))
    }

    /// Makes a hardware context for a full ELF.
    pub fn context_from_elf(self: &Arc<Self>, elf: &Arc<Elf>) -> Result<Arc<Context>, XrtSysError> {
        // SAFETY: live device and ELF, valid out pointer.
        let raw = self
            .shim
            .create("triton_npu_xrt_context_from_elf", |out, err, len| unsafe {
                self.shim.api.triton_npu_xrt_context_from_elf(
                    self.raw.as_ptr(),
                    elf.raw.as_ptr(),
                    out,
                    err,
                    len,
                )
            })
            .map_err(context_refused)?;
        Ok(self.context(raw, Source::Elf(Arc::clone(elf))))
    }

    fn context(
        self: &Arc<Self>,
        raw: NonNull<b::triton_npu_xrt_context>,
        source: Source,
    ) -> Arc<Context> {
        Arc::new(Context {
            device: Arc::clone(self),
            _source: source,
            raw,
        })
    }

    /// A buffer object `xrt::bo(device, size, flags, group)`, mapped.
    pub fn alloc_bo(
        self: &Arc<Self>,
        size: usize,
        flags: BoFlags,
        group: i32,
    ) -> Result<Bo, XrtSysError> {
        // SAFETY: live device, valid out pointer.
        let raw = self
            .shim
            .create("triton_npu_xrt_bo_alloc", |out, err, len| unsafe {
                self.shim.api.triton_npu_xrt_bo_alloc(
                    self.raw.as_ptr(),
                    size,
                    flags.0,
                    group,
                    out,
                    err,
                    len,
                )
            })?;
        self.finish_bo(raw, size, BoKind::Flags { flags, group })
    }

    /// A buffer object `xrt::ext::bo(device, size)`, mapped.
    pub fn alloc_ext_bo(self: &Arc<Self>, size: usize) -> Result<Bo, XrtSysError> {
        // SAFETY: live device, valid out pointer.
        let raw = self
            .shim
            .create("triton_npu_xrt_ext_bo_alloc", |out, err, len| unsafe {
                self.shim
                    .api
                    .triton_npu_xrt_ext_bo_alloc(self.raw.as_ptr(), size, out, err, len)
            })?;
        self.finish_bo(raw, size, BoKind::Ext)
    }

    fn finish_bo(
        self: &Arc<Self>,
        raw: NonNull<b::triton_npu_xrt_bo>,
        size: usize,
        kind: BoKind,
    ) -> Result<Bo, XrtSysError> {
        let mut bo = Bo {
            device: Arc::clone(self),
            raw,
            map: NonNull::dangling(),
            size,
            kind,
            id: crate::bo::next_id(),
        };
        let mut map: *mut c_void = ptr::null_mut();
        // SAFETY: live BO, valid out pointer. On error `bo` is dropped, which frees it.
        self.shim.call("triton_npu_xrt_bo_map", |err, len| unsafe {
            self.shim
                .api
                .triton_npu_xrt_bo_map(raw.as_ptr(), &mut map, err, len)
        })?;
        bo.map = NonNull::new(map.cast()).ok_or_else(|| null_handle("triton_npu_xrt_bo_map"))?;
        Ok(bo)
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: last owner of a live device; its children hold an Arc to it, so none is left.
        let r = self
            .shim
            .call("triton_npu_xrt_device_close", |err, len| unsafe {
                self.shim
                    .api
                    .triton_npu_xrt_device_close(self.raw.as_ptr(), err, len)
            });
        log_release(r);
    }
}

/// A context call that XRT failed (an exception from `xrt::hw_context`'s constructor): the
/// driver refused the context. The shim's own argument errors stay what they are.
fn context_refused(e: XrtSysError) -> XrtSysError {
    match e {
        XrtSysError::Call {
            call,
            status,
            message,
        } if status == b::TRITON_NPU_XRT_E_XRT as i32 => {
            XrtSysError::ContextRefused { call, message }
        }
        other => other,
    }
}

pub(crate) fn null_handle(call: &'static str) -> XrtSysError {
    XrtSysError::Call {
        call,
        status: b::TRITON_NPU_XRT_OK as i32,
        message: "reported success but returned a NULL handle".to_owned(),
    }
}

pub(crate) fn log_release(result: Result<(), XrtSysError>) {
    if let Err(e) = result {
        tracing::warn!("releasing an XRT object: {e}");
    }
}

/// A registered xclbin (`xrt::xclbin`).
pub struct Xclbin {
    device: Arc<Device>,
    raw: NonNull<b::triton_npu_xrt_xclbin>,
}

// SAFETY: as for Device.
unsafe impl Send for Xclbin {}
unsafe impl Sync for Xclbin {}

/// A kernel an xclbin declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XclbinKernel {
    pub name: String,
    /// All of its arguments, scalars included.
    pub num_args: u32,
}

impl Xclbin {
    /// The first kernel whose name starts with `prefix`.
    pub fn find_kernel(&self, prefix: &str) -> Result<XclbinKernel, XrtSysError> {
        let c = c_string("kernel name prefix", prefix)?;
        let shim = &self.device.shim;
        let mut num_args = 0u32;
        // SAFETY: live xclbin, NUL-terminated prefix, valid buffers and out pointer.
        let name = shim.call_text(
            "triton_npu_xrt_xclbin_find_kernel",
            |buf, len, err, errlen| unsafe {
                shim.api.triton_npu_xrt_xclbin_find_kernel(
                    self.raw.as_ptr(),
                    c.as_ptr(),
                    buf,
                    len,
                    &mut num_args,
                    err,
                    errlen,
                )
            },
        )?;
        Ok(XclbinKernel { name, num_args })
    }
}

impl Drop for Xclbin {
    fn drop(&mut self) {
        let shim = &self.device.shim;
        // SAFETY: last owner of a live xclbin.
        log_release(shim.call("triton_npu_xrt_xclbin_free", |err, len| unsafe {
            shim.api
                .triton_npu_xrt_xclbin_free(self.raw.as_ptr(), err, len)
        }));
    }
}

/// A full ELF (`xrt::elf`).
pub struct Elf {
    shim: Arc<Shim>,
    raw: NonNull<b::triton_npu_xrt_elf>,
}

// SAFETY: as for Device.
unsafe impl Send for Elf {}
unsafe impl Sync for Elf {}

impl Elf {
    pub fn open(shim: &Arc<Shim>, path: &Path) -> Result<Arc<Elf>, XrtSysError> {
        let c = c_path("ELF", path)?;
        // SAFETY: NUL-terminated path, valid out pointer.
        let raw = shim.create("triton_npu_xrt_elf_open", |out, err, len| unsafe {
            shim.api.triton_npu_xrt_elf_open(c.as_ptr(), out, err, len)
        })?;
        Ok(Arc::new(Elf {
            shim: Arc::clone(shim),
            raw,
        }))
    }
}

impl Drop for Elf {
    fn drop(&mut self) {
        // SAFETY: last owner of a live ELF.
        log_release(
            self.shim
                .call("triton_npu_xrt_elf_free", |err, len| unsafe {
                    self.shim
                        .api
                        .triton_npu_xrt_elf_free(self.raw.as_ptr(), err, len)
                }),
        );
    }
}

// Held only to keep the context's xclbin or ELF alive as long as the context.
#[allow(dead_code)]
enum Source {
    Xclbin(Arc<Xclbin>),
    Elf(Arc<Elf>),
}

/// A hardware context (`xrt::hw_context`).
pub struct Context {
    device: Arc<Device>,
    _source: Source,
    raw: NonNull<b::triton_npu_xrt_context>,
}

// SAFETY: as for Device.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Context {
    /// `xrt::kernel(context, name)`.
    pub fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel, XrtSysError> {
        self.open_kernel(name, false)
    }

    /// `xrt::ext::kernel(context, "<kernel>:<instance>")`.
    pub fn ext_kernel(self: &Arc<Self>, name: &str) -> Result<Kernel, XrtSysError> {
        self.open_kernel(name, true)
    }

    fn open_kernel(self: &Arc<Self>, name: &str, ext: bool) -> Result<Kernel, XrtSysError> {
        let c = c_string("kernel", name)?;
        let shim = &self.device.shim;
        let (call, open) = if ext {
            (
                "triton_npu_xrt_ext_kernel_open",
                shim.api.triton_npu_xrt_ext_kernel_open,
            )
        } else {
            (
                "triton_npu_xrt_kernel_open",
                shim.api.triton_npu_xrt_kernel_open,
            )
        };
        // SAFETY: live context, NUL-terminated name, valid out pointer.
        let raw = shim.create(call, |out, err, len| unsafe {
            open(self.raw.as_ptr(), c.as_ptr(), out, err, len)
        })?;
        Ok(Kernel {
            context: Arc::clone(self),
            raw,
            name: name.to_owned(),
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let shim = &self.device.shim;
        // SAFETY: last owner of a live context; kernels hold an Arc to it, so none is left.
        log_release(shim.call("triton_npu_xrt_context_free", |err, len| unsafe {
            shim.api
                .triton_npu_xrt_context_free(self.raw.as_ptr(), err, len)
        }));
    }
}

/// A kernel (`xrt::kernel` or `xrt::ext::kernel`).
pub struct Kernel {
    context: Arc<Context>,
    pub(crate) raw: NonNull<b::triton_npu_xrt_kernel>,
    name: String,
}

// SAFETY: as for Device.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn shim(&self) -> &Shim {
        &self.context.device.shim
    }

    /// The memory group for argument `argno`'s buffer.
    pub fn group_id(&self, argno: i32) -> Result<i32, XrtSysError> {
        let shim = self.shim();
        let mut group = 0;
        // SAFETY: live kernel, valid out pointer.
        shim.call("triton_npu_xrt_kernel_group_id", |err, len| unsafe {
            shim.api
                .triton_npu_xrt_kernel_group_id(self.raw.as_ptr(), argno, &mut group, err, len)
        })?;
        Ok(group)
    }

    /// A new run of this kernel (reusable: see [`Run`]).
    pub fn run(self: &Arc<Self>) -> Result<Run, XrtSysError> {
        let shim = self.shim();
        // SAFETY: live kernel, valid out pointer.
        let raw = shim.create("triton_npu_xrt_run_create", |out, err, len| unsafe {
            shim.api
                .triton_npu_xrt_run_create(self.raw.as_ptr(), out, err, len)
        })?;
        Ok(Run::new(Arc::clone(self), raw))
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        let shim = &self.context.device.shim;
        // SAFETY: last owner of a live kernel; runs hold an Arc to it, so none is left.
        log_release(shim.call("triton_npu_xrt_kernel_free", |err, len| unsafe {
            shim.api
                .triton_npu_xrt_kernel_free(self.raw.as_ptr(), err, len)
        }));
    }
}
