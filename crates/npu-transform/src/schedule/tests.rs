use super::*;
use crate::testing::{axpy_linalg, check_closed, matmul_linalg};

const TARGETS: [NpuVersion; 2] = [NpuVersion::Npu1, NpuVersion::Npu2];

/// [`super::choose`] for a kernel's text.
fn choose(
    user_script: Option<&Path>,
    linalg: &str,
    target: NpuVersion,
) -> Result<Schedule, TransformError> {
    super::choose(user_script, &crate::kernel::summarize(linalg), target)
}

#[test]
fn a_missing_user_script_names_the_path_and_the_working_directory() {
    let e = choose(
        Some(Path::new("no/such/transform.mlir")),
        "",
        NpuVersion::Npu2,
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("no/such/transform.mlir"), "{msg}");
    let cwd = std::env::current_dir().unwrap();
    assert!(
        msg.contains(&format!("working directory: {}", cwd.display())),
        "{msg}"
    );
    assert!(msg.contains("AIR_TRANSFORM_TILING_SCRIPT"), "{msg}");
}

#[test]
fn the_user_script_wins_and_is_expanded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.mlir");
    std::fs::write(
        &path,
        "module attributes {transform.with_named_sequence} {\n  \
         transform.named_sequence @__transform_main(%arg1: !transform.any_op {transform.readonly}) {\n    \
         transform.include @one_shot_bufferize failures(propagate) (%arg1) : (!transform.any_op) -> ()\n    \
         transform.yield\n  }\n}\n",
    )
    .unwrap();
    // Even for a matmul kernel: detection runs only without a user script.
    let s = choose(
        Some(&path),
        &matmul_linalg(64, 64, 64, "bf16"),
        NpuVersion::Npu2,
    )
    .unwrap();
    assert_eq!(s.kind, ScheduleKind::User(path.clone()));
    assert!(s.matmul.is_none() && s.generated.is_none());
    assert!(
        s.script()
            .contains("transform.bufferization.one_shot_bufferize")
    );
    check_closed(s.script()).unwrap();
    // An unknown include names the user's file.
    std::fs::write(
        &path,
        std::fs::read_to_string(&path)
            .unwrap()
            .replace("@one_shot_bufferize", "@nope"),
    )
    .unwrap();
    let e = choose(Some(&path), "", NpuVersion::Npu2)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(&format!("{}:3:", path.display())), "{e}");
}

#[test]
fn a_plain_matmul_gets_the_automatic_schedule() {
    for target in TARGETS {
        for elem in ["bf16", "f32", "i8"] {
            let linalg = matmul_linalg(64, 64, 64, elem);
            let s = choose(None, &linalg, target).unwrap();
            assert_eq!(s.kind, ScheduleKind::Matmul, "{target} {elem}");
            let p = s.matmul.clone().unwrap();
            assert_eq!((p.info.m, p.info.n, p.info.k), (64, 64, 64));
            let generated = s.generated.as_deref().unwrap();
            assert!(
                generated.contains(&format!(
                    "packed_sizes = [{}, {}, {}]",
                    p.pack[0], p.pack[1], p.pack[2]
                )),
                "{generated}"
            );
            assert!(generated.contains("transform.include @one_shot_bufferize"));
            let script = s.script();
            check_closed(script).unwrap_or_else(|e| panic!("{e}\n{script}"));
            // Allocate (L2 for C, L1 for the packs) before bufferizing; herds after.
            let bufferize = script
                .find("transform.bufferization.one_shot_bufferize")
                .unwrap();
            let last_alloc = script
                .rfind("transform.structured.bufferize_to_allocation")
                .unwrap();
            let first_herd = script.find("transform.loop.forall_to_parallel").unwrap();
            assert!(last_alloc < bufferize && bufferize < first_herd);
            assert_eq!(
                script.matches("transform.loop.forall_to_parallel").count(),
                3
            );
            assert_eq!(
                script.contains("input_indices = [0, 1]"),
                elem == "f32",
                "{target} {elem}"
            );
            let acc = if elem == "i8" { "i32" } else { "f32" };
            assert!(script.contains(&format!("target_element_type = {acc}, input_indices = [2]")));
            assert_eq!(
                is_f32_matmul(&crate::kernel::summarize(&linalg)),
                elem == "f32"
            );
        }
    }
}

#[test]
fn kernels_that_do_not_qualify_get_the_default() {
    // Not divisible by npu1's pack (M 6 is no multiple of 4), a transposed operand, an
    // epilogue: the default schedule, as upstream.
    let odd = matmul_linalg(6, 8, 8, "bf16");
    assert_eq!(
        choose(None, &odd, NpuVersion::Npu1).unwrap().kind,
        ScheduleKind::Default
    );
    let transposed = matmul_linalg(64, 64, 64, "bf16").replace(
        "    %4 = linalg.matmul",
        "    %t = linalg.transpose ins(%3 : tensor<64x64xbf16>) outs(%3 : tensor<64x64xbf16>) permutation = [1, 0]\n    %4 = linalg.matmul",
    );
    assert_eq!(
        choose(None, &transposed, NpuVersion::Npu2).unwrap().kind,
        ScheduleKind::Default
    );
    // f32 emulation is about the matmul, not about whether a schedule exists.
    assert!(is_f32_matmul(&crate::kernel::summarize(&matmul_linalg(
        6, 8, 8, "f32"
    ))));
}

#[test]
fn elementwise_kernels_get_the_default_on_both_targets() {
    for target in TARGETS {
        for elem in ["f32", "bf16", "i8", "i32"] {
            let linalg = axpy_linalg(elem);
            let s = choose(None, &linalg, target).unwrap();
            assert_eq!(s.kind, ScheduleKind::Default);
            let script = s.script();
            check_closed(script).unwrap_or_else(|e| panic!("{e}\n{script}"));
            assert!(!script.contains("transform.include"));
            let generated = s.generated.as_deref().unwrap();
            let columns = if target == NpuVersion::Npu1 { 4 } else { 8 };
            assert!(
                script.contains(&format!("num_threads [{columns}]")),
                "{script}"
            );
            assert_eq!(script.matches("tile_using_forall").count(), 1);
            assert_eq!(
                script.matches("transform.loop.forall_to_parallel").count(),
                1
            );
            // Two loaded tensors and the result, each in L1, padded with its own type's zero.
            let zero = if elem.starts_with('i') {
                format!("0 : {elem}")
            } else {
                format!("0.0 : {elem}")
            };
            assert_eq!(script.matches(&zero).count(), 3, "{script}");
            assert_eq!(script.matches("memory_space = 2").count(), 3);
            assert!(generated.contains("@fuse_elementwise_and_canonicalize"));
        }
    }
}

#[test]
fn every_generated_schedule_uses_only_library_names_it_has() {
    let lib = crate::library::Library::get().unwrap();
    let names = lib.names();
    for target in TARGETS {
        for linalg in [axpy_linalg("bf16"), matmul_linalg(128, 64, 32, "i8")] {
            let s = choose(None, &linalg, target).unwrap();
            for e in &s.expansion.expanded {
                assert!(names.contains(e), "{e}");
            }
            assert!(!s.expansion.expanded.is_empty());
            assert!(
                s.expansion.warnings.is_empty(),
                "{:?}",
                s.expansion.warnings
            );
        }
    }
}

/// Log output captured from a tracing subscriber.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

fn debug_log_of(f: impl FnOnce()) -> String {
    let sink = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(sink.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = sink.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn a_kernel_that_does_not_qualify_says_why_at_debug_level() {
    let transposed = matmul_linalg(64, 64, 64, "bf16").replace(
        "    %4 = linalg.matmul",
        "    %t = linalg.transpose ins(%3 : tensor<64x64xbf16>) outs(%3 : tensor<64x64xbf16>) permutation = [1, 0]\n    %4 = linalg.matmul",
    );
    let log = debug_log_of(|| {
        choose(None, &transposed, NpuVersion::Npu2).unwrap();
    });
    assert!(log.contains("DEBUG"), "{log}");
    assert!(
        log.contains("kernel=\"mm\"") || log.contains("kernel=mm"),
        "{log}"
    );
    assert!(
        log.contains(
            "no automatic matmul schedule: it has linalg ops besides matmul and fill \
             (linalg.transpose)"
        ),
        "{log}"
    );
    assert!(
        log.contains("using the default elementwise schedule"),
        "{log}"
    );
    let odd = debug_log_of(|| {
        choose(None, &matmul_linalg(6, 8, 8, "bf16"), NpuVersion::Npu1).unwrap();
    });
    assert!(
        odd.contains("M = 6 is not a multiple of the npu1 pack size 4 for bf16"),
        "{odd}"
    );
    let chosen = debug_log_of(|| {
        choose(None, &matmul_linalg(64, 64, 64, "i8"), NpuVersion::Npu2).unwrap();
    });
    assert!(
        chosen.contains("using the automatic matmul schedule"),
        "{chosen}"
    );
}
