//! The transform scripts air-opt gets, through compiles on the stand-in toolchain: scripts of
//! our own that use every sequence of the transform library (alone and nested) are expanded
//! before air-opt runs and kept as `transform.mlir`; a plain matmul without a script gets the
//! automatic matmul schedule (kept as `auto_transform.mlir`) with §2's parameters; an unknown
//! include stops the compile before any tool runs.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::{Prefix, linalg_of};
use npu_target::{Config, NpuVersion, OutputFormat};
use npu_toolchain::npu_transform::{self, Library};
use npu_toolchain::{
    AirccOptions, CompileOutput, CompileRequest, Compiler, SearchPaths, Toolchain, ToolchainError,
};

/// `tests/fixtures/transform/<rel>` of the repository.
fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/transform")
        .join(rel)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn compile(
    config: &Config,
    kernel: &str,
    linalg: String,
    target: NpuVersion,
    out: &Path,
) -> Result<CompileOutput, ToolchainError> {
    let toolchain = Toolchain::discover(config, &SearchPaths::default())?;
    let format = match target {
        NpuVersion::Npu1 => OutputFormat::Xclbin,
        NpuVersion::Npu2 => OutputFormat::Elf,
    };
    Compiler::new(&toolchain, config).compile(&CompileRequest {
        kernel: kernel.into(),
        linalg: npu_toolchain::Linalg::read(linalg),
        grid: [2, 1, 1],
        actual_sizes: None,
        target,
        format,
        options: AirccOptions::default(),
        out_dir: out.to_path_buf(),
        debug_tag: Some("t".into()),
    })
}

#[test]
fn our_scripts_use_every_library_sequence_through_a_harness_compile() {
    let cases = [
        (
            "vec_add_f32_aie2p.mlir",
            "add_kernel",
            linalg_of("add.ttir"),
            NpuVersion::Npu2,
        ),
        (
            "vec_add_bf16_aie2.mlir",
            "add_kernel",
            linalg_of("add_bf16_divisibility.ttir"),
            NpuVersion::Npu1,
        ),
        (
            "relu_bf16_nested_aie2p.mlir",
            "relu_kernel",
            read(&fixture("kernels/relu_bf16.mlir")),
            NpuVersion::Npu2,
        ),
        (
            "scale_f32_to_bf16_aie2p.mlir",
            "scale_to_bf16_kernel",
            read(&fixture("kernels/scale_f32_to_bf16.mlir")),
            NpuVersion::Npu2,
        ),
        (
            "mul_f32_to_bf16_aie2p.mlir",
            "mul_to_bf16_kernel",
            read(&fixture("kernels/mul_f32_to_bf16.mlir")),
            NpuVersion::Npu2,
        ),
    ];
    let mut used = BTreeSet::new();
    for (script, kernel, linalg, target) in cases {
        let prefix = Prefix::new();
        let project = tempfile::tempdir().unwrap();
        let path = fixture(&format!("scripts/{script}"));
        let config = prefix.config(&[
            ("AIR_TRANSFORM_TILING_SCRIPT", &path.display().to_string()),
            (
                "AMD_TRITON_NPU_AIR_PROJECT_PATH",
                &project.path().display().to_string(),
            ),
        ]);
        let out = tempfile::tempdir().unwrap();
        let r = compile(&config, kernel, linalg, target, out.path())
            .unwrap_or_else(|e| panic!("{script}: {e}"));
        let expected =
            npu_transform::expand(&read(&path), &path.display().to_string(), Some(target)).unwrap();
        assert!(!expected.text.contains("transform.include"), "{script}");
        assert!(
            expected.warnings.is_empty(),
            "{script}: {:?}",
            expected.warnings
        );
        // What air-opt ran is the expansion: in the work directory it read, the debug folder
        // and the output folder.
        let kept = r.kept_dir.clone().unwrap();
        for dir in [kept.as_path(), out.path()] {
            assert_eq!(read(&dir.join("transform.mlir")), expected.text, "{script}");
        }
        assert_eq!(r.transform_mlir, out.path().join("transform.mlir"));
        assert_eq!(r.schedule, format!("user script {}", path.display()));
        assert!(r.auto_transform_mlir.is_none());
        let runs = prefix.runs("air-opt");
        assert!(
            runs[1]
                .0
                .iter()
                .any(|a| a.contains("air-transform{filename=transform.mlir}")),
            "{runs:?}"
        );
        used.extend(expected.expanded);
        used.extend(expected.inserted);
    }
    let all: BTreeSet<String> = Library::get().unwrap().names().into_iter().collect();
    let unused: Vec<&String> = all.difference(&used).collect();
    assert!(
        unused.is_empty(),
        "library sequences no script uses: {unused:?}"
    );
}

/// §2's pack sizes and herd caps, written out here independently of the product.
fn pack_and_cap(target: NpuVersion, elem: &str) -> ([u64; 3], [u64; 2]) {
    match (target, elem) {
        (NpuVersion::Npu2, _) => ([8, 8, 8], [4, 4]),
        (NpuVersion::Npu1, "i8") => ([4, 8, 8], [4, 2]),
        (NpuVersion::Npu1, _) => ([4, 4, 8], [4, 2]),
    }
}

fn largest_divisor_at_most(x: u64, cap: u64) -> u64 {
    (1..=cap)
        .filter(|d| x.is_multiple_of(*d))
        .max()
        .unwrap_or(1)
}

#[test]
fn matmuls_without_a_script_get_the_automatic_schedule() {
    for (elem, (m, n, k)) in [
        // (M, N, K) of each fixture.
        ("bf16", (64u64, 64u64, 64u64)),
        ("f32", (64, 32, 16)),
        ("i8", (128, 64, 64)),
    ] {
        for target in [NpuVersion::Npu1, NpuVersion::Npu2] {
            let prefix = Prefix::new();
            let config = prefix.config(&[]);
            let out = tempfile::tempdir().unwrap();
            let linalg = read(&fixture(&format!("kernels/matmul_{elem}.mlir")));
            let r = compile(&config, "matmul_kernel", linalg, target, out.path())
                .unwrap_or_else(|e| panic!("{elem} {target}: {e}"));
            assert_eq!(r.schedule, "automatic matmul schedule");
            let auto_path = r.auto_transform_mlir.clone().unwrap();
            assert_eq!(auto_path, out.path().join("auto_transform.mlir"));
            let auto = read(&auto_path);
            let (pack, cap) = pack_and_cap(target, elem);
            let herd = [
                largest_divisor_at_most(m / pack[0], cap[0]),
                largest_divisor_at_most(n / pack[1], cap[1]),
            ];
            let (l1_m, l1_n) = (m / herd[0], n / herd[1]);
            let l2_k = if k.is_multiple_of(2 * pack[2]) {
                2 * pack[2]
            } else {
                pack[2]
            };
            let want = [
                format!("packed_sizes = [{}, {}, {}]", pack[0], pack[1], pack[2]),
                format!(
                    "tile_using_forall %mm_for_cores tile_sizes [{}, {}, 0]",
                    l1_m / pack[0],
                    l1_n / pack[1]
                ),
                format!("tile_using_forall %write_back tile_sizes [{l1_m}, {l1_n}]"),
                format!("tile_using_for %load_a tile_sizes [0, {l2_k}]"),
                format!(
                    "tile_using_for %mm_abc tile_sizes [0, 0, {}]",
                    l2_k / pack[2]
                ),
            ];
            for w in &want {
                assert!(
                    auto.contains(w),
                    "{elem} {target}: {w} missing from\n{auto}"
                );
            }
            // transform.mlir is the generated schedule, expanded.
            let expanded =
                npu_transform::expand(&auto, "auto_transform.mlir", Some(target)).unwrap();
            assert_eq!(read(&r.transform_mlir), expanded.text);
            assert!(!expanded.text.contains("transform.include"));
            // f32 runs with bf16 emulation; aircc is told so.
            assert_eq!(r.bf16_emulation, elem == "f32", "{elem}");
            let aircc = &prefix.runs("aircc")[0].0;
            assert_eq!(
                aircc.iter().any(|a| a == "--bf16-emulation"),
                elem == "f32",
                "{aircc:?}"
            );
        }
    }
}

#[test]
fn an_unknown_include_stops_the_compile_before_any_tool_runs() {
    let prefix = Prefix::new();
    let path = fixture("errors/unknown_include.mlir");
    let config = prefix.config(&[("AIR_TRANSFORM_TILING_SCRIPT", &path.display().to_string())]);
    let out = tempfile::tempdir().unwrap();
    let err = compile(
        &config,
        "add_kernel",
        linalg_of("add.ttir"),
        NpuVersion::Npu2,
        out.path(),
    )
    .unwrap_err();
    assert!(matches!(err, ToolchainError::Transform(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:7: transform.include @tile_for_the_moon",
            path.display()
        )),
        "{text}"
    );
    assert!(text.contains("one_shot_bufferize"), "{text}");
    assert!(prefix.runs("air-opt").is_empty(), "nothing ran");
}
