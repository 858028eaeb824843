//! Chains: several Triton kernels stitched into one module with one `air.launch` per kernel,
//! compiled once into one full ELF and dispatched together (upstream's `multilaunch.py`:
//! `MultiLaunchBuilder`, `MultiLaunchRunner`, `NPUChain`).
//!
//! * [`ChainBuilder::add_op`] takes an op's ttsharedir (Linalg) text, its grid and its
//!   `arg_map` — buffer parameter i of the kernel → combined argument `arg_map[i]`. Ops that
//!   share a combined index share that buffer: one op's output is the next one's input, and
//!   the hand-off never leaves the device's memory. Each combined index has one element type.
//! * [`ChainBuilder::compile`] looks the chain up in the cache, keyed like a kernel on what
//!   goes *in* (every op's text, grid, actual sizes, arg map and transform script, plus target,
//!   format, runtime, bf16 emulation and the tools' identities), so a warm cache runs no tool.
//!   On a miss it lowers every op to AIR on its own (`air-opt`, with the op's grid and script).
//!   For a full ELF (npu2's default) it stitches the results ([`stitch`]) and runs aircc once:
//!   the ELF reloads the array between launches (load_pdi) and runs the whole chain in one
//!   dispatch; under HSA it is packed into `kernel.hsaco`, and the stitched module is kept as
//!   [`MULTILAUNCH`]. For xclbin (npu1's default) and pdi, which hold one device
//!   configuration each, every op is compiled on its own into `op<k>/` and the ops are
//!   dispatched one after another ([`Launches::PerOp`]). Each op's transform script is kept
//!   as `op<k>.transform.mlir` (and `op<k>.auto_transform.mlir` for an op that got the
//!   automatic matmul schedule).
//! * [`ChainRunner`] loads the compiled chain and dispatches it over persistent buffers.

mod runner;
mod stitch;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use npu_cache::{Entry, Inputs, KERNEL_NAME_INPUT};
use npu_mlir::Type;
use npu_runtime::MAX_KERNEL_ARGS;
use npu_target::{Config, NpuVersion, OutputFormat};
use npu_toolchain::{
    AirccOptions, BuildRequest, Compiler, Linalg, LowerRequest, Lowered, Toolchain,
};

use crate::artifacts::{self, Compiled};
use crate::error::DriverError;
use crate::pipeline::{Pipeline, detect_target, transform_script_input, write};
use crate::runtimes::Host;

pub use runner::{ChainRunner, RunRequest};

/// The stitched AIR module, as kept in a chain's cache entry.
pub const MULTILAUNCH: &str = "multilaunch.mlir";

/// One op of a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainOp {
    /// The kernel function's name in its ttsharedir.
    pub kernel: String,
    /// Its ttsharedir text, read once.
    pub linalg: Linalg,
    pub grid: [u32; 3],
    /// Buffer parameter i → combined index `arg_map[i]`.
    pub arg_map: Vec<usize>,
    /// The buffer parameters' types (`memref<*xf32>`…), in order.
    pub buffer_types: Vec<String>,
    /// This op's transform script; `None` uses the configured one (or the default).
    pub transform_script: Option<PathBuf>,
    /// Upstream's `actual-sizes` hint for this op's lowering.
    pub actual_sizes: Option<[u64; 3]>,
}

/// A chain being assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBuilder {
    name: String,
    ops: Vec<ChainOp>,
    /// combined index → (type, op, buffer parameter) of its first use.
    combined: BTreeMap<usize, (String, usize, usize)>,
}

/// A chain compiled into a cache entry (holding the entry keeps it from eviction).
pub struct CompiledChain {
    pub entry: Entry,
    pub launches: Launches,
    pub format: OutputFormat,
    pub target: NpuVersion,
    /// The number of combined buffers the chain takes.
    pub num_args: usize,
    /// Bytes per element of each combined buffer, when every element type is a known scalar.
    pub element_sizes: Option<Vec<usize>>,
}

/// How a compiled chain runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launches {
    /// The stitched module's full ELF: one program over the combined buffers, one dispatch.
    Stitched(Compiled),
    /// One program per op, dispatched in order (xclbin, pdi): each op's buffers are the
    /// combined buffers its `arg_map` names.
    PerOp(Vec<OpProgram>),
}

/// One op's own build in a chain compiled op by op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpProgram {
    pub compiled: Compiled,
    /// Buffer parameter i of the op → combined index `arg_map[i]`.
    pub arg_map: Vec<usize>,
}

impl CompiledChain {
    /// The cache entry's folder.
    pub fn dir(&self) -> &Path {
        self.entry.dir()
    }

    /// The full ELF, for a stitched chain.
    pub fn elf_path(&self) -> Option<PathBuf> {
        match &self.launches {
            Launches::Stitched(c) => Some(c.dir.join(artifacts::ELF)),
            Launches::PerOp(_) => None,
        }
    }

    /// The stitched AIR module aircc compiled, for a stitched chain.
    pub fn module_path(&self) -> Option<PathBuf> {
        match &self.launches {
            Launches::Stitched(c) => Some(c.dir.join(MULTILAUNCH)),
            Launches::PerOp(_) => None,
        }
    }

    /// Each op's binary (`aie.xclbin`, `aie.pdi`) and instruction stream, in order, for a
    /// chain compiled op by op (none for a stitched chain).
    pub fn op_files(&self) -> Vec<(PathBuf, PathBuf)> {
        match &self.launches {
            Launches::Stitched(_) => Vec::new(),
            Launches::PerOp(ops) => op_files(ops),
        }
    }
}

/// Each op's binary (`aie.xclbin`, `aie.pdi`) and instruction stream, in order.
pub fn op_files(ops: &[OpProgram]) -> Vec<(PathBuf, PathBuf)> {
    ops.iter()
        .map(|op| {
            let binary = match op.compiled.format {
                OutputFormat::Pdi => artifacts::PDI,
                _ => artifacts::XCLBIN,
            };
            (
                op.compiled.dir.join(binary),
                op.compiled.dir.join(artifacts::INSTS),
            )
        })
        .collect()
}

/// Describes a chain compiled op by op in its entry, for runners opened from the files alone
/// (`MultiLaunchRunner(bin_paths, insts_paths)`): format, combined buffers, and per op its
/// folder, kernel and `arg_map`.
pub const CHAIN_MANIFEST: &str = "chain.json";

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct ManifestOp {
    dir: String,
    kernel: String,
    arg_map: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Manifest {
    format: String,
    num_args: usize,
    ops: Vec<ManifestOp>,
}

/// The programs of a chain compiled op by op, read from `dir`'s [`CHAIN_MANIFEST`] (files on
/// disk, not checked by the cache): with the number of combined buffers.
pub fn ops_from_dir(dir: &Path) -> Result<(Vec<OpProgram>, usize), DriverError> {
    let path = dir.join(CHAIN_MANIFEST);
    let incomplete = |what: String| DriverError::Incomplete {
        dir: dir.to_owned(),
        what,
    };
    let text = std::fs::read(&path).map_err(|e| incomplete(format!("{CHAIN_MANIFEST} ({e})")))?;
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| incomplete(format!("a readable {CHAIN_MANIFEST} ({e})")))?;
    let format = OutputFormat::parse(&manifest.format)
        .ok_or_else(|| incomplete(format!("a known format in {CHAIN_MANIFEST}")))?;
    let mut ops = Vec::with_capacity(manifest.ops.len());
    for op in manifest.ops {
        if op.dir.contains(['/', '\\']) || op.dir.starts_with('.') {
            return Err(incomplete(format!(
                "op folders inside the entry in {CHAIN_MANIFEST}"
            )));
        }
        if op.arg_map.iter().any(|&c| c >= manifest.num_args) {
            return Err(incomplete(format!(
                "arg maps within num_args in {CHAIN_MANIFEST}"
            )));
        }
        ops.push(OpProgram {
            compiled: Compiled::at(dir.join(&op.dir), format, op.kernel),
            arg_map: op.arg_map,
        });
    }
    Ok((ops, manifest.num_args))
}

impl ChainBuilder {
    /// A chain named `name`, which becomes the name of the stitched function: an MLIR bare
    /// identifier (letters, digits, `_`, `$`, `.`; not starting with a digit).
    pub fn new(name: &str) -> Result<ChainBuilder, DriverError> {
        let valid = name
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
            && name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.'));
        if !valid {
            return Err(DriverError::ChainInput {
                chain: name.to_owned(),
                reason: "the name must be an MLIR identifier (letters, digits, `_`, `$`, `.`, \
                         not starting with a digit): it names the stitched function"
                    .into(),
            });
        }
        Ok(ChainBuilder {
            name: name.to_owned(),
            ops: Vec::new(),
            combined: BTreeMap::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn ops(&self) -> &[ChainOp] {
        &self.ops
    }

    fn input_error(&self, reason: String) -> DriverError {
        DriverError::ChainInput {
            chain: self.name.clone(),
            reason,
        }
    }

    /// Adds the next op. `arg_map` pairs (buffer parameter index, combined index) and must
    /// map every buffer parameter of the kernel; a combined index keeps one element type.
    /// Nothing is compiled here.
    pub fn add_op(
        &mut self,
        ttsharedir: &str,
        grid: [u32; 3],
        arg_map: &[(usize, usize)],
        transform_script: Option<PathBuf>,
        actual_sizes: Option<[u64; 3]>,
    ) -> Result<(), DriverError> {
        let k = self.ops.len();
        let (linalg, kernel) = Linalg::read_with(ttsharedir.to_owned(), |module| {
            module.kernel().map(|func| {
                let types: Vec<String> = func.buffers().map(|p| p.ty.to_string()).collect();
                (func.name().to_owned(), types)
            })
        })
        .map_err(|e| self.input_error(format!("op {k}: its ttsharedir is unreadable: {e}")))?;
        let (name, buffer_types) = kernel.ok_or_else(|| {
            self.input_error(format!(
                "op {k}: its ttsharedir has no function with a body; pass what the \
                     ttsharedir stage produced (compiled.asm[\"ttsharedir\"])"
            ))
        })?;
        if grid.contains(&0) {
            return Err(self.input_error(format!(
                "op {k} ({}): grid {grid:?} has an empty dimension; every size must be ≥ 1",
                name
            )));
        }
        let mut map: Vec<Option<usize>> = vec![None; buffer_types.len()];
        for &(param, combined) in arg_map {
            let Some(slot) = map.get_mut(param) else {
                return Err(self.input_error(format!(
                    "op {k} ({}): arg_map names buffer parameter {param}, but the kernel has \
                     {} buffer parameters (pointer arguments, counted from 0)",
                    name,
                    buffer_types.len()
                )));
            };
            if combined >= MAX_KERNEL_ARGS {
                return Err(self.input_error(format!(
                    "op {k} ({}): combined index {combined} is out of range; a chain takes at \
                     most {MAX_KERNEL_ARGS} buffers (indices 0..{})",
                    name,
                    MAX_KERNEL_ARGS - 1
                )));
            }
            *slot = Some(combined);
        }
        let missing: Vec<String> = map
            .iter()
            .enumerate()
            .filter(|(_, m)| m.is_none())
            .map(|(i, _)| i.to_string())
            .collect();
        if !missing.is_empty() {
            return Err(self.input_error(format!(
                "op {k} ({}): arg_map does not map buffer parameter(s) {}; map every pointer \
                 argument of the kernel to a combined index",
                name,
                missing.join(", ")
            )));
        }
        let map: Vec<usize> = map.into_iter().flatten().collect();
        for (param, &combined) in map.iter().enumerate() {
            let ty = &buffer_types[param];
            if let Some((seen, op, seen_param)) = self.combined.get(&combined)
                && Type(seen).element_type() != Type(ty).element_type()
            {
                return Err(self.input_error(format!(
                    "conflicting element types for combined index {combined}: op {op} \
                     ({}) buffer {seen_param} is {seen}, op {k} ({}) buffer {param} is {ty}; a \
                     shared combined index is one buffer, so its element type must agree",
                    self.ops[*op].kernel, name
                )));
            }
        }
        for (param, &combined) in map.iter().enumerate() {
            self.combined
                .entry(combined)
                .or_insert((buffer_types[param].clone(), k, param));
        }
        self.ops.push(ChainOp {
            kernel: name,
            linalg,
            grid,
            arg_map: map,
            buffer_types,
            transform_script,
            actual_sizes,
        });
        Ok(())
    }

    /// The combined arguments' types, by combined index (upstream's `combined_arg_types`).
    pub fn combined_arg_types(&self) -> Result<Vec<String>, DriverError> {
        if self.ops.is_empty() {
            return Err(self.input_error("the chain has no ops yet; add one first".into()));
        }
        let mut out = Vec::with_capacity(self.combined.len());
        for (expected, (index, (ty, _, _))) in self.combined.iter().enumerate() {
            if *index != expected {
                return Err(self.input_error(format!(
                    "combined index {expected} is used by no op's arg_map (the highest is \
                     {}); combined indices must be 0..N-1",
                    self.combined.keys().last().copied().unwrap_or_default()
                )));
            }
            out.push(ty.clone());
        }
        Ok(out)
    }

    /// What the chain's artifacts depend on, known before any tool runs.
    pub fn cache_inputs(&self, pipeline: &Pipeline<'_>) -> Result<Inputs, DriverError> {
        let config = pipeline.config;
        let mut inputs = Inputs::new()
            .text(KERNEL_NAME_INPUT, &self.name)
            .text("chain.ops", self.ops.len().to_string());
        for (k, op) in self.ops.iter().enumerate() {
            let script = op
                .transform_script
                .as_deref()
                .or(config.transform_tiling_script.as_deref());
            inputs = inputs
                .text(format!("chain.op{k}.ttsharedir"), op.linalg.text())
                .text(
                    format!("chain.op{k}.grid"),
                    format!("{},{},{}", op.grid[0], op.grid[1], op.grid[2]),
                )
                .text(
                    format!("chain.op{k}.actual_sizes"),
                    op.actual_sizes
                        .map(|s| format!("{},{},{}", s[0], s[1], s[2]))
                        .unwrap_or_default(),
                )
                .text(
                    format!("chain.op{k}.arg_map"),
                    op.arg_map
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                )
                .bytes(
                    format!("chain.op{k}.transform_script"),
                    transform_script_input(script)?,
                );
        }
        Ok(pipeline.cache_inputs(inputs))
    }

    /// Lowers every op to AIR for `target`, each with its own grid and transform script
    /// (the op's script, else the configured one, else the automatic matmul schedule or the
    /// default, chosen per op).
    pub fn lower(
        &self,
        config: &Config,
        toolchain: &Toolchain,
        target: NpuVersion,
    ) -> Result<Vec<Lowered>, DriverError> {
        self.ops
            .iter()
            .enumerate()
            .map(|(k, op)| {
                let mut op_config = config.clone();
                if let Some(script) = &op.transform_script {
                    op_config.transform_tiling_script = Some(script.clone());
                }
                let lowered = Compiler::new(toolchain, &op_config).lower(&LowerRequest {
                    kernel: format!("{}-op{k}-{}", self.name, op.kernel),
                    linalg: op.linalg.clone(),
                    grid: op.grid,
                    actual_sizes: op.actual_sizes,
                    target,
                    debug_tag: None,
                })?;
                Ok(lowered)
            })
            .collect()
    }

    /// Stitches the ops' AIR modules (from [`ChainBuilder::lower`]) into one module.
    pub fn stitch(&self, lowered: &[Lowered]) -> Result<String, DriverError> {
        let airs: Vec<&str> = lowered.iter().map(|l| l.air.as_str()).collect();
        self.combined_arg_types()?;
        let ops: Vec<stitch::StitchOp<'_>> = self
            .ops
            .iter()
            .zip(airs)
            .map(|(op, air)| stitch::StitchOp {
                kernel: &op.kernel,
                grid: op.grid,
                arg_map: &op.arg_map,
                air,
            })
            .collect();
        stitch::stitch(&self.name, &ops).map_err(|(op, reason)| DriverError::ChainStitch {
            chain: self.name.clone(),
            op,
            kernel: self
                .ops
                .get(op)
                .map(|o| o.kernel.clone())
                .unwrap_or_default(),
            reason,
        })
    }

    /// The key of the cache entry the chain compiles into for `format` on `target`
    /// (upstream's `cache_key`): derived from what the artifacts depend on (every op's IR,
    /// grid, argument map, sizes and transform script, the configuration), no tool runs.
    pub fn cache_key(
        &self,
        config: &Config,
        host: &Host,
        format: OutputFormat,
        target: NpuVersion,
    ) -> Result<String, DriverError> {
        let pipeline = Pipeline {
            config,
            host,
            target,
            format,
        };
        Ok(self.cache_inputs(&pipeline)?.key().to_string())
    }

    /// Lowers and stitches: the module aircc compiles (upstream's `build_module_text`). Runs
    /// `air-opt` once per op.
    pub fn build_module_text(&self, config: &Config, host: &Host) -> Result<String, DriverError> {
        self.combined_arg_types()?;
        let pipeline = Pipeline::new(config, host)?;
        self.stitch(&self.lower(config, &pipeline.toolchain()?, pipeline.target)?)
    }

    /// The pipeline a chain compiles through: the configured or requested format as for a
    /// kernel (npu2 defaults to the full ELF, npu1 to xclbin; the format rules refuse an ELF
    /// on npu1 and a format the runtime does not load).
    fn pipeline<'a>(
        &self,
        config: &'a Config,
        host: &'a Host,
        requested: Option<OutputFormat>,
    ) -> Result<Pipeline<'a>, DriverError> {
        let target = detect_target(config, host)?;
        let format =
            OutputFormat::resolve(requested.or(config.output_format), config.runtime, target)?;
        Ok(Pipeline {
            config,
            host,
            target,
            format,
        })
    }

    /// Gets the chain's artifacts from the cache, building them at most once across
    /// processes (upstream's `compile`).
    pub fn compile(
        &self,
        config: &Config,
        host: &Host,
        format: Option<OutputFormat>,
    ) -> Result<CompiledChain, DriverError> {
        let types = self.combined_arg_types()?;
        let num_args = types.len();
        let element_sizes = types
            .iter()
            .map(|t| npu_mlir::Type(t).element_bytes())
            .collect();
        let pipeline = self.pipeline(config, host, format)?;
        let inputs = self.cache_inputs(&pipeline)?;
        let entry = pipeline.cached(&inputs, |dir| self.build(&pipeline, num_args, dir))?;
        let launches = match pipeline.format {
            OutputFormat::Elf => Launches::Stitched(Compiled::from_entry(
                &entry,
                pipeline.format,
                config.runtime,
                &self.name,
            )?),
            OutputFormat::Xclbin | OutputFormat::Pdi => Launches::PerOp(
                self.ops
                    .iter()
                    .enumerate()
                    .map(|(k, op)| {
                        Ok(OpProgram {
                            compiled: Compiled::from_entry_in(
                                &entry,
                                &op_dir(k),
                                pipeline.format,
                                config.runtime,
                                &op.kernel,
                            )?,
                            arg_map: op.arg_map.clone(),
                        })
                    })
                    .collect::<Result<_, DriverError>>()?,
            ),
        };
        Ok(CompiledChain {
            entry,
            launches,
            format: pipeline.format,
            target: pipeline.target,
            num_args,
            element_sizes,
        })
    }

    fn build(
        &self,
        pipeline: &Pipeline<'_>,
        num_args: usize,
        dir: &Path,
    ) -> Result<(), DriverError> {
        let config = pipeline.config;
        let toolchain = pipeline.toolchain()?;
        let lowered = self.lower(config, &toolchain, pipeline.target)?;
        // Each op's transform script goes with the artifacts, as a kernel's does.
        for (k, op) in lowered.iter().enumerate() {
            let keep = [
                (npu_toolchain::lower::TRANSFORM_SCRIPT, Some(&op.transform)),
                (
                    npu_toolchain::lower::AUTO_TRANSFORM_SCRIPT,
                    op.auto_transform.as_ref(),
                ),
            ];
            for (name, text) in keep {
                if let Some(text) = text {
                    write(&dir.join(format!("op{k}.{name}")), text.as_bytes())?;
                }
            }
        }
        let compiler = Compiler::new(&toolchain, config);
        let request =
            |kernel: &str, air: String, bf16_emulation: bool, out_dir: PathBuf| BuildRequest {
                kernel: kernel.to_owned(),
                air,
                target: pipeline.target,
                format: pipeline.format,
                bf16_emulation,
                options: AirccOptions::default(),
                out_dir,
                debug_tag: None,
            };
        let emulates_bf16 =
            |op: &ChainOp| config.bf16_emulation || npu_toolchain::lower::is_f32_matmul(&op.linalg);
        if pipeline.format != OutputFormat::Elf {
            return self.build_per_op(pipeline, &compiler, &lowered, dir, |k, out_dir| {
                let op = &self.ops[k];
                request(
                    &op.kernel,
                    lowered[k].air.clone(),
                    emulates_bf16(op),
                    out_dir,
                )
            });
        }
        let text = self.stitch(&lowered)?;
        let built = compiler.build(&request(
            &self.name,
            text.clone(),
            self.ops.iter().any(emulates_bf16),
            dir.to_owned(),
        ))?;
        pipeline.prepare_for_runtime(dir, &built.artifacts, &self.name, num_args)?;
        write(&dir.join(MULTILAUNCH), text.as_bytes())
    }

    /// An xclbin or PDI chain: aiecc makes one configuration per `aie.device`, and each
    /// `air.launch` of a stitched module is its own device, so a stitched module has no single
    /// xclbin or PDI (only the full ELF switches devices between launches, with load_pdi).
    /// Each op is therefore compiled on its own, as a kernel is, into `op<k>/`, and the runner
    /// dispatches the ops in order over the combined buffers; [`CHAIN_MANIFEST`] records the
    /// ops for runners opened from the files.
    fn build_per_op(
        &self,
        pipeline: &Pipeline<'_>,
        compiler: &Compiler<'_>,
        lowered: &[Lowered],
        dir: &Path,
        request: impl Fn(usize, PathBuf) -> BuildRequest,
    ) -> Result<(), DriverError> {
        let mut manifest = Manifest {
            format: pipeline.format.as_str().to_owned(),
            num_args: self.combined.len(),
            ops: Vec::with_capacity(lowered.len()),
        };
        for (k, op) in self.ops.iter().enumerate() {
            let out_dir = dir.join(op_dir(k));
            let built = compiler.build(&request(k, out_dir.clone()))?;
            pipeline.prepare_for_runtime(
                &out_dir,
                &built.artifacts,
                &op.kernel,
                op.arg_map.len(),
            )?;
            manifest.ops.push(ManifestOp {
                dir: op_dir(k),
                kernel: op.kernel.clone(),
                arg_map: op.arg_map.clone(),
            });
        }
        let text = serde_json::to_vec_pretty(&manifest).map_err(|e| DriverError::ChainInput {
            chain: self.name.clone(),
            reason: format!("cannot write {CHAIN_MANIFEST}: {e}"),
        })?;
        write(&dir.join(CHAIN_MANIFEST), &text)
    }
}

/// The folder of op `k`'s own build in a chain compiled op by op.
fn op_dir(k: usize) -> String {
    format!("op{k}")
}

#[cfg(test)]
mod tests;
