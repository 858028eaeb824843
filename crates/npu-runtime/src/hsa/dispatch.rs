//! Dispatch on the AIE agent's single queue: stage arguments, write the kernarg block and the
//! packet, ring the doorbell, wait for the completion signal, copy results back.
//!
//! ROCr reports a failed submission only through the queue's error callback (the completion
//! signal is left alone and the queue is suspended), so the wait watches both, and any failure
//! rebuilds the queue so the next dispatch works. With a timeout the doorbell is rung from a
//! helper thread, because ROCr submits synchronously inside the doorbell store and a hung
//! kernel would otherwise hang the caller before the wait even starts.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hsa_sys::aie::*;
use hsa_sys::*;

use super::memory::{DeviceMemory, Placement, SharedRegions, StagingPool};
use super::session::Session;
use crate::{DispatchReport, HostArg, MAX_KERNEL_ARGS, RuntimeError};

/// Bytes of kernarg space per ring slot: 16 arguments × (address + size), 64-byte aligned.
const KERNARG_SLOT: usize = (2 * 8 * MAX_KERNEL_ARGS).next_multiple_of(64);
/// How often a wait wakes to look at the queue's error flag.
const WAIT_SLICE: Duration = Duration::from_millis(10);

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
        // SAFETY: `data` is the QueueErrors the dispatcher keeps alive while the queue exists.
        let errors = unsafe { &*(data as *const QueueErrors) };
        errors.status.store(status, Ordering::Relaxed);
        errors.raised.store(true, Ordering::Release);
    });
}

/// One staged argument.
struct Staged {
    index: usize,
    buffer: DeviceMemory,
}

/// A dispatch whose doorbell store had not returned when it timed out.
struct StuckSubmit {
    kernel: String,
    returned: mpsc::Receiver<()>,
    staged: Vec<Staged>,
}

struct DoorbellThread {
    requests: mpsc::Sender<(hsa_signal_t, i64, mpsc::Sender<()>)>,
}

impl DoorbellThread {
    fn start(api: &'static HsaApi) -> Result<DoorbellThread, RuntimeError> {
        let (tx, rx) = mpsc::channel::<(hsa_signal_t, i64, mpsc::Sender<()>)>();
        std::thread::Builder::new()
            .name("npu-hsa-doorbell".into())
            .spawn(move || {
                for (doorbell, value, done) in rx {
                    // SAFETY: the doorbell of the live queue the dispatcher owns.
                    unsafe { api.hsa_signal_store_screlease(doorbell, value) };
                    let _ = done.send(());
                }
            })
            .map_err(|e| RuntimeError::Call {
                call: "starting the doorbell thread".into(),
                reason: e.to_string(),
            })?;
        Ok(DoorbellThread { requests: tx })
    }
}

/// The queue and everything a dispatch reuses. Lives behind the runtime's dispatch mutex.
pub(crate) struct Dispatcher {
    session: Arc<Session>,
    queue: *mut hsa_queue_t,
    errors: Arc<QueueErrors>,
    signal: hsa_signal_t,
    /// Not freed while a stuck submit may still read it (see `Drop`).
    kernargs: std::mem::ManuallyDrop<DeviceMemory>,
    staging: StagingPool,
    doorbell_thread: Option<DoorbellThread>,
    stuck: Option<StuckSubmit>,
}

// SAFETY: the queue pointer is used only under the runtime's dispatch mutex.
unsafe impl Send for Dispatcher {}

/// The parts of a program a dispatch needs.
pub(crate) struct Target<'a> {
    pub name: &'a str,
    pub kernel_object: u64,
    pub timeout: Option<Duration>,
    pub writeback: Option<&'a [bool]>,
    pub verify_writeback: bool,
}

impl Dispatcher {
    pub fn new(session: &Arc<Session>) -> Result<Dispatcher, RuntimeError> {
        let api = session.api();
        let errors = Arc::new(QueueErrors::default());
        let kernargs = DeviceMemory::allocate(
            session,
            session.pools.kernarg,
            KERNARG_SLOT * session.queue_size as usize,
        )?;
        let mut signal = hsa_signal_t { handle: 0 };
        // SAFETY: valid out pointer, no consumers.
        let rc = unsafe { api.hsa_signal_create(0, 0, core::ptr::null(), &mut signal) };
        session.check("hsa_signal_create", rc)?;
        let mut dispatcher = Dispatcher {
            session: session.clone(),
            queue: core::ptr::null_mut(),
            errors,
            signal,
            kernargs: std::mem::ManuallyDrop::new(kernargs),
            staging: StagingPool::new(),
            doorbell_thread: None,
            stuck: None,
        };
        dispatcher.create_queue()?;
        Ok(dispatcher)
    }

    fn create_queue(&mut self) -> Result<(), RuntimeError> {
        let mut queue: *mut hsa_queue_t = core::ptr::null_mut();
        self.errors.raised.store(false, Ordering::Release);
        // SAFETY: the callback's data (QueueErrors) outlives the queue: the dispatcher keeps
        // the Arc and destroys the queue before dropping it.
        let rc = unsafe {
            self.session.api().hsa_queue_create(
                self.session.agent,
                self.session.queue_size,
                HSA_QUEUE_TYPE_SINGLE,
                Some(on_queue_error),
                Arc::as_ptr(&self.errors) as *mut c_void,
                0,
                0,
                &mut queue,
            )
        };
        self.session.check("hsa_queue_create", rc)?;
        self.queue = queue;
        Ok(())
    }

    fn destroy_queue(&mut self) {
        if self.queue.is_null() {
            return;
        }
        // SAFETY: the queue was created by this dispatcher and no submit is in progress.
        unsafe { self.session.api().hsa_queue_destroy(self.queue) };
        self.queue = core::ptr::null_mut();
    }

    /// After a failure: a fresh queue, so the next dispatch does not inherit a suspended one.
    fn rebuild_queue(&mut self) -> Result<(), RuntimeError> {
        self.destroy_queue();
        self.create_queue()
    }

    /// A timed-out submit that is still inside ROCr blocks the queue until it returns.
    fn settle_stuck(&mut self) -> Result<(), RuntimeError> {
        let Some(stuck) = &self.stuck else {
            return Ok(());
        };
        match stuck.returned.try_recv() {
            Err(mpsc::TryRecvError::Empty) => Err(RuntimeError::Dispatch {
                kernel: stuck.kernel.clone(),
                reason: "it timed out earlier and is still inside ROCr's submit, so the NPU \
                         queue cannot be used; the device may be hung (a driver reset or a \
                         reboot clears it)"
                    .into(),
            }),
            _ => {
                let stuck = self.stuck.take().map(|s| s.staged).unwrap_or_default();
                self.rebuild_queue()?;
                for s in stuck {
                    self.staging.give_back(s.buffer);
                }
                Ok(())
            }
        }
    }

    pub fn dispatch(
        &mut self,
        target: &Target<'_>,
        args: &[HostArg],
        regions: &SharedRegions,
    ) -> Result<DispatchReport, RuntimeError> {
        self.settle_stuck()?;
        if self.queue.is_null() {
            self.create_queue()?;
        }
        let kernel = target.name;
        let mut report = DispatchReport::default();
        let mut addresses = Vec::with_capacity(args.len());
        let mut staged: Vec<Staged> = Vec::new();
        for (i, arg) in args.iter().enumerate() {
            match regions.place(arg.ptr() as usize, arg.len()) {
                Placement::InPlace => {
                    addresses.push(arg.ptr() as u64);
                    report.in_place += 1;
                }
                Placement::Overruns { region_len, offset } => {
                    self.return_all(staged);
                    return Err(RuntimeError::InvalidArguments {
                        kernel: kernel.to_owned(),
                        reason: format!(
                            "argument {i} starts {offset} bytes into a shared buffer of \
                             {region_len} bytes but is {} bytes long, past its end",
                            arg.len()
                        ),
                    });
                }
                Placement::Host => {
                    let buffer = match self.staging.take(&self.session, arg.len()) {
                        Ok(b) => b,
                        Err(e) => {
                            self.return_all(staged);
                            return Err(e);
                        }
                    };
                    // SAFETY: HostArg guarantees `len` readable bytes; the buffer holds at
                    // least that many.
                    unsafe { std::ptr::copy_nonoverlapping(arg.ptr(), buffer.ptr(), arg.len()) };
                    addresses.push(buffer.ptr() as u64);
                    staged.push(Staged { index: i, buffer });
                    report.staged += 1;
                }
            }
        }

        let outcome = self.submit_and_wait(target, args, &addresses);
        match outcome {
            Ok(device_time) => {
                report.device_time = device_time;
                let result = self.copy_back(target, args, &staged);
                self.return_all(staged);
                result.map(|()| report)
            }
            Err(Failure::Device(e)) => {
                self.rebuild_after_failure();
                self.return_all(staged);
                Err(e)
            }
            Err(Failure::TimedOut { error, returned }) => {
                match returned {
                    // The submit came back: the queue can be torn down and the buffers reused.
                    None => {
                        self.rebuild_after_failure();
                        self.return_all(staged);
                    }
                    Some(returned) => {
                        self.stuck = Some(StuckSubmit {
                            kernel: kernel.to_owned(),
                            returned,
                            staged,
                        })
                    }
                }
                Err(error)
            }
        }
    }

    /// Rebuilds the queue after a failed dispatch. If that fails too, the dispatch's own error
    /// is the one to report; the next dispatch tries to create the queue again.
    fn rebuild_after_failure(&mut self) {
        if let Err(e) = self.rebuild_queue() {
            tracing::warn!("cannot recreate the AIE queue after a failed dispatch: {e}");
        }
    }

    fn return_all(&mut self, staged: Vec<Staged>) {
        for s in staged {
            self.staging.give_back(s.buffer);
        }
    }

    fn copy_back(
        &self,
        target: &Target<'_>,
        args: &[HostArg],
        staged: &[Staged],
    ) -> Result<(), RuntimeError> {
        for s in staged {
            let arg = &args[s.index];
            let write = target.writeback.is_none_or(|w| w[s.index]);
            if write {
                // SAFETY: HostArg guarantees `len` writable bytes; the buffer holds as many.
                unsafe { std::ptr::copy_nonoverlapping(s.buffer.ptr(), arg.ptr(), arg.len()) };
            } else if target.verify_writeback {
                // SAFETY: both ranges are `len` readable bytes.
                let (device, host) = unsafe {
                    (
                        std::slice::from_raw_parts(s.buffer.ptr(), arg.len()),
                        std::slice::from_raw_parts(arg.ptr(), arg.len()),
                    )
                };
                if device != host {
                    return Err(RuntimeError::Dispatch {
                        kernel: target.name.to_owned(),
                        reason: format!(
                            "the kernel wrote argument {}, which the write-back mask marks as \
                             read-only, so its result was not copied back \
                             (AMD_TRITON_NPU_HSA_VERIFY_WRITEBACK found this)",
                            s.index
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    fn submit_and_wait(
        &mut self,
        target: &Target<'_>,
        args: &[HostArg],
        addresses: &[u64],
    ) -> Result<Duration, Failure> {
        let api = self.session.api();
        let queue = self.queue;
        let kernel = target.name;
        let device_error = |reason: String| {
            Failure::Device(RuntimeError::Dispatch {
                kernel: kernel.to_owned(),
                reason,
            })
        };
        // SAFETY: a live queue created by this dispatcher.
        let (size, ring, doorbell) = unsafe {
            (
                (*queue).size,
                (*queue).base_address,
                (*queue).doorbell_signal,
            )
        };
        // SAFETY: as above.
        let write = unsafe { api.hsa_queue_load_write_index_relaxed(queue) };
        // One packet in flight at a time (dispatch mutex), so the ring is never full here;
        // still wait rather than overwrite a slot the device has not read.
        let deadline = Instant::now() + Duration::from_secs(5);
        // SAFETY: as above.
        while write - unsafe { api.hsa_queue_load_read_index_scacquire(queue) } >= u64::from(size) {
            if Instant::now() > deadline {
                return Err(device_error("the queue stayed full for 5 s".into()));
            }
            std::thread::yield_now();
        }
        let slot = (write % u64::from(size)) as usize;

        let n = args.len();
        let kernarg = if n == 0 {
            core::ptr::null_mut()
        } else {
            // SAFETY: slot < queue size; the kernarg allocation holds queue-size slots.
            let block = unsafe { self.kernargs.ptr().add(slot * KERNARG_SLOT) } as *mut u64;
            for (i, (address, arg)) in addresses.iter().zip(args).enumerate() {
                // SAFETY: 2n ≤ 32 u64 fit in a slot.
                unsafe {
                    block.add(i).write(*address);
                    block.add(n + i).write(arg.len() as u64);
                }
            }
            block.cast::<c_void>()
        };
        let packet = hsa_amd_aie_kernel_dispatch_packet_t::new(
            target.kernel_object,
            self.signal,
            n as u16,
            kernarg,
        );
        // SAFETY: live signal.
        unsafe { api.hsa_signal_store_screlease(self.signal, 1) };
        // SAFETY: the slot lies in the ring ROCr gave; the body goes in with the header still
        // INVALID, then the header word is published with release ordering.
        unsafe {
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

        let started = Instant::now();
        let returned = match target.timeout {
            None => {
                // SAFETY: the live queue's doorbell.
                unsafe { api.hsa_signal_store_screlease(doorbell, write as i64) };
                None
            }
            Some(_) => {
                let thread = match &self.doorbell_thread {
                    Some(t) => t,
                    None => match DoorbellThread::start(api) {
                        Ok(t) => self.doorbell_thread.insert(t),
                        Err(e) => return Err(Failure::Device(e)),
                    },
                };
                let (done_tx, done_rx) = mpsc::channel();
                if thread
                    .requests
                    .send((doorbell, write as i64, done_tx))
                    .is_err()
                {
                    return Err(device_error("the doorbell thread is gone".into()));
                }
                Some(done_rx)
            }
        };
        let value = self.wait(target, started, returned.as_ref());
        match value {
            Waited::Completed(0) => Ok(started.elapsed()),
            Waited::Completed(v) => Err(device_error(format!(
                "the NPU reported an error: the completion signal ended at {v} instead of 0"
            ))),
            Waited::QueueError(status) => Err(device_error(format!(
                "the queue reported {} (the queue is rebuilt for the next dispatch)",
                self.session.lib.status_text(status)
            ))),
            Waited::TimedOut(seconds) => {
                let still_inside = returned.filter(|r| !submit_returned(r));
                Err(Failure::TimedOut {
                    error: RuntimeError::Timeout {
                        kernel: kernel.to_owned(),
                        seconds,
                    },
                    returned: still_inside,
                })
            }
        }
    }

    fn wait(
        &self,
        target: &Target<'_>,
        started: Instant,
        submit: Option<&mpsc::Receiver<()>>,
    ) -> Waited {
        let api = self.session.api();
        let slice_ticks = (self.session.timestamp_frequency / 1000)
            .saturating_mul(WAIT_SLICE.as_millis() as u64)
            .max(1);
        let deadline = target.timeout.map(|t| started + t);
        let mut returned = submit.is_none();
        loop {
            // SAFETY: live signal.
            let value = unsafe {
                api.hsa_signal_wait_scacquire(
                    self.signal,
                    HSA_SIGNAL_CONDITION_LT,
                    1,
                    slice_ticks,
                    HSA_WAIT_STATE_BLOCKED,
                )
            };
            if value < 1 {
                if value < 0 && self.errors.raised.load(Ordering::Acquire) {
                    return Waited::QueueError(self.errors.status.load(Ordering::Relaxed));
                }
                return Waited::Completed(value);
            }
            if !returned {
                returned = submit.is_some_and(submit_returned);
            }
            if returned && self.errors.raised.load(Ordering::Acquire) {
                return Waited::QueueError(self.errors.status.load(Ordering::Relaxed));
            }
            if let Some(deadline) = deadline
                && Instant::now() >= deadline
            {
                return Waited::TimedOut(target.timeout.unwrap_or_default().as_secs_f64());
            }
        }
    }
}

/// Whether the doorbell thread has come back from the store: it sends once, then drops its
/// sender, so a message or a closed channel both mean it returned.
fn submit_returned(done: &mpsc::Receiver<()>) -> bool {
    !matches!(done.try_recv(), Err(mpsc::TryRecvError::Empty))
}

enum Waited {
    Completed(i64),
    QueueError(hsa_status_t),
    TimedOut(f64),
}

enum Failure {
    Device(RuntimeError),
    TimedOut {
        error: RuntimeError,
        /// Set while the doorbell store has not returned.
        returned: Option<mpsc::Receiver<()>>,
    },
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        if self.stuck.is_some() {
            // A submit is still inside ROCr and may touch the queue, signal and buffers:
            // leave them to the process's end rather than free them under it.
            std::mem::forget(std::mem::replace(&mut self.staging, StagingPool::new()));
            let stuck = self.stuck.take();
            std::mem::forget(stuck);
            return;
        }
        self.destroy_queue();
        // SAFETY: the signal was created by this dispatcher; the queue is gone.
        unsafe { self.session.api().hsa_signal_destroy(self.signal) };
        // SAFETY: dropped exactly once, here, with nothing in flight.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.kernargs) };
    }
}
