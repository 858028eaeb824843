//! Stand-in `triton-shared-opt` (tests only): TTIR in, triton-shared-shaped Linalg out, with
//! the kernel's harness program as a module attribute.
//!
//! `triton-shared-opt [--triton-to-linalg-experimental] [--mlir-print-debuginfo] [-o OUT] [IN]`
//! (IN and OUT default to stdin/stdout). Without a conversion pass the module is copied as is,
//! like any mlir-opt with an empty pipeline.

use npu_harness_tools::cli::{self, flag, optional, value};
use npu_harness_tools::harness;
use npu_harness_tools::{linalg, meaning, ttir};

const TOOL: &str = "triton-shared-opt";

fn main() {
    let argv = harness::start(TOOL);
    let specs = [
        value("o"),
        // Pass flags may carry pass options (`--pass="opt=v"`), as in any mlir-opt.
        optional("triton-to-linalg-experimental"),
        optional("triton-to-linalg"),
        flag("mlir-print-debuginfo"),
        flag("allow-unregistered-dialect"),
        flag("split-input-file"),
        flag("version"),
        flag("help"),
    ];
    let args =
        cli::parse(TOOL, &argv[0], &argv[1..], &specs, 0..=1).unwrap_or_else(|e| harness::fail(&e));
    if args.flag("version") {
        print!("{}", harness::version_banner(TOOL));
        return;
    }
    if args.flag("help") {
        println!(
            "OVERVIEW: npu-harness stand-in for triton-shared-opt\n\nUSAGE: {TOOL} [options] <input file>"
        );
        return;
    }
    let input = args.positionals.first().map(String::as_str).unwrap_or("-");
    let output = args.value("o").unwrap_or("-");
    let text = harness::read_input(input).unwrap_or_else(|e| {
        harness::fail(&format!("{TOOL}: could not open input file '{input}': {e}"))
    });
    let converted =
        if args.present("triton-to-linalg-experimental") || args.present("triton-to-linalg") {
            match ttir::parse(&text) {
                Ok(kernel) => {
                    let meaning = meaning::program(&kernel);
                    linalg::emit(&kernel, &meaning, args.flag("mlir-print-debuginfo"))
                }
                Err(e) => harness::fail(&format!("{input}:1:1: error: {e}")),
            }
        } else {
            text
        };
    harness::write_output(output, converted.as_bytes())
        .unwrap_or_else(|e| harness::fail(&format!("{TOOL}: cannot write '{output}': {e}")));
}
