//! Dispatching a compiled chain over the combined buffers (upstream's `MultiLaunchRunner`).
//!
//! A chain compiled into one full ELF is one dispatch; a chain compiled op by op (xclbin, pdi)
//! is one dispatch per op, in order, each over the combined buffers its `arg_map` names — the
//! buffers stay the same between them, so the hand-offs still never leave device memory.
//!
//! Each `bo_key` owns a set of device-shared buffers, one per combined argument, allocated on
//! the first run with that key and passed to the kernel in place. Per run:
//!
//! * statics (`static_indices`) are written on the first run of a key only;
//! * intermediates (`intermediate_indices`) carry no host data: zeroed on the first run, then
//!   left alone — the launches hand them over on the device, and they are never read back;
//! * every other input is written on every run (outputs too: a kernel need not overwrite its
//!   whole output; name an output intermediate as well to skip that);
//! * bound buffers (`bound`) are the caller's memory, passed to the dispatch as they are — in
//!   place when they lie in memory the runtime shares with the device, staged by it otherwise;
//! * only the outputs are read back, into the caller's destinations.
//!
//! Dropping the runner releases the program from the runtime (an XRT hardware context goes
//! with it).
//!
//! Locking: the map of sets is locked only to find or add a key's set, never across a dispatch
//! or an allocation, which may log — and Python's logging bridge needs the GIL, which a Python
//! thread asking for [`ChainRunner::buffer_sets`] may hold. A key's own set stays locked for
//! its whole run, so runs of one key are serialised and runs of different keys are not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use npu_runtime::{DispatchOptions, DispatchReport, HostArg, Program, Runtime, SharedBuffer};
use npu_target::Config;

use super::{CompiledChain, Launches};
use crate::artifacts::Compiled;
use crate::error::DriverError;
use crate::runtimes::{self, Host};

/// One run of a chain.
#[derive(Debug, Clone, Copy)]
pub struct RunRequest<'a> {
    /// Names the buffer set this run uses (and creates on its first use).
    pub bo_key: &'a str,
    /// One per combined argument: the host data to write (its length is the buffer's size);
    /// `None` only for a bound index.
    pub inputs: &'a [Option<HostArg>],
    /// Caller-owned buffers used instead of the set's own, by combined index.
    pub bound: &'a [(usize, HostArg)],
    pub static_indices: &'a [usize],
    pub intermediate_indices: &'a [usize],
    /// The combined indices read back after the run, each with where its bytes go (`None`
    /// for a bound index: its memory already is the result).
    pub outputs: &'a [(usize, Option<HostArg>)],
    pub timeout: Option<Duration>,
}

/// The buffers of one `bo_key`.
struct BufferSet {
    sizes: Vec<usize>,
    /// `None` where the index is bound to a caller's buffer.
    own: Vec<Option<Box<dyn SharedBuffer>>>,
    /// No run has staged into the buffers yet: statics are written and intermediates zeroed.
    fresh: bool,
}

/// A key's set, locked by the run that uses it.
type SharedSet = Arc<Mutex<BufferSet>>;

/// A loaded program of a chain: the whole chain (`arg_map` `None`: it takes the combined
/// buffers) or one op (its buffers are the combined ones its `arg_map` names).
struct Loaded {
    program: Program,
    op: Option<OpBuffers>,
}

/// How one op of a chain compiled op by op takes the combined buffers, worked out at load.
struct OpBuffers {
    /// Buffer parameter i → combined index `arg_map[i]`.
    arg_map: Vec<usize>,
    /// Per parameter: a later op reads its buffer, so it must come back when the runtime
    /// staged it.
    read_later: Vec<bool>,
    /// Bytes per element of each parameter, when the chain's types are at hand.
    element_sizes: Option<Vec<usize>>,
}

/// A loaded chain with its buffer sets.
pub struct ChainRunner {
    chain: String,
    runtime: &'static dyn Runtime,
    /// Dispatched in order on every run.
    programs: Vec<Loaded>,
    num_args: Option<usize>,
    /// Bytes per element of each combined buffer, when the chain's types are at hand.
    element_sizes: Option<Vec<usize>>,
    sets: Mutex<HashMap<String, SharedSet>>,
    /// Keeps the cache entry safe from eviction while loaded.
    _keep: Option<Arc<CompiledChain>>,
}

impl ChainRunner {
    /// Loads the chain's programs (`launches`: the whole chain's full ELF — under HSA its
    /// `kernel.hsaco`, beside it — or each op's build) into the configured runtime;
    /// `num_args` is the number of combined buffers when known. `keep` (the compiled chain
    /// itself, when at hand) holds its cache entry while the runner lives.
    pub fn open(
        config: &Config,
        host: &Host,
        chain: &str,
        launches: &Launches,
        num_args: Option<usize>,
        keep: Option<Arc<CompiledChain>>,
    ) -> Result<ChainRunner, DriverError> {
        if config.compile_only {
            return Err(DriverError::CompileOnly);
        }
        if let (Launches::PerOp(ops), Some(n)) = (launches, num_args)
            && let Some((k, c)) = ops
                .iter()
                .enumerate()
                .find_map(|(k, op)| op.arg_map.iter().find(|&&c| c >= n).map(|&c| (k, c)))
        {
            return Err(DriverError::ChainInput {
                chain: chain.to_owned(),
                reason: format!("op {k} takes combined buffer {c}, but the chain has {n}"),
            });
        }
        let runtime = runtimes::runtime(config, host)?;
        let wanted: Vec<(&Compiled, Option<&Vec<usize>>)> = match launches {
            Launches::Stitched(compiled) => vec![(compiled, None)],
            Launches::PerOp(ops) => ops
                .iter()
                .map(|op| (&op.compiled, Some(&op.arg_map)))
                .collect(),
        };
        let mut programs: Vec<Loaded> = Vec::with_capacity(wanted.len());
        for (compiled, arg_map) in wanted {
            let loaded = compiled
                .artifact(config.runtime)
                .and_then(|artifact| Ok(runtime.load(&artifact)?));
            match loaded {
                Ok(program) => programs.push(Loaded {
                    program,
                    op: arg_map.map(|m| OpBuffers {
                        arg_map: m.clone(),
                        read_later: Vec::new(),
                        element_sizes: None,
                    }),
                }),
                Err(e) => {
                    // What was loaded before goes back to the runtime (an XRT hardware context
                    // each).
                    for done in &programs {
                        runtime.release(&done.program);
                    }
                    return Err(e);
                }
            }
        }
        let element_sizes = keep.as_ref().and_then(|c| c.element_sizes.clone());
        let num_args = num_args.or(match launches {
            Launches::Stitched(_) => programs[0].program.num_args,
            // Every combined buffer is some op's: the widest map says how many there are.
            Launches::PerOp(ops) => ops
                .iter()
                .flat_map(|op| op.arg_map.iter().map(|&c| c + 1))
                .max(),
        });
        let maps: Vec<Vec<usize>> = programs
            .iter()
            .filter_map(|p| p.op.as_ref().map(|o| o.arg_map.clone()))
            .collect();
        for (k, loaded) in programs.iter_mut().enumerate() {
            let Some(op) = &mut loaded.op else { continue };
            op.read_later = op
                .arg_map
                .iter()
                .map(|c| maps[k + 1..].iter().any(|m| m.contains(c)))
                .collect();
            op.element_sizes = element_sizes
                .as_ref()
                .and_then(|sizes| op.arg_map.iter().map(|&c| sizes.get(c).copied()).collect());
        }
        Ok(ChainRunner {
            chain: chain.to_owned(),
            runtime,
            num_args,
            element_sizes,
            programs,
            sets: Mutex::new(HashMap::new()),
            _keep: keep,
        })
    }

    /// The number of combined buffers, when the loaded code says so.
    pub fn num_args(&self) -> Option<usize> {
        self.num_args
    }

    /// The buffer sets alive (one per `bo_key` used). Never waits for a run in progress.
    pub fn buffer_sets(&self) -> usize {
        self.sets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The set of `bo_key`, allocated (outside the map's lock) when the key is new. Two first
    /// runs of one key may both allocate; the set inserted first is kept, the other freed.
    fn set_for(
        &self,
        bo_key: &str,
        sizes: &[usize],
        bound: &[Option<HostArg>],
    ) -> Result<SharedSet, DriverError> {
        let existing = self
            .sets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(bo_key)
            .cloned();
        if let Some(set) = existing {
            return Ok(set);
        }
        let own = sizes
            .iter()
            .zip(bound)
            .map(|(&size, bound)| match bound {
                Some(_) => Ok(None),
                None => self.runtime.alloc_shared(size).map(Some),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let new = Arc::new(Mutex::new(BufferSet {
            sizes: sizes.to_vec(),
            own,
            fresh: true,
        }));
        let kept = Arc::clone(
            self.sets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(bo_key.to_owned())
                .or_insert(new),
        );
        Ok(kept)
    }

    fn input_error(&self, reason: String) -> DriverError {
        DriverError::ChainInput {
            chain: self.chain.clone(),
            reason,
        }
    }

    /// Runs the chain once (see the module docs).
    pub fn run(&self, req: &RunRequest<'_>) -> Result<DispatchReport, DriverError> {
        let n = req.inputs.len();
        if let Some(expected) = self.num_args
            && expected != n
        {
            return Err(self.input_error(format!(
                "it takes {expected} combined buffers, the run passed {n} inputs"
            )));
        }
        let in_range = |what: &str, i: usize| {
            if i < n {
                Ok(())
            } else {
                Err(self.input_error(format!(
                    "{what} index {i} is out of range for {n} combined buffers"
                )))
            }
        };
        let mut bound: Vec<Option<HostArg>> = vec![None; n];
        for &(i, arg) in req.bound {
            in_range("bound buffer", i)?;
            bound[i] = Some(arg);
        }
        for &i in req.static_indices {
            in_range("static", i)?;
        }
        for &i in req.intermediate_indices {
            in_range("intermediate", i)?;
        }
        let mut sizes = Vec::with_capacity(n);
        for (i, input) in req.inputs.iter().enumerate() {
            let size = match (bound[i], input) {
                (Some(b), Some(input)) if input.len() > b.len() => {
                    return Err(self.input_error(format!(
                        "the bound buffer for argument {i} holds {} bytes, its input {}",
                        b.len(),
                        input.len()
                    )));
                }
                (Some(b), _) => b.len(),
                (None, Some(input)) => input.len(),
                (None, None) => {
                    return Err(self.input_error(format!(
                        "argument {i} has no input and is not bound; pass an array (a \
                         placeholder of the right size for intermediates)"
                    )));
                }
            };
            if size == 0 {
                return Err(self.input_error(format!(
                    "argument {i} is empty; the NPU cannot take a zero-size buffer"
                )));
            }
            // Copied to the device before anything runs: memory that is not there would kill
            // the process at that copy.
            if let Some(input) = input
                && let Err(e) = input.check_readable()
            {
                return Err(self.input_error(format!("the input of argument {i}: {e}")));
            }
            sizes.push(size);
        }
        let mut writeback = vec![false; n];
        for &(i, destination) in req.outputs {
            in_range("output", i)?;
            writeback[i] = true;
            match (bound[i], destination) {
                (None, None) => {
                    return Err(self.input_error(format!(
                        "output {i} has nowhere to go (no destination and not bound)"
                    )));
                }
                (None, Some(d)) if d.len() < sizes[i] => {
                    return Err(self.input_error(format!(
                        "the destination of output {i} holds {} bytes, the buffer {}",
                        d.len(),
                        sizes[i]
                    )));
                }
                _ => {}
            }
            // Checked before anything runs: the results are copied into it afterwards.
            if let Some(d) = destination
                && let Err(e) = d.check_writable()
            {
                return Err(self.input_error(format!("the destination of output {i}: {e}")));
            }
        }

        let shared = self.set_for(req.bo_key, &sizes, &bound)?;
        let mut set = shared.lock().unwrap_or_else(PoisonError::into_inner);
        if set.sizes != sizes {
            return Err(self.input_error(format!(
                "bo_key {:?} was sized {:?} bytes but this run needs {:?}; use a distinct \
                 bo_key per operand set",
                req.bo_key, set.sizes, sizes
            )));
        }
        for (i, (own, bound)) in set.own.iter().zip(&bound).enumerate() {
            if own.is_none() != bound.is_some() {
                return Err(self.input_error(format!(
                    "bo_key {:?} {} argument {i} to a caller's buffer on its first run; bind \
                     the same indices on every run of a key, or use another bo_key",
                    req.bo_key,
                    if bound.is_some() {
                        "did not bind"
                    } else {
                        "bound"
                    }
                )));
            }
        }

        // Stage what this run needs into the set's own buffers.
        let first = std::mem::replace(&mut set.fresh, false);
        let is = |list: &[usize], i: usize| list.contains(&i);
        for (i, own) in set.own.iter().enumerate() {
            let Some(buffer) = own else { continue };
            let intermediate = is(req.intermediate_indices, i);
            let statik = is(req.static_indices, i);
            if !first && (intermediate || statik) {
                continue;
            }
            // The set is locked, so nothing else uses its buffers during the run.
            let staged = if first && intermediate && !statik {
                buffer.host_arg().fill(0)
            } else if let Some(input) = req.inputs[i] {
                buffer.host_arg().copy_from(&input).map(drop)
            } else {
                Ok(())
            };
            staged.map_err(|e| self.input_error(format!("argument {i}: {e}")))?;
        }
        let args: Vec<HostArg> = (0..n)
            .map(|i| match (&set.own[i], bound[i]) {
                (Some(b), _) => Some(b.host_arg()),
                (None, b) => b,
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| self.input_error("a buffer has no memory".into()))?;
        let mut report = DispatchReport::default();
        for loaded in &self.programs {
            let one = match &loaded.op {
                None => self.runtime.dispatch(
                    &loaded.program,
                    &args,
                    &DispatchOptions {
                        writeback: Some(&writeback),
                        timeout: req.timeout,
                        element_sizes: self.element_sizes.as_deref(),
                    },
                )?,
                Some(op) => {
                    let op_args: Vec<HostArg> = op.arg_map.iter().map(|&c| args[c]).collect();
                    let op_writeback: Vec<bool> = op
                        .arg_map
                        .iter()
                        .zip(&op.read_later)
                        .map(|(&c, &later)| writeback[c] || later)
                        .collect();
                    self.runtime.dispatch(
                        &loaded.program,
                        &op_args,
                        &DispatchOptions {
                            writeback: Some(&op_writeback),
                            timeout: req.timeout,
                            element_sizes: op.element_sizes.as_deref(),
                        },
                    )?
                }
            };
            report.device_time += one.device_time;
            report.in_place += one.in_place;
            report.staged += one.staged;
        }
        for &(i, destination) in req.outputs {
            if let (Some(buffer), Some(d)) = (&set.own[i], destination) {
                d.copy_from(&buffer.host_arg())
                    .map_err(|e| self.input_error(format!("the destination of output {i}: {e}")))?;
            }
        }
        Ok(report)
    }
}

impl Drop for ChainRunner {
    fn drop(&mut self) {
        for loaded in &self.programs {
            self.runtime.release(&loaded.program);
        }
    }
}
