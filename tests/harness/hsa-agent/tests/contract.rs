//! The agent enforces the HSA/AIE contract: raw HSA calls that break a rule fail with the HSA
//! status and the rule in words, as a conformance harness must (the runtime tests show that the
//! driver's own calls pass).

mod support;

use std::ffi::{CString, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use hsa_sys::aie::*;
use hsa_sys::*;
use support::*;

const AIE: hsa_agent_t = hsa_agent_t {
    handle: 0xA1E0_0010,
};
const KERNARG_POOL: hsa_amd_memory_pool_t = hsa_amd_memory_pool_t {
    handle: 0xA1E0_0100,
};
const DEV_HEAP_POOL: hsa_amd_memory_pool_t = hsa_amd_memory_pool_t {
    handle: 0xA1E0_0101,
};
const DATA_POOL: hsa_amd_memory_pool_t = hsa_amd_memory_pool_t {
    handle: 0xA1E0_0102,
};

struct Hsa {
    lib: HsaLibrary,
    prefix: Prefix,
}

impl Hsa {
    fn new() -> Hsa {
        let prefix = Prefix::new();
        let lib = unsafe { HsaLibrary::open(&prefix.library()) }.unwrap();
        assert_eq!(unsafe { lib.api().hsa_init() }, HSA_STATUS_SUCCESS);
        Hsa { lib, prefix }
    }

    fn api(&self) -> &HsaApi {
        self.lib.api()
    }

    fn reader(&self, bytes: &[u8]) -> hsa_code_object_reader_t {
        let mut r = hsa_code_object_reader_t { handle: 0 };
        let rc = unsafe {
            self.api().hsa_code_object_reader_create_from_memory(
                bytes.as_ptr().cast(),
                bytes.len(),
                &mut r,
            )
        };
        assert_eq!(rc, HSA_STATUS_SUCCESS);
        r
    }

    fn executable(&self) -> hsa_executable_t {
        let mut e = hsa_executable_t { handle: 0 };
        let rc = unsafe {
            self.api().hsa_executable_create_alt(
                HSA_PROFILE_FULL,
                HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                std::ptr::null(),
                &mut e,
            )
        };
        assert_eq!(rc, HSA_STATUS_SUCCESS);
        e
    }

    fn load(&self, exe: hsa_executable_t, reader: hsa_code_object_reader_t) -> hsa_status_t {
        unsafe {
            self.api().hsa_executable_load_agent_code_object(
                exe,
                AIE,
                reader,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        }
    }

    fn symbol(
        &self,
        exe: hsa_executable_t,
        name: &str,
    ) -> Result<hsa_executable_symbol_t, hsa_status_t> {
        let mut s = hsa_executable_symbol_t { handle: 0 };
        let n = CString::new(name).unwrap();
        match unsafe {
            self.api()
                .hsa_executable_get_symbol_by_name(exe, n.as_ptr(), &AIE, &mut s)
        } {
            HSA_STATUS_SUCCESS => Ok(s),
            rc => Err(rc),
        }
    }

    fn allocate(&self, pool: hsa_amd_memory_pool_t, size: usize) -> *mut u8 {
        let mut p: *mut c_void = std::ptr::null_mut();
        assert_eq!(
            unsafe {
                self.api()
                    .hsa_amd_memory_pool_allocate(pool, size, 0, &mut p)
            },
            HSA_STATUS_SUCCESS
        );
        p.cast()
    }
}

/// A full-ELF `main:sequence` (`inc` over one buffer) relocating against a 32-byte
/// `scratch-pad-ctrl`.
fn scratchpad_hsaco() -> Vec<u8> {
    let elf = support::elf32::full_elf(&[support::elf32::Instance {
        name: "sequence",
        control: program(&increment(2)),
        args: 1,
        variables: &[("scratch-pad-ctrl", 32)],
    }]);
    full_elf_hsaco(&elf, 4)
}

#[test]
fn symbols_exist_only_after_freeze_and_variables_only_before_load() {
    let hsa = Hsa::new();
    let hsaco = scratchpad_hsaco();
    let reader = hsa.reader(&hsaco);

    // Loading without the variable: VARIABLE_UNDEFINED.
    let exe = hsa.executable();
    assert_eq!(hsa.load(exe, reader), HSA_STATUS_ERROR_VARIABLE_UNDEFINED);

    // A variable must live in pool memory.
    let name = CString::new("scratch-pad-ctrl").unwrap();
    let mut host = [0u8; 32];
    let rc = unsafe {
        hsa.api().hsa_executable_agent_global_variable_define(
            exe,
            AIE,
            name.as_ptr(),
            host.as_mut_ptr().cast(),
        )
    };
    assert_eq!(rc, HSA_STATUS_ERROR_INVALID_ALLOCATION);
    assert!(
        hsa.prefix
            .last_error()
            .contains("not in memory allocated from an AIE pool")
    );

    // Defined, but its 32 bytes run past the end of the allocation: INVALID_ALLOCATION.
    let small = hsa.allocate(DEV_HEAP_POOL, 4096);
    let other_exe = hsa.executable();
    let rc = unsafe {
        hsa.api().hsa_executable_agent_global_variable_define(
            other_exe,
            AIE,
            name.as_ptr(),
            small.add(4096 - 16).cast(),
        )
    };
    assert_eq!(rc, HSA_STATUS_SUCCESS);
    assert_eq!(
        hsa.load(other_exe, reader),
        HSA_STATUS_ERROR_INVALID_ALLOCATION
    );

    let var = hsa.allocate(DATA_POOL, 32);
    let rc = unsafe {
        hsa.api()
            .hsa_executable_agent_global_variable_define(exe, AIE, name.as_ptr(), var.cast())
    };
    assert_eq!(rc, HSA_STATUS_SUCCESS);
    let rc = unsafe {
        hsa.api()
            .hsa_executable_agent_global_variable_define(exe, AIE, name.as_ptr(), var.cast())
    };
    assert_eq!(rc, HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED);
    assert_eq!(hsa.load(exe, reader), HSA_STATUS_SUCCESS);

    // After a load, defining another variable breaks the order ROCr relies on.
    let other = CString::new("late").unwrap();
    let rc = unsafe {
        hsa.api()
            .hsa_executable_agent_global_variable_define(exe, AIE, other.as_ptr(), var.cast())
    };
    assert_ne!(rc, HSA_STATUS_SUCCESS);
    assert!(
        hsa.prefix
            .last_error()
            .contains("must be defined before the code object"),
        "{}",
        hsa.prefix.last_error()
    );

    // Before freeze there is no kernel object to find.
    assert_eq!(
        hsa.symbol(exe, "main:sequence").unwrap_err(),
        HSA_STATUS_ERROR_INVALID_EXECUTABLE
    );
    assert!(
        hsa.prefix
            .last_error()
            .contains("before hsa_executable_freeze"),
        "{}",
        hsa.prefix.last_error()
    );
    assert_eq!(
        unsafe { hsa.api().hsa_executable_freeze(exe, std::ptr::null()) },
        HSA_STATUS_SUCCESS
    );
    assert_eq!(
        unsafe { hsa.api().hsa_executable_freeze(exe, std::ptr::null()) },
        HSA_STATUS_ERROR_FROZEN_EXECUTABLE
    );
    assert_eq!(hsa.load(exe, reader), HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
    let sym = hsa.symbol(exe, "main:sequence").unwrap();
    assert_eq!(
        hsa.symbol(exe, "main:other").unwrap_err(),
        HSA_STATUS_ERROR_INVALID_SYMBOL_NAME
    );
    let mut ko = 0u64;
    let rc = unsafe {
        hsa.api().hsa_executable_symbol_get_info(
            sym,
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
            (&mut ko as *mut u64).cast(),
        )
    };
    assert_eq!((rc, ko != 0), (HSA_STATUS_SUCCESS, true));
    let mut kernarg = 0u32;
    let rc = unsafe {
        hsa.api().hsa_executable_symbol_get_info(
            sym,
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
            (&mut kernarg as *mut u32).cast(),
        )
    };
    assert_eq!(
        (rc, kernarg),
        (HSA_STATUS_SUCCESS, 16),
        "derived from the one argument the control code patches"
    );
    assert!(hsa.prefix.stats().breaches >= 3);
}

/// What the queue callback saw, for the packet tests.
static CALLBACK_STATUS: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn record(status: hsa_status_t, _q: *mut hsa_queue_t, _d: *mut c_void) {
    CALLBACK_STATUS.store(status, Ordering::SeqCst);
}

struct Queue<'a> {
    hsa: &'a Hsa,
    q: *mut hsa_queue_t,
    signal: hsa_signal_t,
}

impl<'a> Queue<'a> {
    fn new(hsa: &'a Hsa) -> Queue<'a> {
        let mut q = std::ptr::null_mut();
        let rc = unsafe {
            hsa.api().hsa_queue_create(
                AIE,
                64,
                HSA_QUEUE_TYPE_SINGLE,
                Some(record),
                std::ptr::null_mut(),
                0,
                0,
                &mut q,
            )
        };
        assert_eq!(rc, HSA_STATUS_SUCCESS);
        let mut signal = hsa_signal_t { handle: 0 };
        assert_eq!(
            unsafe {
                hsa.api()
                    .hsa_signal_create(1, 0, std::ptr::null(), &mut signal)
            },
            HSA_STATUS_SUCCESS
        );
        Queue { hsa, q, signal }
    }

    /// Publishes `packet` and rings; returns the signal value once it dropped below 1, the
    /// callback reported an error, or `wait_ms` passed.
    fn submit(
        &self,
        mut packet: hsa_amd_aie_kernel_dispatch_packet_t,
        header: u16,
        wait_ms: u64,
    ) -> i64 {
        let api = self.hsa.api();
        unsafe {
            api.hsa_signal_store_screlease(self.signal, 1);
            let write = api.hsa_queue_load_write_index_relaxed(self.q);
            packet.completion_signal = self.signal;
            let slot = ((*self.q).base_address as *mut hsa_amd_aie_kernel_dispatch_packet_t)
                .add((write % 64) as usize);
            slot.write(packet);
            (*(slot as *const AtomicU32)).store(
                u32::from(header) | (u32::from(packet.opcode) << 16),
                Ordering::Release,
            );
            api.hsa_queue_store_write_index_screlease(self.q, write + 1);
            api.hsa_signal_store_screlease((*self.q).doorbell_signal, write as i64);
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
            loop {
                let v = api.hsa_signal_wait_scacquire(
                    self.signal,
                    HSA_SIGNAL_CONDITION_LT,
                    1,
                    10_000_000,
                    HSA_WAIT_STATE_BLOCKED,
                );
                if v < 1
                    || CALLBACK_STATUS.load(Ordering::SeqCst) != 0
                    || std::time::Instant::now() > deadline
                {
                    return v;
                }
            }
        }
    }
}

impl Drop for Queue<'_> {
    fn drop(&mut self) {
        unsafe {
            self.hsa.api().hsa_queue_destroy(self.q);
            self.hsa.api().hsa_signal_destroy(self.signal);
        }
    }
}

/// Submits `packet` on a fresh queue and checks that the agent refused it: the callback got
/// `status`, the signal was left alone and the recorded rule mentions `rule`.
fn assert_refused(
    hsa: &Hsa,
    packet: hsa_amd_aie_kernel_dispatch_packet_t,
    status: hsa_status_t,
    rule: &str,
) {
    let queue = Queue::new(hsa);
    CALLBACK_STATUS.store(0, Ordering::SeqCst);
    assert_eq!(queue.submit(packet, ready_header(), 2000), 1, "{rule}");
    assert_eq!(CALLBACK_STATUS.load(Ordering::SeqCst), status, "{rule}");
    assert!(
        hsa.prefix.last_error().contains(rule),
        "{rule}: {}",
        hsa.prefix.last_error()
    );
}

fn loaded_kernel(hsa: &Hsa) -> u64 {
    let hsaco = pdi_insts_hsaco("aie2p", &[("inc", &increment(2), 1)]);
    let reader = hsa.reader(&hsaco);
    let exe = hsa.executable();
    load_and_freeze(hsa, exe, reader, "inc")
}

#[test]
fn packets_are_checked_and_a_broken_one_suspends_the_queue() {
    let hsa = Hsa::new();
    let ko = loaded_kernel(&hsa);
    let queue = Queue::new(&hsa);
    let kernargs = hsa.allocate(KERNARG_POOL, 4096).cast::<u64>();
    let data = hsa.allocate(DATA_POOL, 4096);
    unsafe { std::ptr::copy_nonoverlapping(f32_bytes(&[1.0, 2.0]).as_ptr(), data, 8) };
    unsafe {
        kernargs.write(data as u64);
        kernargs.add(1).write(8);
    }
    let good = hsa_amd_aie_kernel_dispatch_packet_t::new(
        ko,
        hsa_signal_t { handle: 0 },
        1,
        kernargs.cast(),
    );
    assert_eq!(queue.submit(good, ready_header(), 2000), 0);
    assert_eq!(
        f32_values(unsafe { std::slice::from_raw_parts(data, 8) }),
        vec![2.0, 3.0]
    );
    // ROCr flushes each buffer by the size in the kernarg block, so the device moves only
    // those bytes: a size of one element leaves the second one untouched, whatever the kernel
    // makes of the short buffer.
    unsafe { kernargs.add(1).write(4) };
    let short = queue.submit(good, ready_header(), 2000);
    assert!(short <= 0, "the packet ends (completed or failed): {short}");
    assert_eq!(
        f32_values(unsafe { std::slice::from_raw_parts(data.add(4), 4) }),
        vec![3.0]
    );
    unsafe { kernargs.add(1).write(8) };

    // Each breach: the callback gets the status, the signal is left alone (ROCr's behaviour),
    // and the agent names the rule. A suspended queue ignores later doorbells, so each case
    // gets a fresh queue.
    drop(queue);
    let cases: Vec<(
        hsa_amd_aie_kernel_dispatch_packet_t,
        u16,
        hsa_status_t,
        &str,
    )> = vec![
        (
            {
                let mut p = good;
                p.count = 23;
                p
            },
            ready_header(),
            HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
            "count is 23",
        ),
        (
            {
                let mut p = good;
                p.opcode = 1;
                p
            },
            ready_header(),
            HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
            "not KMQ",
        ),
        (
            good,
            0x0400,
            HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
            "system scope",
        ),
        (
            {
                let mut p = good;
                p.kernel_object_low ^= 8;
                p
            },
            ready_header(),
            HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
            "does not name a kernel object",
        ),
        (
            {
                let mut p = good;
                p.num_kernargs = 2;
                p
            },
            ready_header(),
            HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
            "passes 2 buffers",
        ),
        (
            {
                let mut p = good;
                p.reserved4 = 1;
                p
            },
            ready_header(),
            HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
            "reserved fields",
        ),
    ];
    for (packet, header, status, rule) in cases {
        let queue = Queue::new(&hsa);
        CALLBACK_STATUS.store(0, Ordering::SeqCst);
        assert_eq!(
            queue.submit(packet, header, 2000),
            1,
            "{rule}: the signal is not touched"
        );
        assert_eq!(CALLBACK_STATUS.load(Ordering::SeqCst), status, "{rule}");
        assert!(
            hsa.prefix.last_error().contains(rule),
            "{rule}: {}",
            hsa.prefix.last_error()
        );
        // Suspended: even a good packet is not run now.
        CALLBACK_STATUS.store(0, Ordering::SeqCst);
        assert_eq!(
            queue.submit(good, ready_header(), 100),
            1,
            "{rule}: the queue stays suspended"
        );
    }

    // Addresses outside pool memory: the kernarg block and the arguments.
    let mut host_kernargs = [data as u64, 8u64];
    let p = hsa_amd_aie_kernel_dispatch_packet_t::new(
        ko,
        hsa_signal_t { handle: 0 },
        1,
        host_kernargs.as_mut_ptr().cast(),
    );
    assert_refused(
        &hsa,
        p,
        HSA_STATUS_ERROR_INVALID_ALLOCATION,
        "kernarg block",
    );

    // An address inside an allocation but not on a 32-bit word: the DMAs cannot start there.
    unsafe {
        kernargs.write(data as u64 + 2);
    }
    assert_refused(
        &hsa,
        good,
        HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "not on a 4-byte boundary",
    );

    let mut host = [0u8; 8];
    unsafe {
        kernargs.write(host.as_mut_ptr() as u64);
    }
    let queue = Queue::new(&hsa);
    CALLBACK_STATUS.store(0, Ordering::SeqCst);
    assert_eq!(queue.submit(good, ready_header(), 2000), 1);
    assert_eq!(
        CALLBACK_STATUS.load(Ordering::SeqCst),
        HSA_STATUS_ERROR_INVALID_ALLOCATION
    );
    assert!(
        hsa.prefix.last_error().contains("argument 0"),
        "{}",
        hsa.prefix.last_error()
    );
}

/// A kernarg block naming one data-pool buffer holding `values`: a packet maker for any kernel
/// object of a one-buffer kernel, and the buffer.
fn one_buffer(
    hsa: &Hsa,
    values: &[f32],
) -> (
    impl Fn(u64) -> hsa_amd_aie_kernel_dispatch_packet_t,
    *mut u8,
) {
    let kernargs = hsa.allocate(KERNARG_POOL, 4096).cast::<u64>();
    let data = hsa.allocate(DATA_POOL, 4096);
    let bytes = f32_bytes(values);
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
        kernargs.write(data as u64);
        kernargs.add(1).write(bytes.len() as u64);
    }
    let packet = move |ko| {
        hsa_amd_aie_kernel_dispatch_packet_t::new(
            ko,
            hsa_signal_t { handle: 0 },
            1,
            kernargs.cast(),
        )
    };
    (packet, data)
}

/// A full-ELF `inc` kernel relocating against `scratch-pad-ctrl`, loaded with the variable
/// defined at `variable`; returns its kernel object.
fn full_elf_kernel_with_variable(hsa: &Hsa, variable: *mut u8) -> u64 {
    kernel_with_variable(hsa, &scratchpad_hsaco(), variable)
}

/// `main:sequence` of `hsaco`, loaded with `scratch-pad-ctrl` defined at `variable`; returns
/// its kernel object.
fn kernel_with_variable(hsa: &Hsa, hsaco: &[u8], variable: *mut u8) -> u64 {
    let reader = hsa.reader(hsaco);
    let exe = hsa.executable();
    let name = CString::new("scratch-pad-ctrl").unwrap();
    let rc = unsafe {
        hsa.api().hsa_executable_agent_global_variable_define(
            exe,
            AIE,
            name.as_ptr(),
            variable.cast(),
        )
    };
    assert_eq!(rc, HSA_STATUS_SUCCESS);
    load_and_freeze(hsa, exe, reader, "main:sequence")
}

/// Loads `reader` into `exe`, freezes it and returns the kernel object of `kernel`.
fn load_and_freeze(
    hsa: &Hsa,
    exe: hsa_executable_t,
    reader: hsa_code_object_reader_t,
    kernel: &str,
) -> u64 {
    assert_eq!(hsa.load(exe, reader), HSA_STATUS_SUCCESS);
    assert_eq!(
        unsafe { hsa.api().hsa_executable_freeze(exe, std::ptr::null()) },
        HSA_STATUS_SUCCESS
    );
    let sym = hsa.symbol(exe, kernel).unwrap();
    let mut ko = 0u64;
    unsafe {
        hsa.api().hsa_executable_symbol_get_info(
            sym,
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
            (&mut ko as *mut u64).cast(),
        )
    };
    ko
}

#[test]
fn external_variables_outside_the_device_heap_load_but_fail_every_dispatch() {
    let hsa = Hsa::new();
    let (packet, data) = one_buffer(&hsa, &[1.0, 2.0]);

    // In the data pool: ROCr loads it, the command processor cannot read it.
    let ko = full_elf_kernel_with_variable(&hsa, hsa.allocate(DATA_POOL, 32));
    assert_refused(
        &hsa,
        packet(ko),
        HSA_STATUS_ERROR_INVALID_ALLOCATION,
        "not in the device heap",
    );

    // In the device heap: the dispatch runs.
    let ko = full_elf_kernel_with_variable(&hsa, hsa.allocate(DEV_HEAP_POOL, 32));
    let queue = Queue::new(&hsa);
    CALLBACK_STATUS.store(0, Ordering::SeqCst);
    assert_eq!(queue.submit(packet(ko), ready_header(), 2000), 0);
    assert_eq!(CALLBACK_STATUS.load(Ordering::SeqCst), 0);
    assert_eq!(
        f32_values(unsafe { std::slice::from_raw_parts(data, 8) }),
        vec![2.0, 3.0]
    );
}

#[test]
fn a_queue_caches_32_pdis_and_refuses_a_33rd() {
    let hsa = Hsa::new();
    // Each executable's loader places its own copy of the PDI: 33 distinct PDIs.
    let kernels: Vec<u64> = (0..33).map(|_| loaded_kernel(&hsa)).collect();
    let (packet, _) = one_buffer(&hsa, &[1.0, 2.0]);
    let queue = Queue::new(&hsa);
    CALLBACK_STATUS.store(0, Ordering::SeqCst);
    for &ko in &kernels[..32] {
        assert_eq!(queue.submit(packet(ko), ready_header(), 2000), 0);
    }
    // A PDI already cached runs again.
    assert_eq!(queue.submit(packet(kernels[0]), ready_header(), 2000), 0);
    // The 33rd: the submission fails, the signal is left alone, the queue is suspended.
    assert_eq!(queue.submit(packet(kernels[32]), ready_header(), 2000), 1);
    assert_eq!(
        CALLBACK_STATUS.load(Ordering::SeqCst),
        HSA_STATUS_ERROR_OUT_OF_RESOURCES
    );
    assert!(
        hsa.prefix.last_error().contains("already caches 32"),
        "{}",
        hsa.prefix.last_error()
    );
    drop(queue);
    // A fresh queue (a new hardware context) takes it.
    let queue = Queue::new(&hsa);
    CALLBACK_STATUS.store(0, Ordering::SeqCst);
    assert_eq!(queue.submit(packet(kernels[32]), ready_header(), 2000), 0);
    assert_eq!(
        hsa.prefix.stats().breaches,
        0,
        "a full cache is not a breach"
    );
}

#[test]
fn the_device_heap_holds_64_mib() {
    let hsa = Hsa::new();
    let mut p: *mut c_void = std::ptr::null_mut();
    let allocate = |size: usize, p: &mut *mut c_void| unsafe {
        hsa.api()
            .hsa_amd_memory_pool_allocate(DEV_HEAP_POOL, size, 0, p)
    };
    // One allocation larger than the heap: ROCr refuses it as an invalid allocation.
    assert_eq!(
        allocate((64 << 20) + 1, &mut p),
        HSA_STATUS_ERROR_INVALID_ALLOCATION
    );
    // The whole heap in one piece is fine; then nothing more fits.
    assert_eq!(allocate(64 << 20, &mut p), HSA_STATUS_SUCCESS);
    let mut q: *mut c_void = std::ptr::null_mut();
    assert_eq!(allocate(4096, &mut q), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    assert_eq!(
        unsafe { hsa.api().hsa_amd_memory_pool_free(p) },
        HSA_STATUS_SUCCESS
    );
    assert_eq!(allocate(4096, &mut q), HSA_STATUS_SUCCESS);
}

#[test]
fn queues_follow_the_aie_agents_limits() {
    let hsa = Hsa::new();
    let api = hsa.api();
    let mut q = std::ptr::null_mut();
    let create = |size: u32, kind: u32, cb: bool, q: &mut *mut hsa_queue_t| unsafe {
        api.hsa_queue_create(
            AIE,
            size,
            kind,
            if cb { Some(record) } else { None },
            std::ptr::null_mut(),
            0,
            0,
            q,
        )
    };
    assert_eq!(
        create(32, HSA_QUEUE_TYPE_SINGLE, true, &mut q),
        HSA_STATUS_ERROR_INVALID_ARGUMENT
    );
    assert!(hsa.prefix.last_error().contains("exactly 64"));
    assert_eq!(
        create(64, HSA_QUEUE_TYPE_MULTI, true, &mut q),
        HSA_STATUS_ERROR_INVALID_QUEUE_CREATION
    );
    assert_eq!(
        create(64, HSA_QUEUE_TYPE_SINGLE, false, &mut q),
        HSA_STATUS_ERROR_INVALID_ARGUMENT
    );
    assert!(hsa.prefix.last_error().contains("error callback"));
    assert_eq!(
        create(64, HSA_QUEUE_TYPE_SINGLE, true, &mut q),
        HSA_STATUS_SUCCESS
    );
    let mut second = std::ptr::null_mut();
    assert_eq!(
        create(64, HSA_QUEUE_TYPE_SINGLE, true, &mut second),
        HSA_STATUS_ERROR_INVALID_QUEUE_CREATION
    );
    assert!(hsa.prefix.last_error().contains("one queue"));
    assert_eq!(unsafe { api.hsa_queue_destroy(q) }, HSA_STATUS_SUCCESS);
    assert_eq!(
        create(64, HSA_QUEUE_TYPE_SINGLE, true, &mut second),
        HSA_STATUS_SUCCESS,
        "after destroy a new one is allowed"
    );
    assert_eq!(unsafe { api.hsa_queue_destroy(second) }, HSA_STATUS_SUCCESS);
}

#[test]
fn calls_before_init_and_status_texts() {
    let prefix = Prefix::new();
    let lib = unsafe { HsaLibrary::open(&prefix.library()) }.unwrap();
    let mut agent_count = 0u32;
    unsafe extern "C" fn count(_a: hsa_agent_t, d: *mut c_void) -> hsa_status_t {
        unsafe { *(d as *mut u32) += 1 };
        HSA_STATUS_SUCCESS
    }
    let rc = unsafe {
        lib.api()
            .hsa_iterate_agents(Some(count), (&mut agent_count as *mut u32).cast())
    };
    assert_eq!(rc, HSA_STATUS_ERROR_NOT_INITIALIZED);
    // hsa_status_string works without hsa_init, like ROCr's.
    assert!(
        lib.status_text(HSA_STATUS_ERROR_OUT_OF_RESOURCES)
            .starts_with("HSA_STATUS_ERROR_OUT_OF_RESOURCES: ")
    );
    assert!(lib.status_text(0x1234_5678).contains("no text"));
    assert_eq!(unsafe { lib.api().hsa_init() }, HSA_STATUS_SUCCESS);
    let rc = unsafe {
        lib.api()
            .hsa_iterate_agents(Some(count), (&mut agent_count as *mut u32).cast())
    };
    assert_eq!(
        (rc, agent_count),
        (HSA_STATUS_SUCCESS, 2),
        "a CPU agent and the AIE agent"
    );
    assert_eq!(unsafe { lib.api().hsa_shut_down() }, HSA_STATUS_SUCCESS);
    assert_eq!(
        unsafe { lib.api().hsa_shut_down() },
        HSA_STATUS_ERROR_NOT_INITIALIZED
    );
}

#[test]
fn aie2p_firmware_does_not_reload_the_design_it_loaded_last() {
    let hsa = Hsa::new();
    let n = 4;
    let scratch = hsa.allocate(DEV_HEAP_POOL, 4 * n);
    let other_scratch = hsa.allocate(DEV_HEAP_POOL, 4 * n);
    // `main:sequence` computes out = a + scratch-pad-ctrl.
    let hsaco = support::scratchpad_hsaco(n);
    let design = kernel_with_variable(&hsa, &hsaco, scratch);
    let other = kernel_with_variable(&hsa, &hsaco, other_scratch);
    // Kernel arguments: a (zeros) and out, 4 f32 each.
    let kernargs = hsa.allocate(KERNARG_POOL, 64).cast::<u64>();
    let a = hsa.allocate(DATA_POOL, 4 * n);
    let out = hsa.allocate(DATA_POOL, 4 * n);
    unsafe {
        for (i, (p, len)) in [(a, 4 * n), (out, 4 * n)].into_iter().enumerate() {
            kernargs.add(i).write(p as u64);
            kernargs.add(2 + i).write(len as u64);
        }
    }
    let packet = |ko| {
        hsa_amd_aie_kernel_dispatch_packet_t::new(
            ko,
            hsa_signal_t { handle: 0 },
            2,
            kernargs.cast(),
        )
    };
    let set = |value: f32| unsafe {
        std::slice::from_raw_parts_mut(scratch.cast::<f32>(), n).fill(value)
    };
    let out_first = || unsafe { *out.cast::<f32>() };
    let queue = Queue::new(&hsa);
    let run = |ko, value: Option<f32>| {
        if let Some(v) = value {
            set(v);
        }
        assert_eq!(queue.submit(packet(ko), ready_header(), 2000), 0);
        out_first()
    };
    assert_eq!(run(design, Some(1.0)), 1.0);
    // Same design again: the firmware skips the load, the array keeps the first scratchpad.
    assert_eq!(run(design, Some(2.0)), 1.0);
    // Another design in between makes the next one a real load, which reads the new value.
    run(other, None);
    assert_eq!(run(design, Some(3.0)), 3.0);
    drop(queue);
    // A new queue (a new hardware context) has loaded nothing.
    let queue = Queue::new(&hsa);
    set(4.0);
    assert_eq!(queue.submit(packet(design), ready_header(), 2000), 0);
    assert_eq!(out_first(), 4.0);
    assert_eq!(hsa.prefix.stats().breaches, 0);
}
