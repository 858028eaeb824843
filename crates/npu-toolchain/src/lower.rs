//! Lowering triton-shared's Linalg to AIR with the `air-opt` binary.
//!
//! Upstream runs three steps in-process through mlir-air's Python bindings
//! (`PassManager.parse(...).run(...)` and `air.compiler.util.run_transform`). We run the same
//! steps as `air-opt` processes, one per step so that each step's IR can be kept:
//!
//! | upstream (in-process) | `air-opt` arguments |
//! |---|---|
//! | `PassManager.parse("builtin.module(air-resolve-tensor-opoperand-conflicts, air-override-memref-memory-space{scope=func memory-space=1})")` | `--pass-pipeline=<the same string>` |
//! | `run_transform(script, module)` | `--pass-pipeline=builtin.module(air-transform{filename=transform.mlir})` — mlir-air's `air-transform` pass parses the script file and applies its transform ops exactly as `run_transform` does |
//! | `PassManager.parse("builtin.module(func.func(air-wrap-func-with-parallel{loop-bounds=X,Y,Z [actual-sizes=M,N,1]}), air-par-to-launch{depth=0 has-air-segment=true}, canonicalize, cse, air-copy-to-dma)")` | `--pass-pipeline=<the same string>` |
//!
//! Every step reads its input file and writes its result with `-o`; paths are relative to the
//! private work directory, which is the tool's working directory.

use std::ffi::OsString;

use npu_transform::kernel::Linalg;

/// The IR file names of the lowering, in order (kept in the debug directory).
pub const SOURCE: &str = "asm_src.mlir";
pub const PREPARED: &str = "air_prepared.mlir";
/// The expanded transform script air-opt runs (kept with every compile's artifacts).
pub const TRANSFORM_SCRIPT: &str = npu_transform::schedule::TRANSFORM_SCRIPT;
/// The generated matmul schedule before expansion, kept beside [`TRANSFORM_SCRIPT`] when the
/// automatic matmul schedule was chosen.
pub const AUTO_TRANSFORM_SCRIPT: &str = npu_transform::schedule::AUTO_TRANSFORM_SCRIPT;
pub const TILED: &str = "air_tiled.mlir";
pub const AIR_OUTPUT: &str = "asm_air_output.mlir";

/// One `air-opt` run of the lowering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerStep {
    /// `air-opt prepare`, `air-opt transform`, `air-opt launch`.
    pub name: &'static str,
    pub input: &'static str,
    pub output: &'static str,
    pub pipeline: String,
}

impl LowerStep {
    pub fn args(&self) -> Vec<OsString> {
        vec![
            self.input.into(),
            format!("--pass-pipeline={}", self.pipeline).into(),
            "-o".into(),
            self.output.into(),
        ]
    }
}

/// The three steps for a launch grid. `actual_sizes` is upstream's `M,N,1` padding hint (see
/// [`actual_sizes`]).
pub fn steps(grid: [u32; 3], actual_sizes: Option<[u64; 3]>) -> [LowerStep; 3] {
    let [x, y, z] = grid;
    let mut wrap = format!("loop-bounds={x},{y},{z}");
    if let Some([m, n, k]) = actual_sizes {
        wrap.push_str(&format!(" actual-sizes={m},{n},{k}"));
    }
    [
        LowerStep {
            name: "air-opt prepare",
            input: SOURCE,
            output: PREPARED,
            pipeline: "builtin.module(air-resolve-tensor-opoperand-conflicts,\
                       air-override-memref-memory-space{scope=func memory-space=1})"
                .to_owned(),
        },
        LowerStep {
            name: "air-opt transform",
            input: PREPARED,
            output: TILED,
            pipeline: format!("builtin.module(air-transform{{filename={TRANSFORM_SCRIPT}}})"),
        },
        LowerStep {
            name: "air-opt launch",
            input: TILED,
            output: AIR_OUTPUT,
            pipeline: format!(
                "builtin.module(func.func(air-wrap-func-with-parallel{{{wrap}}}),\
                 air-par-to-launch{{depth=0 has-air-segment=true}},canonicalize,cse,air-copy-to-dma)"
            ),
        },
    ]
}

/// Upstream's rule for `actual-sizes`: when the kernel has constexprs `M` and `N`, they are the
/// real problem sizes, passed as `M,N,1` — unless `BLOCK_SIZE_M` and `BLOCK_SIZE_N` are also
/// constexprs and divide them (no padding needed). `constexprs` maps names to values.
pub fn actual_sizes<'a>(
    constexprs: impl IntoIterator<Item = (&'a str, i64)> + Clone,
) -> Option<[u64; 3]> {
    let get = |name: &str| {
        constexprs
            .clone()
            .into_iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    };
    let (m, n) = (get("M")?, get("N")?);
    let needs_padding = match (get("BLOCK_SIZE_M"), get("BLOCK_SIZE_N")) {
        (Some(bm), Some(bn)) if bm != 0 && bn != 0 => m % bm != 0 || n % bn != 0,
        _ => true,
    };
    needs_padding.then(|| [m.max(0) as u64, n.max(0) as u64, 1])
}

/// Whether the Linalg module is a single plain f32 matmul (upstream's `_detect_matmul` rule:
/// exactly one `linalg.matmul`, no linalg ops other than `matmul` and `fill`), for which
/// aircc gets `--bf16-emulation` (the AIE has no f32 MAC).
pub fn is_f32_matmul(linalg: &Linalg) -> bool {
    npu_transform::schedule::is_f32_matmul(linalg.summary())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_pipelines() {
        let s = steps([4, 2, 1], None);
        let args: Vec<String> = s[0]
            .args()
            .iter()
            .map(|a| a.to_string_lossy().into())
            .collect();
        assert_eq!(
            args,
            [
                "asm_src.mlir",
                "--pass-pipeline=builtin.module(air-resolve-tensor-opoperand-conflicts,\
                 air-override-memref-memory-space{scope=func memory-space=1})",
                "-o",
                "air_prepared.mlir"
            ]
        );
        assert_eq!(
            s[1].pipeline,
            "builtin.module(air-transform{filename=transform.mlir})"
        );
        assert_eq!(
            s[2].pipeline,
            "builtin.module(func.func(air-wrap-func-with-parallel{loop-bounds=4,2,1}),\
             air-par-to-launch{depth=0 has-air-segment=true},canonicalize,cse,air-copy-to-dma)"
        );
        assert_eq!((s[2].input, s[2].output), (TILED, AIR_OUTPUT));
        let padded = steps([8, 8, 1], Some([500, 300, 1]));
        assert!(
            padded[2]
                .pipeline
                .contains("{loop-bounds=8,8,1 actual-sizes=500,300,1}"),
            "{}",
            padded[2].pipeline
        );
    }

    #[test]
    fn actual_sizes_rule() {
        assert_eq!(actual_sizes([("M", 500), ("N", 300)]), Some([500, 300, 1]));
        assert_eq!(
            actual_sizes([
                ("M", 512),
                ("N", 256),
                ("BLOCK_SIZE_M", 64),
                ("BLOCK_SIZE_N", 64)
            ]),
            None
        );
        assert_eq!(
            actual_sizes([
                ("M", 500),
                ("N", 256),
                ("BLOCK_SIZE_M", 64),
                ("BLOCK_SIZE_N", 64)
            ]),
            Some([500, 256, 1])
        );
        // One block size alone does not decide.
        assert_eq!(
            actual_sizes([("M", 512), ("N", 256), ("BLOCK_SIZE_M", 64)]),
            Some([512, 256, 1])
        );
        assert_eq!(actual_sizes([("M", 512)]), None);
        assert_eq!(actual_sizes([("BLOCK_SIZE", 1024)]), None);
    }
}
