//! The AIE agent's queue with what a packet refers to: the completion signal and the kernarg
//! blocks, one per ring slot. They live and die together, so no packet can name a signal or a
//! kernarg block that is gone, and a [`Doorbell`] keeps all of it alive while a submit runs on
//! another thread (ROCr submits synchronously inside the doorbell store).

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hsa_sys::aie::*;
use hsa_sys::*;

use super::{Agent, Hsa, HsaError, Pool, PoolAllocation, Signal};
use crate::MAX_KERNEL_ARGS;

/// Bytes of kernarg space per ring slot: 16 arguments × (address + size), 64-byte aligned.
const KERNARG_SLOT: usize = (2 * 8 * MAX_KERNEL_ARGS).next_multiple_of(64);

/// What the queue's error callback saw.
#[derive(Default)]
struct QueueErrors {
    raised: AtomicBool,
    status: AtomicU32,
}

unsafe extern "C" fn on_queue_error(
    status: hsa_status_t,
    _queue: *mut hsa_queue_t,
    data: *mut c_void,
) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `data` is the boxed QueueErrors of the queue, freed only after the queue is
        // destroyed.
        let errors = unsafe { &*(data as *const QueueErrors) };
        errors.status.store(status, Ordering::Relaxed);
        errors.raised.store(true, Ordering::Release);
    });
}

struct Inner {
    hsa: Arc<Hsa>,
    queue: NonNull<hsa_queue_t>,
    /// Boxed: the callback holds its address.
    errors: Box<QueueErrors>,
    signal: Signal,
    /// `KERNARG_SLOT` bytes per ring slot; written only by `AieQueue::submit` (`&mut`).
    kernargs: PoolAllocation,
}

// SAFETY: ROCr's queue may be used from any thread; the write path is serialised by
// `&mut AieQueue`, and the doorbell store is thread-safe.
unsafe impl Send for Inner {}
// SAFETY: as above; shared access only reads the queue's indices and rings the doorbell.
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: created by hsa_queue_create and destroyed only here; no submit is running
        // (a running one holds a Doorbell, hence this Inner).
        let rc = unsafe { self.hsa.api().hsa_queue_destroy(self.queue.as_ptr()) };
        if let Err(e) = self.hsa.check("hsa_queue_destroy", rc) {
            tracing::warn!("{e}");
        }
        // The signal and the kernarg blocks drop after the queue (field order).
    }
}

/// The agent's queue, its completion signal and its kernarg blocks.
pub(crate) struct AieQueue(Arc<Inner>);

/// Rings the queue's doorbell, from any thread; keeps the queue alive while it may.
#[derive(Clone)]
pub(crate) struct Doorbell(Arc<Inner>);

/// Why a packet could not be written.
#[derive(Debug)]
pub(crate) enum SubmitError {
    /// More arguments than a kernarg block holds.
    TooManyArguments(usize),
    /// The device did not read a slot for this long.
    Full(Duration),
}

impl AieQueue {
    /// A queue of `size` packets on `agent`, with kernarg blocks from `kernarg_pool`.
    pub fn new(
        hsa: &Arc<Hsa>,
        agent: Agent,
        size: u32,
        kernarg_pool: Pool,
    ) -> Result<AieQueue, HsaError> {
        let kernargs = PoolAllocation::new(hsa, kernarg_pool, KERNARG_SLOT * size as usize)?;
        let signal = Signal::new(hsa, 0)?;
        let errors = Box::new(QueueErrors::default());
        let mut queue: *mut hsa_queue_t = core::ptr::null_mut();
        // SAFETY: the callback's data (the boxed QueueErrors) outlives the queue: Inner
        // destroys the queue before dropping the box.
        let rc = unsafe {
            hsa.api().hsa_queue_create(
                hsa.agent_handle(agent),
                size,
                HSA_QUEUE_TYPE_SINGLE,
                Some(on_queue_error),
                (&*errors as *const QueueErrors).cast_mut().cast(),
                0,
                0,
                &mut queue,
            )
        };
        hsa.check("hsa_queue_create", rc)?;
        let queue = NonNull::new(queue).ok_or_else(|| HsaError {
            call: "hsa_queue_create".into(),
            status: super::HsaStatus::Other(0),
            text: "reported success but returned no queue".to_owned(),
        })?;
        Ok(AieQueue(Arc::new(Inner {
            hsa: Arc::clone(hsa),
            queue,
            errors,
            signal,
            kernargs,
        })))
    }

    fn ring_size(&self) -> u64 {
        // SAFETY: a live queue; `size` is fixed at creation.
        u64::from(unsafe { self.0.queue.as_ref() }.size)
    }

    /// Writes one packet that runs `kernel_object` over `args` (device address, size in
    /// bytes), armed to complete on the queue's signal, and advances the write index. The
    /// doorbell is not rung: see [`AieQueue::doorbell`]. Returns the doorbell value.
    pub fn submit(&mut self, kernel_object: u64, args: &[(u64, u64)]) -> Result<i64, SubmitError> {
        let n = args.len();
        if n > MAX_KERNEL_ARGS {
            return Err(SubmitError::TooManyArguments(n));
        }
        let inner = &*self.0;
        let api = inner.hsa.api();
        let queue = inner.queue.as_ptr();
        let size = self.ring_size();
        // SAFETY: a live queue.
        let write = unsafe { api.hsa_queue_load_write_index_relaxed(queue) };
        // One packet in flight at a time (`&mut self`), so the ring is never full here; still
        // wait rather than overwrite a slot the device has not read.
        let patience = Duration::from_secs(5);
        let mut deadline = None;
        // SAFETY: as above.
        while write - unsafe { api.hsa_queue_load_read_index_scacquire(queue) } >= size {
            // The clock is read only when the ring is full (never, in practice).
            if Instant::now() > *deadline.get_or_insert_with(|| Instant::now() + patience) {
                return Err(SubmitError::Full(patience));
            }
            std::thread::yield_now();
        }
        let slot = (write % size) as usize;

        let kernarg = if n == 0 {
            core::ptr::null_mut()
        } else {
            // SAFETY: slot < ring size and the allocation holds ring-size blocks of
            // KERNARG_SLOT bytes; the block is ours (`&mut self`, and its previous packet
            // completed before this submit, one in flight at a time).
            let block = unsafe { inner.kernargs.as_ptr().add(slot * KERNARG_SLOT) }.cast::<u64>();
            for (i, (address, len)) in args.iter().enumerate() {
                // SAFETY: 2n ≤ 32 u64 fit in a block, which is 64-byte aligned.
                unsafe {
                    block.add(i).write(*address);
                    block.add(n + i).write(*len);
                }
            }
            block.cast::<c_void>()
        };
        let packet = hsa_amd_aie_kernel_dispatch_packet_t::new(
            kernel_object,
            inner.signal.handle(),
            n as u16,
            kernarg,
        );
        inner.signal.store_release(1);
        // SAFETY: the slot lies in the ring ROCr gave; the body goes in with the header still
        // INVALID, then the header word is published with release ordering.
        unsafe {
            // SAFETY: base_address is the ring's start, fixed at creation.
            let ring = inner.queue.as_ref().base_address;
            let slot_ptr = (ring as *mut hsa_amd_aie_kernel_dispatch_packet_t).add(slot);
            slot_ptr.write(packet);
            let header = &*(slot_ptr as *const AtomicU32);
            header.store(
                hsa_amd_aie_kernel_dispatch_packet_t::full_header(
                    ready_header(),
                    HSA_AMD_AIE_PACKET_OPCODE_KMQ as u16,
                ),
                Ordering::Release,
            );
            api.hsa_queue_store_write_index_screlease(queue, write + 1);
        }
        Ok(write as i64)
    }

    /// The doorbell, to ring from this or another thread.
    pub fn doorbell(&self) -> Doorbell {
        Doorbell(Arc::clone(&self.0))
    }

    /// Rings the doorbell on this thread (see [`Doorbell::ring`]).
    pub fn ring(&self, value: i64) {
        self.0.ring(value);
    }

    /// Tells this queue from others while it lives (its address).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Waits until the completion signal drops below 1 or about `ticks` pass; the value seen.
    pub fn wait(&self, ticks: u64) -> i64 {
        self.0.signal.wait_below(1, ticks)
    }

    /// The completion signal's current value (no wait).
    pub fn signal_value(&self) -> i64 {
        self.0.signal.load_acquire()
    }

    /// The status the error callback reported, if it ran.
    pub fn error(&self) -> Option<hsa_status_t> {
        let errors = &self.0.errors;
        errors
            .raised
            .load(Ordering::Acquire)
            .then(|| errors.status.load(Ordering::Relaxed))
    }
}

impl Doorbell {
    /// Stores `value` to the doorbell signal; ROCr submits the packets up to the write index
    /// before this returns (and waits for them on the AIE agent).
    pub fn ring(&self, value: i64) {
        self.0.ring(value);
    }
}

impl Inner {
    fn ring(&self, value: i64) {
        // SAFETY: the doorbell signal of a live queue (`self` is alive).
        unsafe {
            let doorbell = self.queue.as_ref().doorbell_signal;
            self.hsa.api().hsa_signal_store_screlease(doorbell, value)
        }
    }
}
