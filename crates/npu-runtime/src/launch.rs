//! The one place a dispatch's arguments are checked, for every runtime and every caller: the
//! count (against the kernel's signature, what the artifact says, and the AIE limit), sizes
//! (non-empty, whole elements), where each argument lies (in place inside a shared buffer, or
//! host memory; never running past a buffer's end), element alignment in place, and that the
//! kernel writes no read-only argument. [`crate::Runtime::dispatch`] runs it once per launch;
//! a runtime's `run` receives only a [`Launch`] that passed.

use std::time::Duration;

use crate::raw::host::HostArg;
use crate::runtime::{DispatchOptions, Program};
use crate::shared::{Placement, SharedRegions};
use crate::{MAX_KERNEL_ARGS, RuntimeError};

// `Launch::in_shared` keeps a bit per argument.
const _: () = assert!(MAX_KERNEL_ARGS <= u32::BITS as usize);

/// A dispatch whose arguments passed the checks. Only [`Launch::check`] makes one.
#[derive(Debug)]
pub struct Launch<'a> {
    program: &'a Program,
    args: &'a [HostArg],
    /// Bit `i`: argument `i` lies inside a shared buffer. A word, not a list of placements:
    /// the launch is built and moved once per dispatch, and the runtimes need no more.
    in_shared: u32,
    writeback: Option<&'a [bool]>,
    timeout: Option<Duration>,
}

impl<'a> Launch<'a> {
    /// Checks `args` for `program` with `options`; `regions` are the runtime's shared buffers.
    pub fn check(
        program: &'a Program,
        args: &'a [HostArg],
        options: &DispatchOptions<'a>,
        regions: Option<&SharedRegions>,
    ) -> Result<Launch<'a>, RuntimeError> {
        let invalid = |reason: String| RuntimeError::InvalidArguments {
            kernel: program.kernel_name.clone(),
            reason,
        };
        let n = args.len();
        if n > MAX_KERNEL_ARGS {
            return Err(invalid(format!(
                "{n} buffer arguments; an AIE kernel takes at most {MAX_KERNEL_ARGS}"
            )));
        }
        if let Some(mask) = options.writeback
            && mask.len() != n
        {
            return Err(invalid(format!(
                "the write-back mask has {} entries for {n} arguments: the kernel's signature \
                 takes {} buffer arguments, the dispatch passed {n}",
                mask.len(),
                mask.len()
            )));
        }
        if let Some(expected) = program.num_args
            && expected != n
        {
            return Err(invalid(format!(
                "the kernel takes {expected} buffer arguments (as its code object says), the \
                 dispatch passed {n}"
            )));
        }
        if let Some(max) = program.max_args
            && n > max
        {
            return Err(invalid(format!(
                "{n} buffer arguments given; the kernel declares {max} buffer slots"
            )));
        }
        if let Some(sizes) = options.element_sizes
            && sizes.len() != n
        {
            return Err(invalid(format!(
                "element sizes are given for {} arguments, the dispatch passed {n}",
                sizes.len()
            )));
        }
        let mut in_shared = 0;
        for (i, arg) in args.iter().enumerate() {
            if arg.is_empty() {
                return Err(invalid(format!(
                    "argument {i} is empty (0 bytes); every buffer argument needs at least one \
                     byte"
                )));
            }
            let element = options.element_sizes.map_or(1, |s| s[i].max(1));
            if arg.len() % element != 0 {
                return Err(invalid(format!(
                    "argument {i} holds {} bytes, not a whole number of {element}-byte elements",
                    arg.len()
                )));
            }
            let placement = match regions {
                None => Placement::Host,
                Some(r) => r.place(arg.address(), arg.len()).map_err(|o| {
                    invalid(format!(
                        "argument {i} starts {} bytes into a shared buffer of {} bytes but is {} \
                         bytes long, past its end",
                        o.offset,
                        o.region_len,
                        arg.len()
                    ))
                })?,
            };
            if let Placement::Shared { start, .. } = placement {
                let offset = arg.address() - start;
                if offset % element != 0 {
                    return Err(invalid(format!(
                        "argument {i} starts {offset} bytes into a shared buffer, not on a \
                         {element}-byte element boundary"
                    )));
                }
                in_shared |= 1 << i;
            }
            // Probed unless known already (a caller that remembers probes per object vouches
            // for them): a read or write of memory that is not there would kill the process.
            let written = options.writeback.is_none_or(|mask| mask[i]);
            if written && let Err(reason) = arg.check_writable() {
                return Err(RuntimeError::NotWritable {
                    kernel: program.kernel_name.clone(),
                    index: i,
                    reason,
                });
            }
            if !written && let Err(reason) = arg.check_readable() {
                return Err(RuntimeError::NotReadable {
                    kernel: program.kernel_name.clone(),
                    index: i,
                    reason,
                });
            }
        }
        Ok(Launch {
            program,
            args,
            in_shared,
            writeback: options.writeback,
            timeout: options.timeout,
        })
    }

    pub fn program(&self) -> &'a Program {
        self.program
    }

    /// The kernel's name, for messages.
    pub fn kernel(&self) -> &'a str {
        &self.program.kernel_name
    }

    pub fn args(&self) -> &'a [HostArg] {
        self.args
    }

    /// Whether argument `i` lies inside one of the runtime's shared buffers (which the runtime
    /// may pass in place); otherwise it is host memory, staged.
    pub fn in_shared_buffer(&self, i: usize) -> bool {
        1u32.checked_shl(i as u32)
            .is_some_and(|bit| self.in_shared & bit != 0)
    }

    /// Whether the kernel writes argument `i` (so its result comes back).
    pub fn writes(&self, i: usize) -> bool {
        self.writeback.is_none_or(|mask| mask[i])
    }

    pub fn writeback(&self) -> Option<&'a [bool]> {
        self.writeback
    }

    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// A dispatch failure of this launch's kernel.
    pub fn failed(&self, reason: impl Into<String>) -> RuntimeError {
        RuntimeError::Dispatch {
            kernel: self.program.kernel_name.clone(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::host::{HostBuffers, SharedBuffer};
    use crate::runtime::{Artifact, DispatchReport, Runtime};
    use std::sync::{Arc, Mutex};

    /// Records what each checked launch looked like.
    #[derive(Default)]
    struct Recorder {
        regions: SharedRegions,
        seen: Mutex<Vec<(Vec<bool>, Vec<bool>)>>,
    }

    impl Runtime for Recorder {
        fn kind(&self) -> npu_target::RuntimeKind {
            npu_target::RuntimeKind::XRT
        }
        fn device_name(&self) -> Result<String, RuntimeError> {
            Ok("recorder".into())
        }
        fn load(&self, _: &Artifact) -> Result<Program, RuntimeError> {
            Ok(program(None))
        }
        fn alloc_shared(&self, _: usize) -> Result<Box<dyn SharedBuffer>, RuntimeError> {
            Err(RuntimeError::Call {
                call: "alloc_shared".into(),
                reason: "not in this test".into(),
            })
        }
        fn shared_regions(&self) -> Option<&SharedRegions> {
            Some(&self.regions)
        }
        fn run(&self, launch: &Launch<'_>) -> Result<DispatchReport, RuntimeError> {
            let n = launch.args().len();
            self.seen.lock().unwrap().push((
                (0..n).map(|i| launch.in_shared_buffer(i)).collect(),
                (0..n).map(|i| launch.writes(i)).collect(),
            ));
            Ok(DispatchReport::default())
        }
    }

    fn program(num_args: Option<usize>) -> Program {
        Program::new(Arc::new(()), "k".into(), num_args)
    }

    fn reason(r: Result<DispatchReport, RuntimeError>) -> String {
        match r {
            Err(RuntimeError::InvalidArguments { reason, .. }) => reason,
            Err(other) => panic!("not an argument error: {other}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn counts_are_checked_against_signature_artifact_and_limit() {
        let rt = Recorder::default();
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        let opts = DispatchOptions::default();
        let two = HostBuffers::new().writable(&mut a).writable(&mut b);
        assert!(two.dispatch(&rt, &program(Some(2)), &opts).is_ok());
        assert!(reason(two.dispatch(&rt, &program(Some(3)), &opts)).contains("takes 3 buffer"));
        let bounded = program(None).with_max_args(1);
        assert!(reason(two.dispatch(&rt, &bounded, &opts)).contains("declares 1 buffer slots"));
        let mask = [true, false, true];
        let signature = DispatchOptions {
            writeback: Some(&mask),
            ..Default::default()
        };
        assert!(reason(two.dispatch(&rt, &program(None), &signature)).contains("takes 3"));
        let mut many: Vec<[u8; 4]> = vec![[0u8; 4]; 17];
        let mut seventeen = HostBuffers::new();
        for m in many.iter_mut() {
            seventeen = seventeen.writable(m);
        }
        assert!(reason(seventeen.dispatch(&rt, &program(None), &opts)).contains("at most 16"));
        let mut empty: [u8; 0] = [];
        let with_empty = HostBuffers::new().writable(&mut empty);
        assert!(
            reason(with_empty.dispatch(&rt, &program(None), &opts)).contains("argument 0 is empty")
        );
        assert!(
            rt.seen.lock().unwrap().len() == 1,
            "only the good launch ran"
        );
    }

    #[test]
    fn elements_writability_and_placement() {
        let rt = Recorder::default();
        let p = program(None);
        let opts = DispatchOptions::default();
        let (mut a, mut b, ro) = ([0u8; 16], [0u8; 12], [0u8; 8]);
        let sizes = [4usize, 8];
        let typed = DispatchOptions {
            element_sizes: Some(&sizes),
            ..Default::default()
        };
        let r = HostBuffers::new()
            .writable(&mut a)
            .writable(&mut b)
            .dispatch(&rt, &p, &typed);
        assert!(reason(r).contains("argument 1 holds 12 bytes, not a whole number of 8-byte"));

        // The kernel writes every argument unless the signature says otherwise.
        let r = HostBuffers::new()
            .writable(&mut a)
            .read_only(&ro)
            .dispatch(&rt, &p, &opts);
        assert!(
            matches!(
                r,
                Err(RuntimeError::NotWritable {
                    index: 1,
                    reason: crate::NotWritable::Declared,
                    ..
                })
            ),
            "{r:?}"
        );
        let reads_second = [true, false];
        let masked = DispatchOptions {
            writeback: Some(&reads_second),
            ..Default::default()
        };
        HostBuffers::new()
            .writable(&mut a)
            .read_only(&ro)
            .dispatch(&rt, &p, &masked)
            .unwrap();
        assert_eq!(rt.seen.lock().unwrap().pop().unwrap().1, vec![true, false]);

        // Inside a shared buffer: placed in it, element-aligned, never past its end.
        rt.regions.insert(a.as_ptr() as usize, 16);
        let four = [4usize];
        let f32s = DispatchOptions {
            element_sizes: Some(&four),
            ..Default::default()
        };
        HostBuffers::new()
            .writable(&mut a[4..12])
            .dispatch(&rt, &p, &f32s)
            .unwrap();
        let (placed, _) = rt.seen.lock().unwrap().pop().unwrap();
        assert_eq!(placed, vec![true], "inside the shared buffer");
        let r = HostBuffers::new()
            .writable(&mut a[2..6])
            .dispatch(&rt, &p, &f32s);
        assert!(reason(r).contains("not on a 4-byte element boundary"));
        rt.regions.remove(a.as_ptr() as usize);
        rt.regions.insert(a.as_ptr() as usize, 8);
        let r = HostBuffers::new()
            .writable(&mut a[4..12])
            .dispatch(&rt, &p, &opts);
        assert!(reason(r).contains("starts 4 bytes into a shared buffer of 8 bytes"));
        HostBuffers::new()
            .writable(&mut b)
            .dispatch(&rt, &p, &opts)
            .unwrap();
        assert_eq!(
            rt.seen.lock().unwrap().pop().unwrap().0,
            vec![false],
            "host memory"
        );
    }
}
