//! The stand-in's state: every object the shim ABI hands out, kept by handle, and the rules
//! of XRT's call order enforced on them.
//!
//! Handles are numbers from one counter (never pointers), so a stale, foreign or mistyped
//! handle is an error rather than undefined behaviour. Buffer objects have separate host and
//! device memory: a sync copies between them and a run only sees device memory, so a missing
//! sync gives wrong results exactly as on hardware (and a run refuses host data that was
//! changed and not synced).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use xrt_sys::bindings as b;

use crate::elf::{self, Instance};
use crate::faults::{self, Fault};
use crate::xclbin::{self, ArgKind};

mod exec;

/// A refusal: the status the ABI returns and the message it writes.
#[derive(Debug)]
pub struct Failure {
    pub status: u32,
    pub message: String,
}

impl Failure {
    /// What real XRT would throw: TRITON_NPU_XRT_E_XRT.
    pub fn xrt(message: impl Into<String>) -> Failure {
        Failure {
            status: b::TRITON_NPU_XRT_E_XRT,
            message: message.into(),
        }
    }

    /// A bad argument to the shim: TRITON_NPU_XRT_E_INVALID.
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            status: b::TRITON_NPU_XRT_E_INVALID,
            message: message.into(),
        }
    }
}

pub type Outcome<T> = Result<T, Failure>;

/// Counters tests read through `npu_harness_xrt_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub devices_opened: u64,
    pub xclbins_registered: u64,
    pub contexts_created: u64,
    pub contexts_alive: u64,
    pub kernels_opened: u64,
    pub bos_allocated: u64,
    pub bos_alive: u64,
    pub runs_started: u64,
    pub runs_completed: u64,
    /// Aborts requested (every one is refused, as amdxdna refuses them; see `run_abort`).
    pub runs_aborted: u64,
    pub syncs_to_device: u64,
    pub syncs_from_device: u64,
    /// Run objects created (`run_create`); with `runs_started`, shows how often runs are reused.
    pub runs_created: u64,
    /// Hung commands cancelled by destroying their hardware context.
    pub runs_cancelled: u64,
}

struct Device {
    name: String,
}

struct XclbinObj {
    device: usize,
    parsed: xclbin::Xclbin,
}

struct ElfObj {
    instances: Vec<Instance>,
}

enum Source {
    Xclbin(usize),
    Elf(usize),
}

struct Context {
    device: usize,
    source: Source,
    /// Commands on this context that will never finish (the `hang` fault). Later commands
    /// queue behind them; destroying the context cancels them all (amdxdna's context
    /// teardown), which is the only way to end them: the driver has no abort.
    hung: u64,
}

enum KernelKind {
    /// An xclbin kernel with its declared arguments.
    Xclbin(xclbin::Kernel),
    /// An ELF kernel instance with its control code.
    Ext { ctrltext: Vec<u8> },
}

struct Kernel {
    context: usize,
    name: String,
    kind: KernelKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BoKind {
    Flags { flags: u32, group: i32 },
    Ext,
}

struct Bo {
    device: usize,
    kind: BoKind,
    /// The mapping handed to the caller, who writes it without holding our lock.
    host: HostMemory,
    device_mem: Vec<u8>,
    /// The host contents as of the last sync of each byte.
    host_at_sync: Vec<u8>,
}

/// Host memory shared with the caller through a raw pointer; only touched through copies.
struct HostMemory {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the memory is a plain heap allocation owned by this struct.
unsafe impl Send for HostMemory {}

impl HostMemory {
    fn new(len: usize) -> HostMemory {
        let boxed = vec![0u8; len].into_boxed_slice();
        HostMemory {
            len,
            ptr: Box::into_raw(boxed).cast(),
        }
    }

    fn read_into(&self, offset: usize, out: &mut [u8]) {
        // SAFETY: callers keep `offset + out.len() <= self.len`; the copy never forms a
        // reference to memory the caller may be writing.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), out.as_mut_ptr(), out.len()) };
    }

    /// Whether the memory holds `expected` (from offset 0), compared through a small copy on
    /// the stack: run starts check every argument, and a heap copy of each buffer per start
    /// made the stand-in's own bookkeeping dominate a no-op launch.
    fn holds(&self, expected: &[u8]) -> bool {
        const CHUNK: usize = 512;
        let mut chunk = [0u8; CHUNK];
        expected.len() == self.len
            && expected.chunks(CHUNK).enumerate().all(|(i, want)| {
                let got = &mut chunk[..want.len()];
                self.read_into(i * CHUNK, got);
                got == want
            })
    }

    fn write(&self, offset: usize, data: &[u8]) {
        // SAFETY: callers keep `offset + data.len() <= self.len`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(offset), data.len()) };
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::into_raw of a slice of `len` bytes.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

#[derive(Debug, Clone)]
enum ArgValue {
    Bo(usize),
    Scalar(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RunState {
    New,
    /// Started and never completing (the `hang` fault).
    Hung,
    Done {
        state: i32,
        message: String,
        /// A wait, a state query or an abort reported the end to the host. Only then may the
        /// host change the arguments and start the run again: before, as far as it knows, the
        /// run may still be going (XRT leaves changing a running run's arguments undefined).
        seen: bool,
    },
}

impl RunState {
    /// Whether the host may set arguments and start: a new run, or one it saw finish.
    fn idle(&self) -> bool {
        matches!(self, RunState::New | RunState::Done { seen: true, .. })
    }

    /// Records that the host learned the run finished.
    fn see(&mut self) {
        if let RunState::Done { seen, .. } = self {
            *seen = true;
        }
    }
}

struct Run {
    kernel: usize,
    args: BTreeMap<i32, ArgValue>,
    state: RunState,
}

/// What a waiter should do after looking at a run under the lock.
pub enum WaitStep {
    Finished {
        state: i32,
        message: String,
    },
    /// The run hangs: sleep out the timeout (without the lock), then report a timeout.
    Sleep(Option<Duration>),
}

#[derive(Default)]
pub struct World {
    next: usize,
    devices: HashMap<usize, Device>,
    xclbins: HashMap<usize, XclbinObj>,
    elfs: HashMap<usize, ElfObj>,
    contexts: HashMap<usize, Context>,
    kernels: HashMap<usize, Kernel>,
    bos: HashMap<usize, Bo>,
    runs: HashMap<usize, Run>,
    pub stats: Stats,
}

fn lookup<'m, T>(map: &'m HashMap<usize, T>, handle: usize, what: &str) -> Outcome<&'m T> {
    map.get(&handle)
        .ok_or_else(|| Failure::invalid(format!("{what} handle {handle:#x} is not open")))
}

fn lookup_mut<'m, T>(
    map: &'m mut HashMap<usize, T>,
    handle: usize,
    what: &str,
) -> Outcome<&'m mut T> {
    map.get_mut(&handle)
        .ok_or_else(|| Failure::invalid(format!("{what} handle {handle:#x} is not open")))
}

const FIRST_BUFFER_ARG: i32 = 3;

impl World {
    fn handle(&mut self) -> usize {
        self.next += 1;
        0x1000 + self.next * 0x10
    }

    pub fn device_open(&mut self, index: u32) -> Outcome<usize> {
        let name = faults::device_name();
        if index != 0 || name.is_none() {
            return Err(Failure::xrt(format!(
                "Could not open device with index '{index}'"
            )));
        }
        let h = self.handle();
        self.devices.insert(
            h,
            Device {
                name: name.unwrap_or_default(),
            },
        );
        self.stats.devices_opened += 1;
        Ok(h)
    }

    pub fn device_name(&self, device: usize) -> Outcome<String> {
        Ok(lookup(&self.devices, device, "device")?.name.clone())
    }

    pub fn device_close(&mut self, device: usize) -> Outcome<()> {
        lookup(&self.devices, device, "device")?;
        let users = self.xclbins.values().filter(|x| x.device == device).count()
            + self
                .contexts
                .values()
                .filter(|c| c.device == device)
                .count()
            + self.bos.values().filter(|b| b.device == device).count();
        if users > 0 {
            return Err(Failure::xrt(format!(
                "device closed while {users} xclbins, contexts or buffers made on it are still \
                 open (release children before the device)"
            )));
        }
        self.devices.remove(&device);
        Ok(())
    }

    pub fn xclbin_register(&mut self, device: usize, path: &str) -> Outcome<usize> {
        lookup(&self.devices, device, "device")?;
        let bytes = std::fs::read(path)
            .map_err(|e| Failure::xrt(format!("Failed to open xclbin file {path}: {e}")))?;
        let parsed = xclbin::parse(&bytes).map_err(|e| Failure::xrt(format!("{path}: {e}")))?;
        let h = self.handle();
        self.xclbins.insert(h, XclbinObj { device, parsed });
        self.stats.xclbins_registered += 1;
        Ok(h)
    }

    pub fn xclbin_find_kernel(&self, xclbin: usize, prefix: &str) -> Outcome<(String, u32)> {
        let x = lookup(&self.xclbins, xclbin, "xclbin")?;
        match x.parsed.kernels.iter().find(|k| k.name.starts_with(prefix)) {
            Some(k) => Ok((k.name.clone(), k.args.len() as u32)),
            None => {
                let names: Vec<_> = x.parsed.kernels.iter().map(|k| k.name.as_str()).collect();
                Err(Failure {
                    status: b::TRITON_NPU_XRT_E_NOT_FOUND,
                    message: format!(
                        "no kernel whose name starts with \"{prefix}\" (kernels: {})",
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    ),
                })
            }
        }
    }

    pub fn xclbin_free(&mut self, xclbin: usize) -> Outcome<()> {
        lookup(&self.xclbins, xclbin, "xclbin")?;
        if self
            .contexts
            .values()
            .any(|c| matches!(c.source, Source::Xclbin(x) if x == xclbin))
        {
            return Err(Failure::xrt(
                "xclbin freed while a hardware context made from it is open",
            ));
        }
        self.xclbins.remove(&xclbin);
        Ok(())
    }

    pub fn elf_open(&mut self, path: &str) -> Outcome<usize> {
        let bytes = std::fs::read(path)
            .map_err(|e| Failure::xrt(format!("Failed to open ELF file {path}: {e}")))?;
        let instances = elf::instances(&bytes).map_err(|e| Failure::xrt(format!("{path}: {e}")))?;
        let h = self.handle();
        self.elfs.insert(h, ElfObj { instances });
        Ok(h)
    }

    pub fn elf_free(&mut self, elf: usize) -> Outcome<()> {
        lookup(&self.elfs, elf, "elf")?;
        if self
            .contexts
            .values()
            .any(|c| matches!(c.source, Source::Elf(e) if e == elf))
        {
            return Err(Failure::xrt(
                "ELF freed while a hardware context made from it is open",
            ));
        }
        self.elfs.remove(&elf);
        Ok(())
    }

    /// A new hardware context, refused as amdxdna refuses it once the device's limit is
    /// reached (`aie2_rq_add`: "Not allow more than %d context(s)", -ENOENT).
    fn new_context(&mut self, device: usize, source: Source) -> Outcome<usize> {
        let limit = faults::context_limit(&lookup(&self.devices, device, "device")?.name);
        let open = self
            .contexts
            .values()
            .filter(|c| c.device == device)
            .count();
        if open >= limit {
            return Err(Failure::xrt(format!(
                "DRM_IOCTL_AMDXDNA_CREATE_HWCTX IOCTL failed (err=-2): No such file or directory \
                 (amdxdna: Not allow more than {limit} context(s); {open} are open)"
            )));
        }
        let h = self.handle();
        self.contexts.insert(
            h,
            Context {
                device,
                source,
                hung: 0,
            },
        );
        self.stats.contexts_created += 1;
        self.stats.contexts_alive = self.contexts.len() as u64;
        Ok(h)
    }

    pub fn context_from_xclbin(&mut self, device: usize, xclbin: usize) -> Outcome<usize> {
        lookup(&self.devices, device, "device")?;
        let x = lookup(&self.xclbins, xclbin, "xclbin")?;
        if x.device != device {
            return Err(Failure::xrt(
                "the xclbin is not registered with this device (register_xclbin first)",
            ));
        }
        self.new_context(device, Source::Xclbin(xclbin))
    }

    pub fn context_from_elf(&mut self, device: usize, elf: usize) -> Outcome<usize> {
        lookup(&self.devices, device, "device")?;
        lookup(&self.elfs, elf, "elf")?;
        self.new_context(device, Source::Elf(elf))
    }

    pub fn context_free(&mut self, context: usize) -> Outcome<()> {
        lookup(&self.contexts, context, "context")?;
        let kernels = self
            .kernels
            .values()
            .filter(|k| k.context == context)
            .count();
        if kernels > 0 {
            return Err(Failure::xrt(format!(
                "hardware context freed while {kernels} kernels opened in it are open"
            )));
        }
        if let Some(ctx) = self.contexts.remove(&context) {
            self.stats.runs_cancelled += ctx.hung;
        }
        self.stats.contexts_alive = self.contexts.len() as u64;
        Ok(())
    }

    pub fn kernel_open(&mut self, context: usize, name: &str, ext: bool) -> Outcome<usize> {
        let ctx = lookup(&self.contexts, context, "context")?;
        let kind = match (&ctx.source, ext) {
            (Source::Xclbin(x), false) => {
                let xclbin = &lookup(&self.xclbins, *x, "xclbin")?.parsed;
                let kernel = xclbin
                    .kernels
                    .iter()
                    .find(|k| k.name == name)
                    .ok_or_else(|| {
                        Failure::xrt(format!("No such kernel '{name}' in the context's xclbin"))
                    })?;
                KernelKind::Xclbin(kernel.clone())
            }
            (Source::Elf(e), true) => {
                let instances = &lookup(&self.elfs, *e, "elf")?.instances;
                let instance = instances.iter().find(|i| i.name == name).ok_or_else(|| {
                    let names: Vec<_> = instances.iter().map(|i| i.name.as_str()).collect();
                    Failure::xrt(format!(
                        "No kernel instance '{name}' in the context's ELF (it has: {})",
                        names.join(", ")
                    ))
                })?;
                KernelKind::Ext {
                    ctrltext: instance.ctrltext.clone(),
                }
            }
            (Source::Xclbin(_), true) => {
                return Err(Failure::xrt(
                    "xrt::ext::kernel by name needs a context made from an ELF; this one was made \
                     from an xclbin",
                ));
            }
            (Source::Elf(_), false) => {
                return Err(Failure::xrt(
                    "xrt::kernel needs a context made from an xclbin; use xrt::ext::kernel for \
                     an ELF context",
                ));
            }
        };
        let h = self.handle();
        self.kernels.insert(
            h,
            Kernel {
                context,
                name: name.to_owned(),
                kind,
            },
        );
        self.stats.kernels_opened += 1;
        Ok(h)
    }

    pub fn kernel_group_id(&self, kernel: usize, argno: i32) -> Outcome<i32> {
        let k = lookup(&self.kernels, kernel, "kernel")?;
        match &k.kind {
            KernelKind::Xclbin(x) => match x.args.get(argno as usize).map(|a| &a.kind) {
                Some(ArgKind::Global { group }) if *group >= 0 => Ok(*group),
                Some(ArgKind::Global { .. }) => Err(Failure::xrt(format!(
                    "argument {argno} of kernel {} has no memory connection",
                    k.name
                ))),
                Some(ArgKind::Scalar { .. }) => Err(Failure::xrt(format!(
                    "argument {argno} of kernel {} is a scalar and has no memory group",
                    k.name
                ))),
                None => Err(Failure::xrt(format!(
                    "Bad argument index '{argno}' (kernel {} has {} arguments)",
                    k.name,
                    x.args.len()
                ))),
            },
            KernelKind::Ext { .. } => Err(Failure::xrt(
                "ELF kernels have no memory groups; allocate their buffers with xrt::ext::bo",
            )),
        }
    }

    pub fn kernel_free(&mut self, kernel: usize) -> Outcome<()> {
        lookup(&self.kernels, kernel, "kernel")?;
        let runs = self.runs.values().filter(|r| r.kernel == kernel).count();
        if runs > 0 {
            return Err(Failure::xrt(format!(
                "kernel freed while {runs} of its runs are open"
            )));
        }
        self.kernels.remove(&kernel);
        Ok(())
    }

    fn new_bo(&mut self, device: usize, size: usize, kind: BoKind) -> Outcome<usize> {
        lookup(&self.devices, device, "device")?;
        if size == 0 {
            return Err(Failure::xrt("cannot allocate a buffer object of size 0"));
        }
        let h = self.handle();
        self.bos.insert(
            h,
            Bo {
                device,
                kind,
                host: HostMemory::new(size),
                device_mem: vec![0; size],
                host_at_sync: vec![0; size],
            },
        );
        self.stats.bos_allocated += 1;
        self.stats.bos_alive = self.bos.len() as u64;
        Ok(h)
    }

    pub fn bo_alloc(
        &mut self,
        device: usize,
        size: usize,
        flags: u32,
        group: i32,
    ) -> Outcome<usize> {
        let known = b::TRITON_NPU_XRT_BO_CACHEABLE | b::TRITON_NPU_XRT_BO_HOST_ONLY;
        if flags & !known != 0 {
            return Err(Failure::xrt(format!(
                "buffer flags {flags:#x}: the NPU stand-in knows normal, cacheable and host_only"
            )));
        }
        self.new_bo(device, size, BoKind::Flags { flags, group })
    }

    pub fn ext_bo_alloc(&mut self, device: usize, size: usize) -> Outcome<usize> {
        self.new_bo(device, size, BoKind::Ext)
    }

    pub fn bo_map(&self, bo: usize) -> Outcome<*mut u8> {
        Ok(lookup(&self.bos, bo, "bo")?.host.ptr)
    }

    pub fn bo_sync(
        &mut self,
        bo: usize,
        direction: i32,
        size: usize,
        offset: usize,
    ) -> Outcome<()> {
        let buf = lookup_mut(&mut self.bos, bo, "bo")?;
        let len = buf.device_mem.len();
        let end = offset
            .checked_add(size)
            .filter(|end| *end <= len)
            .ok_or_else(|| {
                Failure::xrt(format!(
                    "sync of {size} bytes at offset {offset} exceeds the buffer's {len} bytes"
                ))
            })?;
        match direction as u32 {
            b::TRITON_NPU_XRT_SYNC_TO_DEVICE => {
                buf.host.read_into(offset, &mut buf.device_mem[offset..end]);
                buf.host_at_sync[offset..end].copy_from_slice(&buf.device_mem[offset..end]);
                self.stats.syncs_to_device += 1;
            }
            b::TRITON_NPU_XRT_SYNC_FROM_DEVICE => {
                let data = buf.device_mem[offset..end].to_vec();
                buf.host.write(offset, &data);
                buf.host_at_sync[offset..end].copy_from_slice(&data);
                self.stats.syncs_from_device += 1;
            }
            d => return Err(Failure::invalid(format!("unknown sync direction {d}"))),
        }
        Ok(())
    }

    pub fn bo_free(&mut self, bo: usize) -> Outcome<()> {
        lookup(&self.bos, bo, "bo")?;
        self.bos.remove(&bo);
        self.stats.bos_alive = self.bos.len() as u64;
        Ok(())
    }

    pub fn run_create(&mut self, kernel: usize) -> Outcome<usize> {
        lookup(&self.kernels, kernel, "kernel")?;
        let h = self.handle();
        self.stats.runs_created += 1;
        self.runs.insert(
            h,
            Run {
                kernel,
                args: BTreeMap::new(),
                state: RunState::New,
            },
        );
        Ok(h)
    }

    pub fn run_set_arg_bo(&mut self, run: usize, index: i32, bo: usize) -> Outcome<()> {
        let r = lookup(&self.runs, run, "run")?;
        let k = lookup(&self.kernels, r.kernel, "kernel")?;
        let buf = lookup(&self.bos, bo, "bo")?;
        let ctx = lookup(&self.contexts, k.context, "context")?;
        if buf.device != ctx.device {
            return Err(Failure::xrt("the buffer belongs to another device"));
        }
        match &k.kind {
            KernelKind::Xclbin(x) => match x.args.get(index as usize).map(|a| &a.kind) {
                Some(ArgKind::Global { group }) => match buf.kind {
                    BoKind::Flags { group: g, .. } if g == *group => {}
                    BoKind::Flags { group: g, .. } => {
                        return Err(Failure::xrt(format!(
                            "argument {index} ({}) of kernel {} is in memory group {group}, \
                             the buffer was allocated for group {g} (use kernel.group_id({index}))",
                            x.args[index as usize].name, k.name
                        )));
                    }
                    BoKind::Ext => {
                        return Err(Failure::xrt(format!(
                            "argument {index} of xclbin kernel {}: an xrt::ext::bo has no memory \
                             group; allocate xrt::bo(device, size, flags, kernel.group_id({index}))",
                            k.name
                        )));
                    }
                },
                Some(ArgKind::Scalar { .. }) => {
                    return Err(Failure::xrt(format!(
                        "argument {index} of kernel {} is a scalar, not a buffer",
                        k.name
                    )));
                }
                None => {
                    return Err(Failure::xrt(format!(
                        "Bad argument index '{index}' (kernel {} has {} arguments)",
                        k.name,
                        x.args.len()
                    )));
                }
            },
            KernelKind::Ext { .. } => {
                if buf.kind != BoKind::Ext {
                    return Err(Failure::xrt(format!(
                        "argument {index} of ELF kernel {}: allocate its buffer with \
                         xrt::ext::bo(device, size)",
                        k.name
                    )));
                }
                if index < 0 {
                    return Err(Failure::xrt(format!("Bad argument index '{index}'")));
                }
            }
        }
        self.set_arg(run, index, ArgValue::Bo(bo))
    }

    pub fn run_set_arg_scalar(&mut self, run: usize, index: i32, value: Vec<u8>) -> Outcome<()> {
        let r = lookup(&self.runs, run, "run")?;
        let k = lookup(&self.kernels, r.kernel, "kernel")?;
        match &k.kind {
            KernelKind::Xclbin(x) => match x.args.get(index as usize).map(|a| &a.kind) {
                Some(ArgKind::Scalar { size }) if *size == value.len() => {}
                Some(ArgKind::Scalar { size }) => {
                    return Err(Failure::xrt(format!(
                        "Bad argument size '{}' for argument {index} ({}) of kernel {}: it is \
                         declared with {size} bytes",
                        value.len(),
                        x.args[index as usize].name,
                        k.name
                    )));
                }
                Some(ArgKind::Global { .. }) => {
                    return Err(Failure::xrt(format!(
                        "argument {index} of kernel {} is a buffer, not a scalar",
                        k.name
                    )));
                }
                None => {
                    return Err(Failure::xrt(format!(
                        "Bad argument index '{index}' (kernel {} has {} arguments)",
                        k.name,
                        x.args.len()
                    )));
                }
            },
            KernelKind::Ext { .. } => {
                return Err(Failure::xrt(format!(
                    "ELF kernel {} takes buffer arguments only",
                    k.name
                )));
            }
        }
        self.set_arg(run, index, ArgValue::Scalar(value))
    }

    fn set_arg(&mut self, run: usize, index: i32, value: ArgValue) -> Outcome<()> {
        let r = lookup_mut(&mut self.runs, run, "run")?;
        if !r.state.idle() {
            return Err(Failure::xrt(
                "arguments set on a run that was started and not seen to finish (set them \
                 before start, or after a wait reports the run finished)",
            ));
        }
        r.args.insert(index, value);
        Ok(())
    }

    pub fn run_start(&mut self, run: usize) -> Outcome<()> {
        let r = lookup(&self.runs, run, "run")?;
        if !r.state.idle() {
            return Err(Failure::xrt(
                "run started twice without a wait seeing the first execution finish (a run \
                 starts again only after it finished)",
            ));
        }
        let k = lookup(&self.kernels, r.kernel, "kernel")?;
        // Every argument set (an xclbin may declare more buffer slots than a kernel uses, as
        // aiecc's do: trailing ones may stay unset), and every buffer synced to the device.
        let last_set = r.args.keys().next_back().map_or(0, |i| *i as usize + 1);
        let expected = match &k.kind {
            KernelKind::Xclbin(_) => last_set.max(FIRST_BUFFER_ARG as usize),
            KernelKind::Ext { .. } => last_set,
        };
        for i in 0..expected as i32 {
            match r.args.get(&i) {
                None => {
                    return Err(Failure::xrt(format!(
                        "argument {i} of kernel {} was never set",
                        k.name
                    )));
                }
                Some(ArgValue::Bo(bo)) => {
                    let buf = lookup(&self.bos, *bo, "bo (freed after set_arg)")?;
                    if !buf.host.holds(&buf.host_at_sync) {
                        return Err(Failure::xrt(format!(
                            "argument {i} of kernel {}: the buffer's host memory changed after \
                             its last sync; sync it to the device before starting the run",
                            k.name
                        )));
                    }
                }
                Some(ArgValue::Scalar(_)) => {}
            }
        }
        self.stats.runs_started += 1;
        let context = k.context;
        let blocked = lookup(&self.contexts, context, "context")?.hung > 0;
        let state = match faults::fault() {
            // A hung command blocks its context: what is queued behind it never runs.
            _ if blocked => RunState::Hung,
            Some(Fault::Hang) => RunState::Hung,
            Some(Fault::Abort) => RunState::Done {
                state: b::TRITON_NPU_XRT_STATE_ABORT as i32,
                message: "(npu-harness-xrt) the command was aborted (NPU_HARNESS_FAULT=abort)"
                    .into(),
                seen: false,
            },
            _ => match if faults::noop_device() {
                Ok(())
            } else {
                self.execute(run)
            } {
                Ok(()) => {
                    self.stats.runs_completed += 1;
                    RunState::Done {
                        state: b::TRITON_NPU_XRT_STATE_COMPLETED as i32,
                        message: String::new(),
                        seen: false,
                    }
                }
                Err(message) => RunState::Done {
                    state: b::TRITON_NPU_XRT_STATE_ERROR as i32,
                    message: format!(
                        "(npu-harness-xrt) the kernel failed on the device: {message}"
                    ),
                    seen: false,
                },
            },
        };
        if state == RunState::Hung {
            lookup_mut(&mut self.contexts, context, "context")?.hung += 1;
        }
        lookup_mut(&mut self.runs, run, "run")?.state = state;
        Ok(())
    }

    pub fn wait_step(&mut self, run: usize, timeout: Option<Duration>) -> Outcome<WaitStep> {
        let r = lookup_mut(&mut self.runs, run, "run")?;
        r.state.see();
        match &r.state {
            RunState::New => Err(Failure::xrt("wait on a run that was never started")),
            RunState::Hung => Ok(WaitStep::Sleep(timeout)),
            RunState::Done { state, message, .. } => Ok(WaitStep::Finished {
                state: *state,
                message: message.clone(),
            }),
        }
    }

    pub fn run_state(&mut self, run: usize) -> Outcome<i32> {
        let r = lookup_mut(&mut self.runs, run, "run")?;
        r.state.see();
        Ok(match &r.state {
            RunState::New => b::TRITON_NPU_XRT_STATE_NEW as i32,
            RunState::Hung => b::TRITON_NPU_XRT_STATE_RUNNING as i32,
            RunState::Done { state, .. } => *state,
        })
    }

    /// `xrt::run::abort()` submits an `ERT_ABORT` command, which amdxdna does not implement:
    /// it accepts only ERT_START_CU, ERT_START_NPU[_PREEMPT[_ELF]] and ERT_CMD_CHAIN and answers
    /// anything else with -EOPNOTSUPP (xdna-driver `src/driver/amdxdna/aie2_message.c`,
    /// "Unsupported op"). So abort always fails, and a hung run keeps going.
    pub fn run_abort(&mut self, run: usize) -> Outcome<i32> {
        let r = lookup(&self.runs, run, "run")?;
        if r.state == RunState::New {
            return Err(Failure::xrt("abort of a run that was never started"));
        }
        self.stats.runs_aborted += 1;
        Err(Failure::xrt(
            "DRM_IOCTL_AMDXDNA_EXEC_CMD IOCTL failed (err=-95): Operation not supported \
             (amdxdna: Unsupported op for ERT_ABORT; the NPU driver cannot abort a command)",
        ))
    }

    /// Frees a run. A hung command outlives its run object: it stays on its hardware context
    /// (blocking it) until the context is destroyed.
    pub fn run_free(&mut self, run: usize) -> Outcome<()> {
        lookup(&self.runs, run, "run")?;
        self.runs.remove(&run);
        Ok(())
    }
}
