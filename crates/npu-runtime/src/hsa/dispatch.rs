//! Dispatch on the AIE agent's single queue: stage host arguments, write the packet, ring the
//! doorbell, wait for the completion signal, copy results back.
//!
//! ROCr reports a failed submission only through the queue's error callback (the completion
//! signal is left alone and the queue is suspended), so the wait watches both, and any failure
//! rebuilds the queue so the next dispatch works. With a timeout the doorbell is rung from a
//! helper thread, because ROCr submits synchronously inside the doorbell store and a hung
//! kernel would otherwise hang the caller before the wait even starts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::doorbell::{DoorbellThread, Ticket};
use super::memory::StagingPool;
use super::session::Session;
use super::spin::{SPIN, spin_until};
use crate::raw::hsa::{AieQueue, PoolAllocation, SubmitError};
use crate::{DispatchReport, Launch, MAX_KERNEL_ARGS, RuntimeError};

/// The start-address alignment the NPU's shim DMAs need: their buffer descriptors hold
/// addresses in 32-bit words (aie-rt `Aie2ShimDmaProp`, `AddrAlignShift` 2), so a buffer
/// passed in place must start on a 4-byte boundary.
const DMA_ALIGNMENT: usize = 4;

/// Why a dispatch failed when even a fresh queue refused the kernel's PDI.
const PDI_CACHE_FULL: &str = "the AIE queue refused a new PDI even on a fresh queue \
     (HSA_STATUS_ERROR_OUT_OF_RESOURCES: its hardware context caches 32 PDIs)";

/// How often a wait wakes to look at the queue's error flag.
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// One staged argument.
struct Staged {
    index: usize,
    buffer: PoolAllocation,
}

/// A dispatch's staged arguments, on the stack (a launch allocates nothing it need not).
type StagedArgs = SmallVec<[Staged; MAX_KERNEL_ARGS]>;

/// A dispatch whose doorbell store had not returned when it timed out.
struct StuckSubmit {
    kernel: String,
    returned: Ticket,
    /// The device may still write these: kept until the submit returns.
    staged: StagedArgs,
}

/// The queue and everything a dispatch reuses. Lives behind the runtime's dispatch mutex.
pub(crate) struct Dispatcher {
    session: Arc<Session>,
    queue: Option<AieQueue>,
    staging: StagingPool,
    doorbell_thread: Option<DoorbellThread>,
    stuck: Option<StuckSubmit>,
    /// The kernel object of the last dispatch on the current queue.
    last_kernel: Option<u64>,
}

/// What a dispatch needs besides the launch.
pub(crate) struct Target {
    pub kernel_object: u64,
    pub timeout: Option<Duration>,
    pub verify_writeback: bool,
    /// A design whose external variables (scratchpad) must be read afresh by every dispatch,
    /// on an agent whose firmware skips reloading the design it loaded last (aie2p): a
    /// repeated dispatch of it goes to a new queue, whose new hardware context loads it.
    pub reload_each_dispatch: bool,
}

enum Waited {
    Completed(i64),
    QueueError(u32),
    TimedOut(f64),
    /// The user asked to stop (Ctrl-C, SIGTERM) while the packet ran: handled as a timeout
    /// (the packet may still be on the device, so the queue is rebuilt).
    Interrupted(npu_process::Interrupted),
}

enum Failure {
    Device(RuntimeError),
    /// The queue's hardware context refused a new PDI (it caches 32): nothing ran.
    PdiCacheFull(RuntimeError),
    TimedOut {
        error: RuntimeError,
        /// Set while the doorbell store has not returned.
        returned: Option<Ticket>,
    },
}

impl Dispatcher {
    pub fn new(session: &Arc<Session>) -> Result<Dispatcher, RuntimeError> {
        let mut dispatcher = Dispatcher {
            session: Arc::clone(session),
            queue: None,
            staging: StagingPool::new(),
            doorbell_thread: None,
            stuck: None,
            last_kernel: None,
        };
        dispatcher.create_queue()?;
        Ok(dispatcher)
    }

    /// Destroys the queue (and with it ROCr's hardware context) and frees the staging buffers,
    /// unless a timed-out submit is still inside ROCr. The next dispatch creates a new queue.
    pub fn close(&mut self) {
        if self.stuck.is_none() {
            self.drop_queue();
        }
        self.staging = StagingPool::new();
    }

    /// Drops the queue (destroying it, and ROCr's hardware context with it, unless the
    /// doorbell thread still rings it for a store that never returned).
    fn drop_queue(&mut self) {
        self.queue = None;
        if let Some(thread) = &mut self.doorbell_thread {
            thread.forget_queue();
        }
    }

    fn create_queue(&mut self) -> Result<&mut AieQueue, RuntimeError> {
        self.last_kernel = None;
        let s = &self.session;
        let queue = AieQueue::new(&s.hsa, s.agent, s.queue_size, s.pools.kernarg)?;
        Ok(self.queue.insert(queue))
    }

    /// After a failure: a fresh queue, so the next dispatch does not inherit a suspended one.
    /// If that fails too, the dispatch's own error is the one to report; the next dispatch
    /// tries again.
    fn rebuild_after_failure(&mut self) {
        self.drop_queue();
        if let Err(e) = self.create_queue() {
            tracing::warn!("cannot recreate the AIE queue after a failed dispatch: {e}");
        }
    }

    /// A timed-out submit that is still inside ROCr blocks the queue until it returns.
    fn settle_stuck(&mut self) -> Result<(), RuntimeError> {
        let Some(stuck) = &self.stuck else {
            return Ok(());
        };
        if !stuck.returned.returned() {
            return Err(RuntimeError::Dispatch {
                kernel: stuck.kernel.clone(),
                reason: "it timed out earlier and is still inside ROCr's submit, so the NPU \
                         queue cannot be used; the device may be hung (a driver reset or a \
                         reboot clears it)"
                    .into(),
            });
        }
        if let Some(mut stuck) = self.stuck.take() {
            self.return_staged(&mut stuck.staged);
        }
        self.drop_queue();
        self.create_queue()?;
        Ok(())
    }

    pub fn dispatch(
        &mut self,
        target: &Target,
        launch: &Launch<'_>,
    ) -> Result<DispatchReport, RuntimeError> {
        self.settle_stuck()?;
        if target.reload_each_dispatch && self.last_kernel == Some(target.kernel_object) {
            // The aie2p firmware would skip loading the design it loaded last, so the array
            // would not be reset and the design would read its previous scratchpad
            // (real-toolchain-rules.md §5; mlir-aie's AIEX `npu.load_pdi` note). A new
            // hardware context has loaded nothing.
            self.drop_queue();
        }
        if self.queue.is_none() {
            self.create_queue()?;
        }
        self.last_kernel = Some(target.kernel_object);
        let mut report = DispatchReport::default();
        let mut kernargs: SmallVec<[(u64, u64); MAX_KERNEL_ARGS]> = SmallVec::new();
        let mut staged = StagedArgs::new();
        for (i, arg) in launch.args().iter().enumerate() {
            let address =
                if launch.in_shared_buffer(i) && arg.address().is_multiple_of(DMA_ALIGNMENT) {
                    report.in_place += 1;
                    arg.address() as u64
                } else {
                    // Host memory, or a view into a shared buffer at an address the NPU's DMAs
                    // cannot start at: copied through an aligned staging buffer.
                    let mut buffer = match self.staging.take(&self.session, arg.len()) {
                        Ok(b) => b,
                        Err(e) => {
                            self.return_staged(&mut staged);
                            return Err(e);
                        }
                    };
                    arg.read_into(&mut buffer.bytes_mut()[..arg.len()]);
                    let address = buffer.address();
                    staged.push(Staged { index: i, buffer });
                    report.staged += 1;
                    address
                };
            kernargs.push((address, arg.len() as u64));
        }

        let mut outcome = self.submit_and_wait(target, launch, &kernargs);
        if let Err(Failure::PdiCacheFull(_)) = &outcome {
            // The hardware context caches 32 PDIs; a fresh queue starts with an empty cache.
            // Nothing ran, so the same packet goes again.
            tracing::debug!("the AIE queue's PDI cache is full; recreating the queue");
            self.rebuild_after_failure();
            outcome = self.submit_and_wait(target, launch, &kernargs);
        }
        match outcome {
            Ok(device_time) => {
                report.device_time = device_time;
                let result = copy_back(target, launch, &staged);
                self.return_staged(&mut staged);
                result.map(|()| report)
            }
            Err(Failure::PdiCacheFull(e) | Failure::Device(e)) => {
                self.rebuild_after_failure();
                self.return_staged(&mut staged);
                Err(e)
            }
            Err(Failure::TimedOut { error, returned }) => {
                match returned {
                    // The submit came back: the queue can be torn down and the buffers reused.
                    None => {
                        self.rebuild_after_failure();
                        self.return_staged(&mut staged);
                    }
                    Some(returned) => {
                        self.stuck = Some(StuckSubmit {
                            kernel: launch.kernel().to_owned(),
                            returned,
                            staged,
                        })
                    }
                }
                Err(error)
            }
        }
    }

    /// Gives the staged buffers back to the pool (drained in place: moving the array would
    /// copy it whole).
    fn return_staged(&mut self, staged: &mut StagedArgs) {
        for s in staged.drain(..) {
            self.staging.give_back(s.buffer);
        }
    }

    fn submit_and_wait(
        &mut self,
        target: &Target,
        launch: &Launch<'_>,
        kernargs: &[(u64, u64)],
    ) -> Result<Duration, Failure> {
        let device_error = |reason: String| Failure::Device(launch.failed(reason));
        let Some(queue) = self.queue.as_mut() else {
            return Err(device_error("the NPU queue could not be made".into()));
        };
        let write = queue
            .submit(target.kernel_object, kernargs)
            .map_err(|e| match e {
                SubmitError::Full(d) => device_error(format!("the queue stayed full for {d:?}")),
                SubmitError::TooManyArguments(n) => {
                    device_error(format!("{n} arguments do not fit a kernarg block"))
                }
            })?;
        let started = Instant::now();
        let returned = match target.timeout {
            None => {
                queue.ring(write);
                None
            }
            Some(_) => {
                let thread = match &mut self.doorbell_thread {
                    Some(t) => t,
                    None => match DoorbellThread::start() {
                        Ok(t) => self.doorbell_thread.insert(t),
                        Err(e) => return Err(Failure::Device(e)),
                    },
                };
                Some(thread.ring(queue, write))
            }
        };
        let waited = self.wait(target, started, returned.as_ref());
        if !matches!(waited, Waited::TimedOut(_) | Waited::Interrupted(_))
            && let Some(returned) = &returned
        {
            // The packet has ended, so the doorbell store returns (if it has not already):
            // wait for it before the queue may be torn down under it.
            returned.wait_returned();
        }
        match waited {
            Waited::Completed(0) => Ok(started.elapsed()),
            Waited::Completed(v) => Err(device_error(format!(
                "the NPU reported an error: the completion signal ended at {v} instead of 0"
            ))),
            Waited::QueueError(hsa_sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES) => {
                Err(Failure::PdiCacheFull(launch.failed(PDI_CACHE_FULL)))
            }
            Waited::QueueError(status) => Err(device_error(format!(
                "the queue reported {} (the queue is rebuilt for the next dispatch)",
                self.session.hsa.status_text(status)
            ))),
            Waited::TimedOut(seconds) => Err(Failure::TimedOut {
                error: RuntimeError::Timeout {
                    kernel: launch.kernel().to_owned(),
                    seconds,
                },
                returned: returned.filter(|r| !r.returned()),
            }),
            Waited::Interrupted(cause) => Err(Failure::TimedOut {
                error: RuntimeError::Interrupted {
                    kernel: launch.kernel().to_owned(),
                    cause,
                },
                returned: returned.filter(|r| !r.returned()),
            }),
        }
    }

    fn wait(&self, target: &Target, started: Instant, submit: Option<&Ticket>) -> Waited {
        let Some(queue) = self.queue.as_ref() else {
            return Waited::QueueError(hsa_sys::HSA_STATUS_ERROR_INVALID_QUEUE);
        };
        let slice_ticks = (self.session.timestamp_frequency / 1000)
            .saturating_mul(WAIT_SLICE.as_millis() as u64)
            .max(1);
        let deadline = target.timeout.map(|t| started + t);
        let mut returned = submit.is_none();
        // A short kernel has often ended by now: look before sleeping in the runtime's wait
        // (waking a sleeping thread costs more than most launches).
        let ended = |value: i64| match queue.error() {
            _ if value >= 1 => None,
            Some(status) if value < 0 => Some(Waited::QueueError(status)),
            _ => Some(Waited::Completed(value)),
        };
        let mut seen = None;
        spin_until(SPIN, || {
            seen = ended(queue.signal_value());
            seen.is_some()
        });
        if let Some(waited) = seen {
            return waited;
        }
        loop {
            if let Some(waited) = ended(queue.wait(slice_ticks)) {
                return waited;
            }
            if !returned {
                returned = submit.is_some_and(Ticket::returned);
            }
            if returned && let Some(status) = queue.error() {
                return Waited::QueueError(status);
            }
            if let Some(deadline) = deadline
                && Instant::now() >= deadline
            {
                return Waited::TimedOut(target.timeout.unwrap_or_default().as_secs_f64());
            }
            // Between slices, as npu-process asks of device waits: Ctrl-C or SIGTERM stops it.
            if let Err(cause) = npu_process::interrupt::check() {
                return Waited::Interrupted(cause);
            }
        }
    }
}

/// Copies the staged arguments the kernel writes back to the host; with
/// `verify_writeback`, checks that the others came back unchanged.
fn copy_back(target: &Target, launch: &Launch<'_>, staged: &[Staged]) -> Result<(), RuntimeError> {
    for s in staged {
        let arg = &launch.args()[s.index];
        let device = &s.buffer.bytes()[..arg.len()];
        if launch.writes(s.index) {
            arg.write_from(device).map_err(|e| {
                launch.failed(format!("argument {} cannot take its result: {e}", s.index))
            })?;
        } else if target.verify_writeback && !arg.holds(device) {
            return Err(launch.failed(format!(
                "the kernel wrote argument {}, which the write-back mask marks as read-only, so \
                 its result was not copied back (AMD_TRITON_NPU_HSA_VERIFY_WRITEBACK found this)",
                s.index
            )));
        }
    }
    Ok(())
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        // A submit still inside ROCr may write the staged buffers: leave them to the process's
        // end rather than free them under it (its doorbell keeps the queue, the signal and the
        // kernarg blocks alive by itself).
        if let Some(stuck) = self.stuck.take() {
            std::mem::forget(stuck.staged);
        }
    }
}
