//! `triton-npu`: the standalone binary, which pip installs as the `triton-npu` command. It
//! runs the commands that need nothing of Python itself, so that they start without an
//! interpreter, and hands the others (doctor, compile, run, test-examples) to the console
//! script installed beside it, `triton-npu-python` (see `npu_cli::python_entry`). The same
//! commands run inside Python as `python -m triton_npu`.

use npu_cli::python_entry;

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if python_entry::needs_python(&args)
        && let Some(script) = std::env::current_exe()
            .ok()
            .and_then(|exe| python_entry::script_beside(&exe))
    {
        let err = python_entry::exec(&script, &args[1..]);
        eprintln!(
            "triton-npu: cannot start {} ({err}); running the command without Python",
            script.display()
        );
    }
    // Ctrl-C and SIGTERM stop the tool or script being waited for (its whole process group);
    // the command then ends, and the exit status says which signal stopped it (130, 143).
    let signals = npu_process::interrupt::SignalFlag::install();
    let code = npu_cli::run(args, &npu_cli::Host::standalone());
    npu_cache::flush_shared();
    let code = signals.received().map_or(code, |i| i.exit_code());
    std::process::ExitCode::from(code)
}
