//! `triton-npu`: the standalone binary. The same commands run from Python as
//! `triton-npu` (the console script) and `python -m triton_npu`.

fn main() -> std::process::ExitCode {
    // Ctrl-C and SIGTERM stop the tool or script being waited for (its whole process group);
    // the command then ends, and the exit status says which signal stopped it (130, 143).
    let signals = npu_process::interrupt::SignalFlag::install();
    let code = npu_cli::run(std::env::args_os(), &npu_cli::Host::standalone());
    npu_cache::flush_shared();
    let code = signals.received().map_or(code, |i| i.exit_code());
    std::process::ExitCode::from(code)
}
