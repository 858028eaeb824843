//! The AIE agent's single queue and its packet processor.
//!
//! A worker thread per queue wakes when the doorbell is rung and runs every packet between the
//! read and the write index: it checks the packet against the AIE packet contract, then runs
//! the harness program the kernel carries over the buffers the kernarg block names, so the
//! results depend on the data the host really passed. ROCr's failure behaviour is modelled: a
//! broken packet suspends the queue and calls the error callback without touching the
//! completion signal; later doorbells are ignored until the queue is destroyed.

use std::alloc::Layout;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use hsa_sys::aie::*;
use hsa_sys::*;
use npu_harness_program::Program;

use crate::code::{self, KernelObject};
use crate::hsaco::{Code, Kernel};
use crate::memory;
use crate::signal;
use crate::state::{self, AgentConfig, FaultKind, STATS, lock};

/// Buffer start addresses the shim DMAs can use: their buffer descriptors hold addresses in
/// 32-bit words (aie-rt `Aie2ShimDmaProp`: `AddrAlignShift` 2).
const DMA_ALIGNMENT: usize = 4;

/// Distinct PDIs one queue's hardware context caches: one bit each in a 32-bit CU mask
/// (ROCr `amd_xdna_driver.h` `PDICache`, real-toolchain-rules.md §5).
pub const MAX_PDIS: usize = 32;

/// The only queue size the AIE agent accepts.
pub const QUEUE_SIZE: u32 = 64;

pub type ErrorCallback = unsafe extern "C" fn(hsa_status_t, *mut hsa_queue_t, *mut c_void);

/// Why a packet did not complete normally.
enum Outcome {
    /// The packet broke the contract: suspend the queue, call the callback, leave the signal.
    Breach(hsa_status_t, String),
    /// ROCr cannot take the packet now (a limit was reached): reported like a breach, but it
    /// is not one.
    Refused(hsa_status_t, String),
    /// The simulated device failed the kernel: complete it with a negative signal.
    DeviceError(String),
    /// `NPU_HARNESS_FAULT`.
    Fault(FaultKind),
}

#[derive(Default)]
struct Control {
    /// Incremented by every doorbell store.
    rings: u64,
    shutdown: bool,
    /// Set after an error: later packets are not processed.
    suspended: bool,
    /// The PDIs this queue's hardware context has cached.
    pdis: HashSet<(u64, usize)>,
    /// The design the aie2p firmware loaded last on this hardware context (its kernel
    /// object), with the external variables (scratchpad) it read at that load. The firmware
    /// skips a `load_pdi` of the PDI it loaded last, so the array is not reset and a design
    /// dispatched twice in a row reads the scratchpad of the earlier dispatch (README, "aie2p
    /// firmware quirk").
    last_load: Option<(usize, Vec<Vec<u8>>)>,
}

pub struct Queue {
    /// The `hsa_queue_t` handed to the host; boxed so its address is stable.
    hsa: Box<hsa_queue_t>,
    ring: *mut u8,
    ring_layout: Layout,
    write_index: AtomicU64,
    read_index: AtomicU64,
    callback: ErrorCallback,
    callback_data: usize,
    control: Mutex<Control>,
    wake: Condvar,
    config: Arc<AgentConfig>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// One packet processor at a time (worker thread or a synchronous doorbell).
    processing: Mutex<()>,
}

// SAFETY: the raw ring pointer is owned by the queue and only read by the worker; the host
// writes slots through the address it was given, which is the protocol of an HSA queue.
unsafe impl Send for Queue {}
unsafe impl Sync for Queue {}

static QUEUES: Mutex<Option<HashMap<usize, Arc<Queue>>>> = Mutex::new(None);
/// Packets processed since `hsa_init`, for `NPU_HARNESS_FAULT=kind:N`.
static PACKETS_SEEN: AtomicU64 = AtomicU64::new(0);

impl Queue {
    pub fn ring(&self) {
        if self.config.sync_doorbell {
            // As ROCr's XDNA driver: the doorbell store submits and waits for the packets.
            if !lock(&self.control).suspended {
                self.process();
            }
            return;
        }
        lock(&self.control).rings += 1;
        self.wake.notify_all();
    }

    fn hsa_ptr(&self) -> *mut hsa_queue_t {
        &*self.hsa as *const hsa_queue_t as *mut hsa_queue_t
    }

    fn work(self: Arc<Self>) {
        let mut seen = 0;
        loop {
            {
                let mut control = lock(&self.control);
                while control.rings == seen && !control.shutdown {
                    control = self
                        .wake
                        .wait(control)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if control.shutdown {
                    return;
                }
                seen = control.rings;
                if control.suspended {
                    continue;
                }
            }
            self.process();
        }
    }

    /// Runs every published packet; stops at the first one that suspends the queue.
    fn process(&self) {
        let _one_at_a_time = lock(&self.processing);
        loop {
            let read = self.read_index.load(Ordering::Acquire);
            if read >= self.write_index.load(Ordering::Acquire) {
                return;
            }
            let slot = (read % u64::from(QUEUE_SIZE)) as usize;
            // SAFETY: the slot lies inside the ring (QUEUE_SIZE slots of 64 bytes).
            let packet_ptr = unsafe { self.ring.add(slot * HSA_AMD_AIE_PACKET_SIZE) };
            // SAFETY: 64-byte aligned slot; the header word is read atomically with acquire so
            // the body written before it is visible.
            let full = unsafe { &*(packet_ptr as *const AtomicU32) }.load(Ordering::Acquire);
            // SAFETY: as above; the host does not write a published slot.
            let mut packet =
                unsafe { (packet_ptr as *const hsa_amd_aie_kernel_dispatch_packet_t).read() };
            packet.header = full as u16;
            packet.opcode = (full >> 16) as u16;
            let nth = PACKETS_SEEN.fetch_add(1, Ordering::Relaxed) + 1;
            let outcome = match check(&packet, read).and_then(|c| self.cache_pdi(c)) {
                Err(o) => Err(o),
                Ok(checked) => self.run(checked, nth),
            };
            let signal = signal::get(packet.completion_signal.handle);
            match outcome {
                // Counters and records are updated before the signal moves: a waiter that
                // wakes on it sees them.
                Ok(()) => {
                    STATS.packets_completed.fetch_add(1, Ordering::Relaxed);
                    self.finish(slot, read);
                    if let Some(s) = signal {
                        s.subtract(1);
                    }
                }
                Err(Outcome::DeviceError(message)) => {
                    state::device_error(&message);
                    STATS.packets_failed.fetch_add(1, Ordering::Relaxed);
                    self.finish(slot, read);
                    if let Some(s) = signal {
                        s.store(-1);
                    }
                }
                Err(Outcome::Fault(FaultKind::SignalNegative)) => {
                    state::device_error("injected fault: completing the packet with signal -1");
                    STATS.packets_failed.fetch_add(1, Ordering::Relaxed);
                    self.finish(slot, read);
                    if let Some(s) = signal {
                        s.store(-1);
                    }
                }
                Err(Outcome::Fault(FaultKind::Hang)) if self.config.sync_doorbell => {
                    // The submit blocks until the driver gives up on the command.
                    state::device_error("injected fault: the packet hangs inside the doorbell");
                    std::thread::sleep(self.config.sync_hang);
                    self.suspend();
                    STATS.packets_failed.fetch_add(1, Ordering::Relaxed);
                    self.report(HSA_STATUS_ERROR_EXCEPTION);
                    return;
                }
                Err(Outcome::Fault(FaultKind::Hang)) => {
                    state::device_error("injected fault: the packet never completes");
                    self.suspend();
                    return;
                }
                Err(Outcome::Fault(FaultKind::QueueError)) => {
                    state::device_error("injected fault: queue error");
                    self.suspend();
                    STATS.packets_failed.fetch_add(1, Ordering::Relaxed);
                    // The callback runs before the signal moves, so a waiter that wakes on
                    // the signal already sees the error.
                    self.report(HSA_STATUS_ERROR_EXCEPTION);
                    if let Some(s) = signal {
                        s.store(-1);
                    }
                    return;
                }
                Err(Outcome::Refused(status, why)) => {
                    state::device_error(&format!("packet {read}: {why}"));
                    self.fail_submission(status);
                    return;
                }
                Err(Outcome::Breach(status, rule)) => {
                    state::breach(&format!("packet {read}: {rule}"));
                    self.fail_submission(status);
                    return;
                }
            }
        }
    }

    /// Marks the slot free again (header INVALID) and advances the read index.
    fn finish(&self, slot: usize, read: u64) {
        // SAFETY: the slot lies inside the ring; the header word is 4-byte aligned.
        let header =
            unsafe { &*(self.ring.add(slot * HSA_AMD_AIE_PACKET_SIZE) as *const AtomicU32) };
        header.store(HSA_AMD_AIE_PACKET_TYPE_INVALID, Ordering::Release);
        self.read_index.store(read + 1, Ordering::Release);
    }

    /// ROCr's answer to a submission it cannot take: the queue is suspended and the callback
    /// gets `status`; the completion signal is left alone.
    fn fail_submission(&self, status: hsa_status_t) {
        self.suspend();
        STATS.packets_failed.fetch_add(1, Ordering::Relaxed);
        self.report(status);
    }

    fn suspend(&self) {
        lock(&self.control).suspended = true;
    }

    fn report(&self, status: hsa_status_t) {
        // SAFETY: the callback and its data were given to hsa_queue_create for this queue.
        unsafe { (self.callback)(status, self.hsa_ptr(), self.callback_data as *mut c_void) };
    }

    /// Caches the kernel's PDI in the hardware context, which holds [`MAX_PDIS`]: past that,
    /// ROCr fails the submission (`PDICache::SetNext`).
    fn cache_pdi(&self, checked: Checked) -> Result<Checked, Outcome> {
        let Some(pdi) = checked.kernel.pdi else {
            return Ok(checked);
        };
        let mut control = lock(&self.control);
        if !control.pdis.contains(&pdi) {
            if control.pdis.len() >= MAX_PDIS {
                return Err(Outcome::Refused(
                    HSA_STATUS_ERROR_OUT_OF_RESOURCES,
                    format!(
                        "kernel {:?} brings a new PDI, and this queue's hardware context already \
                         caches {MAX_PDIS} (one CU-mask bit each): destroy and recreate the queue",
                        checked.kernel.kernel.name
                    ),
                ));
            }
            control.pdis.insert(pdi);
            // A new PDI makes ROCr destroy and recreate the hardware context
            // (real-toolchain-rules.md §5): the new context's firmware has loaded nothing.
            control.last_load = None;
        }
        Ok(checked)
    }

    /// What a full-ELF design on aie2p reads as its external variables this dispatch: the
    /// values of the last real load when the firmware skips this one (same PDI as last time),
    /// else `None` (read them now). Records this dispatch's load.
    fn firmware_load(
        &self,
        k: &Arc<KernelObject>,
        now: impl FnOnce() -> Vec<Vec<u8>>,
    ) -> Option<Vec<Vec<u8>>> {
        let design = Arc::as_ptr(k) as usize;
        let mut control = lock(&self.control);
        match &control.last_load {
            Some((last, seen)) if *last == design && self.config.name == "aie2p" => {
                Some(seen.clone())
            }
            _ => {
                control.last_load = Some((design, now()));
                None
            }
        }
    }

    fn run(&self, checked: Checked, nth: u64) -> Result<(), Outcome> {
        if let Some(fault) = self.config.fault
            && fault.packet == nth
        {
            return Err(Outcome::Fault(fault.kind));
        }
        if self.config.noop_device {
            return Ok(());
        }
        let k = &checked.kernel;
        let program = k.program.as_ref().map_err(|why| {
            Outcome::DeviceError(format!("kernel {:?} cannot run: {why}", k.kernel.name))
        })?;
        let mut ranges: Vec<(usize, usize)> = checked.args.clone();
        // A design reads its external variables (its scratchpad) at every dispatch, from the
        // device heap, whatever the host last stored there (ROCr flushes them itself). A
        // harness program that declares one pointer parameter more per variable than the
        // packet passes gets them, in the order the code object lists them.
        let mut passed = 0;
        if usize::from(program.num_args) == ranges.len() + k.variables.len() {
            ranges.extend(
                k.variables
                    .iter()
                    .map(|(_, address, size)| (*address, *size)),
            );
            passed = k.variables.len();
        }
        let variables = &ranges[ranges.len() - passed..];
        let stale = self.firmware_load(k, || {
            variables
                .iter()
                // SAFETY: each variable is a live device-heap allocation of at least `size`
                // bytes (checked at dispatch).
                .map(|&(a, l)| unsafe { std::slice::from_raw_parts(a as *const u8, l) }.to_vec())
                .collect()
        });
        let executed = memory::with_ranges(&ranges, || execute(program, &ranges, stale.as_deref()));
        match executed {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(Outcome::DeviceError(format!(
                "kernel {:?} failed: {why}",
                k.kernel.name
            ))),
            Err(i) => Err(Outcome::Breach(
                HSA_STATUS_ERROR_INVALID_ALLOCATION,
                format!("argument {i} was freed while the packet was in flight"),
            )),
        }
    }
}

/// Runs `program` over copies of the argument ranges and writes back what it stores. `stale`
/// replaces the last ranges' contents (the scratchpad the firmware did not reload).
fn execute(
    program: &Program,
    ranges: &[(usize, usize)],
    stale: Option<&[Vec<u8>]>,
) -> Result<(), String> {
    // Copies keep aliasing arguments (one buffer passed twice) well defined.
    let mut buffers: Vec<Vec<u8>> = ranges
        .iter()
        // SAFETY: each range lies inside a live pool allocation (checked by with_ranges, which
        // holds the allocation lock while this runs).
        .map(|&(a, l)| unsafe { std::slice::from_raw_parts(a as *const u8, l) }.to_vec())
        .collect();
    if let Some(stale) = stale {
        let first = buffers.len() - stale.len();
        buffers[first..].clone_from_slice(stale);
    }
    let mut views: Vec<&mut [u8]> = buffers.iter_mut().map(Vec::as_mut_slice).collect();
    program.execute(&mut views).map_err(|e| e.to_string())?;
    for ((&(a, l), buffer), written) in ranges.iter().zip(&buffers).zip(program.written_args()) {
        if written {
            // SAFETY: as above; the range is writable pool memory.
            unsafe { std::ptr::copy_nonoverlapping(buffer.as_ptr(), a as *mut u8, l) };
        }
    }
    Ok(())
}

/// The harness program a loaded kernel carries, decoded once at freeze.
pub fn program_of(kernel: &Kernel) -> Result<Program, String> {
    let what = match kernel.code {
        Code::Insts(_) => "instruction stream",
        Code::Control(_) => "control code",
    };
    if let Some((_, reason)) = npu_harness_tools::artifacts::not_computable(kernel.code.bytes()) {
        return Err(format!(
            "it is not computable by the harness devices ({reason}); the stand-in toolchain \
             marked its {what} so, and no numbers are produced for it"
        ));
    }
    Program::decode(kernel.code.bytes()).map_err(|e| {
        format!(
            "its {what} is not a harness program ({e}); the software agent runs only kernels \
             built by the stand-in toolchain"
        )
    })
}

struct Checked {
    kernel: Arc<KernelObject>,
    args: Vec<(usize, usize)>,
}

/// The AIE packet contract (`runtime-apis.md` A.2.2, ROCr's XDNA driver).
fn check(p: &hsa_amd_aie_kernel_dispatch_packet_t, index: u64) -> Result<Checked, Outcome> {
    let bad = |rule: String| {
        Err(Outcome::Breach(
            HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
            rule,
        ))
    };
    let kind = u32::from(p.header) & 0xff;
    if kind != HSA_AMD_AIE_PACKET_TYPE_READY {
        return bad(format!(
            "header type {kind} is not READY (0) although the write index passed slot {index}: \
             write the packet body, then publish the header, then advance the write index"
        ));
    }
    let acquire = (u32::from(p.header) >> HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) & 3;
    let release = (u32::from(p.header) >> HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE) & 3;
    if acquire != HSA_FENCE_SCOPE_SYSTEM || release != HSA_FENCE_SCOPE_SYSTEM {
        return bad(format!(
            "header {:#06x}: acquire and release fences must be system scope (header 0x1400)",
            p.header
        ));
    }
    if p.header & !0x1f00 != 0 {
        return bad(format!("header {:#06x} sets reserved bits", p.header));
    }
    if u32::from(p.opcode) != HSA_AMD_AIE_PACKET_OPCODE_KMQ {
        return bad(format!("opcode {} is not KMQ (0)", p.opcode));
    }
    if p.count != HSA_AMD_AIE_PACKET_COUNT {
        return bad(format!("count is {}, the ABI requires 24", p.count));
    }
    let reserved = u64::from(p.reserved0)
        | u64::from(p.reserved1)
        | u64::from(p.reserved2)
        | u64::from(p.reserved3)
        | p.reserved4
        | p.reserved5 as u64
        | p.reserved6;
    if reserved != 0 {
        return bad("reserved fields must be zero".into());
    }
    let ko = p.kernel_object();
    let Some(kernel) = code::kernel_object(ko) else {
        return bad(format!(
            "kernel object {ko:#x} is not a kernel of a live, frozen executable (the packet does \
             not name a kernel object)"
        ));
    };
    // The command processor reads a full-ELF kernel's external variables (its scratchpad)
    // only from the device heap (device-SVM pool); elsewhere the kernel loads but every
    // dispatch fails (real-toolchain-rules.md §5).
    for (name, address, size) in &kernel.variables {
        let pool = memory::pool_of_range(*address, (*size).max(1));
        if pool != Some(memory::Pool::DevHeap) {
            return Err(Outcome::Breach(
                HSA_STATUS_ERROR_INVALID_ALLOCATION,
                format!(
                    "external variable {name:?} of kernel {:?} ({address:#x}, {size} bytes) is \
                     {}, not in the device heap: allocate it from the device-SVM pool \
                     (COARSE_GRAINED, RUNTIME_ALLOC_REC_GRANULE 0)",
                    kernel.kernel.name,
                    match pool {
                        Some(p) => format!("in the {p:?} pool"),
                        None => "in no live AIE pool allocation".to_owned(),
                    }
                ),
            ));
        }
    }
    let n = usize::from(p.num_kernargs);
    let kernarg = p.kernarg_address as usize;
    if (n == 0) != (kernarg == 0) {
        return bad(format!(
            "num_kernargs is {n} but kernarg_address is {kernarg:#x}: it must be NULL exactly \
             when there are no arguments"
        ));
    }
    let k = &kernel.kernel;
    if k.kernarg_size != 0 && k.kernarg_size as usize != 16 * n {
        return bad(format!(
            "kernel {:?} takes {} bytes of kernargs ({} buffers) but the packet passes {n} buffers",
            k.name,
            k.kernarg_size,
            k.kernarg_size / 16
        ));
    }
    if let Some(elf_args) = k.elf_args
        && elf_args as usize != n
    {
        return bad(format!(
            "full-ELF kernel {:?} patches {elf_args} arguments but the packet passes {n}",
            k.name
        ));
    }
    let mut args = Vec::with_capacity(n);
    if n > 0 {
        if !kernarg.is_multiple_of(8) {
            return bad(format!(
                "kernarg_address {kernarg:#x} is not 8-byte aligned"
            ));
        }
        let block = (kernarg, 16 * n);
        let words = memory::with_ranges(&[block], || {
            // SAFETY: the block lies inside a live pool allocation (checked under the lock).
            unsafe { std::slice::from_raw_parts(kernarg as *const u64, 2 * n) }.to_vec()
        });
        let Ok(words) = words else {
            return Err(Outcome::Breach(
                HSA_STATUS_ERROR_INVALID_ALLOCATION,
                format!(
                    "the kernarg block at {kernarg:#x} ({} bytes) is not inside memory allocated \
                     from an AIE pool",
                    16 * n
                ),
            ));
        };
        for i in 0..n {
            let (addr, size) = (words[i] as usize, words[n + i] as usize);
            if memory::pool_of_range(addr, size).is_none() {
                return Err(Outcome::Breach(
                    HSA_STATUS_ERROR_INVALID_ALLOCATION,
                    format!(
                        "argument {i} ({addr:#x}, {size} bytes) is not inside memory allocated \
                         from an AIE pool (kernarg layout: {n} addresses, then {n} sizes)"
                    ),
                ));
            }
            if !addr.is_multiple_of(DMA_ALIGNMENT) {
                return Err(Outcome::Breach(
                    HSA_STATUS_ERROR_INVALID_ARGUMENT,
                    format!(
                        "argument {i} starts at {addr:#x}, not on a 4-byte boundary: the shim DMAs \
                     address host memory in 32-bit words (the device would drop the low bits \
                     and move the wrong bytes)"
                    ),
                ));
            }
            args.push((addr, size));
        }
    }
    Ok(Checked { kernel, args })
}

/// `hsa_queue_create` for the AIE agent.
pub fn create(
    config: Arc<AgentConfig>,
    size: u32,
    queue_type: u32,
    callback: Option<ErrorCallback>,
    data: *mut c_void,
) -> Result<*mut hsa_queue_t, hsa_status_t> {
    if size != QUEUE_SIZE {
        state::breach(&format!(
            "hsa_queue_create: size {size}; the AIE agent's queues hold exactly {QUEUE_SIZE} packets"
        ));
        return Err(HSA_STATUS_ERROR_INVALID_ARGUMENT);
    }
    if queue_type != HSA_QUEUE_TYPE_SINGLE {
        state::breach(&format!(
            "hsa_queue_create: type {queue_type}; the AIE agent supports only HSA_QUEUE_TYPE_SINGLE (1)"
        ));
        return Err(HSA_STATUS_ERROR_INVALID_QUEUE_CREATION);
    }
    let Some(callback) = callback else {
        state::breach(
            "hsa_queue_create without an error callback: AIE submission errors are reported only \
             through it",
        );
        return Err(HSA_STATUS_ERROR_INVALID_ARGUMENT);
    };
    let mut queues = lock(&QUEUES);
    let map = queues.get_or_insert_with(HashMap::new);
    if !map.is_empty() {
        state::breach("hsa_queue_create: the AIE agent allows one queue (QUEUES_MAX = 1)");
        return Err(HSA_STATUS_ERROR_INVALID_QUEUE_CREATION);
    }
    let ring_bytes = QUEUE_SIZE as usize * HSA_AMD_AIE_PACKET_SIZE;
    let ring_layout = Layout::from_size_align(ring_bytes, 64).map_err(|_| HSA_STATUS_ERROR)?;
    // SAFETY: non-zero size.
    let ring = unsafe { std::alloc::alloc_zeroed(ring_layout) };
    if ring.is_null() {
        return Err(HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    }
    for slot in 0..QUEUE_SIZE as usize {
        // SAFETY: inside the ring just allocated.
        unsafe { (ring.add(slot * 64) as *mut u32).write(HSA_AMD_AIE_PACKET_TYPE_INVALID) };
    }
    let doorbell = signal::create(0);
    let queue = Arc::new(Queue {
        hsa: Box::new(hsa_queue_t {
            type_: HSA_QUEUE_TYPE_SINGLE,
            features: 2, // HSA_QUEUE_FEATURE_AGENT_DISPATCH
            base_address: ring.cast(),
            doorbell_signal: hsa_signal_t { handle: doorbell },
            size: QUEUE_SIZE,
            reserved1: 0,
            id: state::next_handle(),
        }),
        ring,
        ring_layout,
        write_index: AtomicU64::new(0),
        read_index: AtomicU64::new(0),
        callback,
        callback_data: data as usize,
        control: Mutex::new(Control::default()),
        wake: Condvar::new(),
        config,
        worker: Mutex::new(None),
        processing: Mutex::new(()),
    });
    signal::attach_doorbell(doorbell, &queue);
    let worker = queue.clone();
    let handle = std::thread::Builder::new()
        .name("npu-harness-hsa-queue".into())
        .spawn(move || worker.work())
        .map_err(|_| HSA_STATUS_ERROR_OUT_OF_RESOURCES)?;
    *lock(&queue.worker) = Some(handle);
    let ptr = queue.hsa_ptr();
    map.insert(ptr as usize, queue);
    Ok(ptr)
}

pub fn get(ptr: *const hsa_queue_t) -> Option<Arc<Queue>> {
    lock(&QUEUES).as_ref()?.get(&(ptr as usize)).cloned()
}

pub fn write_index(q: &Queue) -> &AtomicU64 {
    &q.write_index
}

pub fn read_index(q: &Queue) -> &AtomicU64 {
    &q.read_index
}

/// `hsa_queue_destroy`: stops the worker (dropping a hung packet) and frees the ring.
pub fn destroy(ptr: *mut hsa_queue_t) -> hsa_status_t {
    let Some(queue) = lock(&QUEUES)
        .as_mut()
        .and_then(|m| m.remove(&(ptr as usize)))
    else {
        return HSA_STATUS_ERROR_INVALID_QUEUE;
    };
    stop(&queue);
    HSA_STATUS_SUCCESS
}

fn stop(queue: &Arc<Queue>) {
    lock(&queue.control).shutdown = true;
    queue.wake.notify_all();
    let worker = lock(&queue.worker).take();
    if let Some(worker) = worker
        && worker.thread().id() != std::thread::current().id()
    {
        let _ = worker.join();
    }
    signal::destroy(queue.hsa.doorbell_signal.handle);
}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: allocated in `create` with this layout; the worker has stopped (it held an
        // Arc, so this runs after it returned).
        unsafe { std::alloc::dealloc(self.ring, self.ring_layout) };
    }
}

pub fn live() -> u64 {
    lock(&QUEUES).as_ref().map_or(0, |m| m.len() as u64)
}

/// Stops every queue at the last `hsa_shut_down`; returns how many were left.
pub fn destroy_all() -> u64 {
    PACKETS_SEEN.store(0, Ordering::Relaxed);
    let queues = lock(&QUEUES).take().unwrap_or_default();
    for queue in queues.values() {
        stop(queue);
    }
    queues.len() as u64
}
