//! A third runtime, written in this file alone: one module (a `Backend` and its `Runtime`)
//! plus one registry line (`registry::register`). It declares the format it loads (a bare PDI
//! with its instruction stream, which neither built-in runtime accepts), prepares builds
//! (writes its own program file next to aircc's outputs, so the cache keeps it), loads and
//! dispatches — all through the same driver path as XRT and HSA: the configuration selects it
//! by name, the format rules read its declaration, the cache entry holds its prepared file,
//! and launches pass the shared dispatch checks before reaching it.
//!
//! Its "device" is the harness program the stand-in aircc writes into `insts.bin`, executed on
//! the host, so the results depend on every argument that went through the pipeline.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};

use common::{Prefix, linalg_of};
use npu_driver::{DriverError, Host, KernelRequest};
use npu_harness_program::Program as HarnessProgram;
use npu_runtime::backend::files::{INSTS, PDI};
use npu_runtime::{
    Artifact, Backend, Build, BuildFiles, Diagnosis, DispatchReport, ErrorKind, HostArg, Launch,
    PrepareError, Program, Runtime, RuntimeError, SharedBuffer, registry,
};
use npu_target::{
    Config, Declaration, FormatError, NpuVersion, OutputFormat, RuntimeKind, TargetProbe,
};

// --- The toy runtime: the module -----------------------------------------------------------

static TOY_DECLARATION: Declaration = Declaration {
    name: "toy",
    label: "Toy",
    formats: &[OutputFormat::Pdi],
    loads: "the toy runtime runs a bare PDI's instruction stream on the host",
};

/// The file the toy's preparation writes into a build.
const TOY_PROGRAM: &str = "toy.program";

struct Toy;
static TOY: Toy = Toy;

/// The toy's process-wide instance.
struct ToyRuntime {
    loads: AtomicUsize,
    runs: AtomicUsize,
}
static TOY_RUNTIME: ToyRuntime = ToyRuntime {
    loads: AtomicUsize::new(0),
    runs: AtomicUsize::new(0),
};

impl Backend for Toy {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::new(&TOY_DECLARATION)
    }

    fn prepared_files(&self) -> &'static [&'static str] {
        &[TOY_PROGRAM]
    }

    /// Checks the build and writes the program it will run.
    fn prepare(&self, build: &Build) -> Result<(), PrepareError> {
        let fail = |reason: String| PrepareError {
            runtime: "Toy",
            kernel: build.kernel.clone(),
            reason,
        };
        if !build.file(PDI).is_file() {
            return Err(fail(format!("the build has no {PDI}")));
        }
        let insts = std::fs::read(build.file(INSTS)).map_err(|e| fail(e.to_string()))?;
        let program = HarnessProgram::decode(&insts).map_err(|e| fail(e.to_string()))?;
        if usize::from(program.num_args) != build.buffers {
            return Err(fail(format!(
                "the program takes {} buffers, the kernel {}",
                program.num_args, build.buffers
            )));
        }
        std::fs::write(build.file(TOY_PROGRAM), &insts).map_err(|e| fail(e.to_string()))
    }

    fn artifact(
        &self,
        files: &BuildFiles,
        format: OutputFormat,
        kernel: &str,
    ) -> Result<Artifact, RuntimeError> {
        Ok(Artifact::Directory {
            dir: files.dir().to_owned(),
            format,
            kernel_name: kernel.to_owned(),
        })
    }

    fn open(&self, _: &Config, _: &Host) -> Result<&'static dyn Runtime, RuntimeError> {
        Ok(&TOY_RUNTIME)
    }

    fn probes(&self, _: &Config, _: &Host, _: bool) -> Vec<Box<dyn TargetProbe>> {
        Vec::new()
    }

    fn diagnose(&self, _: &Config, _: &Host) -> Diagnosis {
        Diagnosis {
            usable: true,
            detail: "runs on the host".into(),
            fix: String::new(),
        }
    }
}

impl Runtime for ToyRuntime {
    fn kind(&self) -> RuntimeKind {
        TOY.kind()
    }

    fn device_name(&self) -> Result<String, RuntimeError> {
        Ok("toy".into())
    }

    fn load(&self, artifact: &Artifact) -> Result<Program, RuntimeError> {
        let Artifact::Directory {
            dir, kernel_name, ..
        } = artifact
        else {
            return Err(RuntimeError::Load {
                kernel: "?".into(),
                reason: "the toy runtime loads build directories".into(),
            });
        };
        let refuse = |reason: String| RuntimeError::Load {
            kernel: kernel_name.clone(),
            reason,
        };
        let bytes = std::fs::read(dir.join(TOY_PROGRAM)).map_err(|e| refuse(e.to_string()))?;
        let program = HarnessProgram::decode(&bytes).map_err(|e| refuse(e.to_string()))?;
        self.loads.fetch_add(1, Ordering::Relaxed);
        let num_args = usize::from(program.num_args);
        Ok(Program::new(
            Arc::new(program),
            kernel_name.clone(),
            Some(num_args),
        ))
    }

    fn alloc_shared(&self, _: usize) -> Result<Box<dyn SharedBuffer>, RuntimeError> {
        Err(RuntimeError::Call {
            call: "alloc_shared".into(),
            reason: "the toy runtime has no shared memory".into(),
        })
    }

    fn run(&self, launch: &Launch<'_>) -> Result<DispatchReport, RuntimeError> {
        let program = launch
            .program()
            .state::<HarnessProgram>()
            .ok_or_else(|| launch.failed("not a toy program"))?;
        let mut buffers: Vec<Vec<u8>> = launch.args().iter().map(HostArg::to_vec).collect();
        let mut views: Vec<&mut [u8]> = buffers.iter_mut().map(Vec::as_mut_slice).collect();
        program
            .execute(&mut views)
            .map_err(|e| launch.failed(e.to_string()))?;
        for (i, (arg, bytes)) in launch.args().iter().zip(&buffers).enumerate() {
            if launch.writes(i) {
                arg.write_from(bytes)
                    .map_err(|e| launch.failed(e.to_string()))?;
            }
        }
        self.runs.fetch_add(1, Ordering::Relaxed);
        Ok(DispatchReport {
            staged: launch.args().len() as u32,
            ..Default::default()
        })
    }
}

// --- The registry line -----------------------------------------------------------------------

fn register_toy() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| registry::register(&TOY).expect("the toy's name is free"));
}

// --- Tests -----------------------------------------------------------------------------------

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn arg(buf: &mut [u8]) -> HostArg {
    // SAFETY: every buffer outlives the dispatch it is passed to, and nothing else touches it.
    unsafe { HostArg::from_raw(buf.as_mut_ptr(), buf.len()) }.expect("non-null")
}

fn add_request() -> KernelRequest {
    KernelRequest {
        name: "add_kernel".into(),
        // Six elements in blocks of two (sizes are constexprs: the device gets no scalars).
        ttsharedir: linalg_of("add_n.ttir"),
        grid: [3, 1, 1],
        actual_sizes: None,
    }
}

#[test]
fn a_third_runtime_is_one_module_and_one_registry_line() {
    register_toy();
    let prefix = Prefix::new();
    let cache = prefix.path().join("cache");
    // Selected by name like a built-in runtime; the configuration lists it among the valid
    // names.
    let config = prefix.config(&[
        ("AMD_TRITON_NPU_RUNTIME", "Toy"),
        ("AMD_TRITON_NPU_TARGET", "npu2"),
        ("AMD_TRITON_NPU_CACHE_DIR", cache.to_str().unwrap()),
    ]);
    assert_eq!(config.runtime, TOY.kind());
    assert!(RuntimeKind::names().contains("toy"));
    // Its declaration drives the format rules: the bare PDI is its default, what the built-in
    // runtimes refuse.
    assert_eq!(
        OutputFormat::resolve(None, config.runtime, NpuVersion::Npu2),
        Ok(OutputFormat::Pdi)
    );
    let refusal = OutputFormat::resolve(Some(OutputFormat::Elf), config.runtime, NpuVersion::Npu2)
        .unwrap_err()
        .to_string();
    assert!(
        refusal.contains("under Toy (AMD_TRITON_NPU_RUNTIME=toy)"),
        "{refusal}"
    );

    // The driver path: compile (aircc in the declared format), prepare, cache, load.
    let host = Host::default();
    let prepared = npu_driver::prepare(&config, &host, &add_request()).unwrap();
    let aircc = prefix.runs("aircc");
    assert_eq!(aircc.len(), 1);
    let argv = aircc[0].0.join(" ");
    assert!(argv.contains("--output-format pdi"), "{argv}");
    assert_eq!(prepared.compiled.format, OutputFormat::Pdi);
    assert!(prepared.cache_dir().join(TOY_PROGRAM).is_file());
    assert_eq!(prepared.runtime_kind, TOY.kind());

    // Dispatch through the shared checks: the results come from the program that travelled
    // through every step.
    let n = 6;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 1.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 100.0 - i as f32).collect();
    let (mut x, mut y, mut out) = (f32s(&a), f32s(&b), vec![0u8; 4 * n]);
    let runs = TOY_RUNTIME.runs.load(Ordering::Relaxed);
    prepared
        .dispatch(&[arg(&mut x), arg(&mut y), arg(&mut out)], None)
        .unwrap();
    let sum: Vec<f32> = a.iter().zip(&b).map(|(p, q)| p + q).collect();
    assert_eq!(floats(&out), sum);
    assert_eq!(
        floats(&x),
        a,
        "an input the kernel does not write is left alone"
    );
    assert_eq!(TOY_RUNTIME.runs.load(Ordering::Relaxed), runs + 1);
    // A wrong count is refused by the shared checks; the toy never sees it.
    let err = prepared
        .dispatch(&[arg(&mut x), arg(&mut y)], None)
        .unwrap_err();
    let DriverError::Runtime(e) = &err else {
        panic!("{err}")
    };
    assert_eq!(e.kind(), ErrorKind::InvalidArguments, "{e}");
    assert_eq!(TOY_RUNTIME.runs.load(Ordering::Relaxed), runs + 1);

    // A warm cache prepares nothing and runs no tool.
    let again = npu_driver::prepare(&config, &host, &add_request()).unwrap();
    assert_eq!(again.cache_dir(), prepared.cache_dir());
    assert_eq!(prefix.runs("aircc").len(), 1);
    // `doctor` lists it like the built-in runtimes.
    let diagnosis = registry::backend(TOY.kind())
        .unwrap()
        .diagnose(&config, &host);
    assert!(diagnosis.usable);
}

#[test]
fn a_bare_pdi_is_refused_before_compiling_under_both_builtin_runtimes() {
    register_toy();
    let prefix = Prefix::new();
    let cache = prefix.path().join("cache");
    for runtime in RuntimeKind::BUILTIN {
        let config = prefix.config(&[
            ("AMD_TRITON_NPU_RUNTIME", runtime.as_str()),
            ("AMD_TRITON_NPU_TARGET", "npu2"),
            ("AMD_TRITON_NPU_OUTPUT_FORMAT", "pdi"),
            ("AMD_TRITON_NPU_CACHE_DIR", cache.to_str().unwrap()),
        ]);
        let err = npu_driver::prepare(&config, &Host::default(), &add_request())
            .err()
            .expect("a pdi launch is refused");
        // The launch gives the very refusal doctor and `triton-npu compile` give.
        let rule =
            OutputFormat::resolve(Some(OutputFormat::Pdi), runtime, NpuVersion::Npu2).unwrap_err();
        assert!(
            matches!(&err, DriverError::Format(f) if *f == rule),
            "{err}"
        );
        assert!(
            matches!(rule, FormatError::NotAccepted { runtime: r, .. } if r == runtime),
            "{rule}"
        );
        let text = err.to_string();
        assert!(
            text.contains(runtime.label()) && text.contains("elf or xclbin"),
            "{text}"
        );
    }
    assert!(prefix.runs("aircc").is_empty(), "nothing was compiled");
}

/// A chain under a runtime that loads bare PDIs: each op compiled on its own as a PDI with its
/// instruction stream, and the ops dispatched in order through the same runner as XRT and HSA
/// chains. The toy has no shared memory, so every buffer is the caller's: the hand-off buffer
/// must come back from the first op for the second to read it.
#[test]
fn a_pdi_chain_runs_op_by_op_on_a_runtime_that_loads_pdis() {
    use npu_driver::chain::{ChainBuilder, ChainRunner, Launches, RunRequest};
    register_toy();
    let prefix = Prefix::new();
    let cache = prefix.path().join("cache");
    let config = prefix.config(&[
        ("AMD_TRITON_NPU_RUNTIME", "toy"),
        ("AMD_TRITON_NPU_TARGET", "npu2"),
        ("AMD_TRITON_NPU_CACHE_DIR", cache.to_str().unwrap()),
    ]);
    // tmp = x + y, then out = tmp * y: buffers x=0, y=1, tmp=2, out=3.
    let mut chain = ChainBuilder::new("add_mul").unwrap();
    let add = linalg_of("add_n.ttir");
    let mul = linalg_of("mul_n.ttir");
    chain
        .add_op(&add, [4, 1, 1], &[(0, 0), (1, 1), (2, 2)], None, None)
        .unwrap();
    chain
        .add_op(&mul, [2, 1, 1], &[(0, 2), (1, 1), (2, 3)], None, None)
        .unwrap();
    let host = Host::default();
    let compiled = chain.compile(&config, &host, None).unwrap();
    assert_eq!(compiled.format, OutputFormat::Pdi);
    let aircc = prefix.runs("aircc");
    assert_eq!(aircc.len(), 2);
    assert!(
        aircc
            .iter()
            .all(|(a, _)| a.join(" ").contains("--output-format pdi"))
    );
    for (pdi, insts) in compiled.op_files() {
        assert!(pdi.ends_with("aie.pdi") && pdi.is_file() && insts.is_file());
        assert!(pdi.with_file_name(TOY_PROGRAM).is_file());
    }
    let Launches::PerOp(_) = &compiled.launches else {
        panic!("a pdi chain runs op by op");
    };

    let runner =
        ChainRunner::open(&config, &host, "add_mul", &compiled.launches, Some(4), None).unwrap();
    let x = [1.0, -2.0, 3.0, 0.5, 8.0, -4.0];
    let y = [0.5, 4.0, -1.0, 2.0, 0.25, 1.0];
    let (mut xb, mut yb, mut tmp, mut out) = (f32s(&x), f32s(&y), vec![0u8; 24], vec![0u8; 24]);
    let bound = [
        (0, arg(&mut xb)),
        (1, arg(&mut yb)),
        (2, arg(&mut tmp)),
        (3, arg(&mut out)),
    ];
    let runs = TOY_RUNTIME.runs.load(Ordering::Relaxed);
    runner
        .run(&RunRequest {
            bo_key: "k",
            inputs: &[None, None, None, None],
            bound: &bound,
            static_indices: &[],
            intermediate_indices: &[2],
            outputs: &[(3, None)],
            timeout: None,
        })
        .unwrap();
    assert_eq!(TOY_RUNTIME.runs.load(Ordering::Relaxed), runs + 2);
    let sum: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    let prod: Vec<f32> = sum.iter().zip(&y).map(|(a, b)| a * b).collect();
    assert_eq!(floats(&tmp), sum);
    assert_eq!(floats(&out), prod);
}
