//! `triton-npu`: the standalone binary. The same commands run from Python as
//! `triton-npu` (the console script) and `python -m triton_npu`.

fn main() -> std::process::ExitCode {
    let code = npu_cli::run(std::env::args_os(), &npu_cli::Host::standalone());
    std::process::ExitCode::from(code)
}
