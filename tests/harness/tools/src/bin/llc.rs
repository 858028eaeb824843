//! Stand-in for Peano's (llvm-aie's) `llc` (tests only): answers `--version` with an LLVM
//! banner whose target list includes `aie2` and `aie2p`, which is how triton-npu (and
//! upstream) recognise a Peano installation. Nothing else is supported: the stand-in aircc
//! never compiles core code.

use npu_harness_tools::cli::{self, flag};
use npu_harness_tools::harness;

const TOOL: &str = "llc";

fn main() {
    let argv = harness::start(TOOL);
    let specs = [flag("version"), flag("help")];
    let args =
        cli::parse(TOOL, &argv[0], &argv[1..], &specs, 0..=1).unwrap_or_else(|e| harness::fail(&e));
    if args.flag("version") {
        print!(
            "LLVM (http://llvm.org/):\n  LLVM version 21.0.0-npu-harness (stand-in for Peano/llvm-aie)\n  \
             Optimized build.\n  Default target: x86_64-unknown-linux-gnu\n  Host CPU: generic\n\n  \
             Registered Targets:\n    aie    - AIE\n    aie2   - AIE2\n    aie2p  - AIE2P\n"
        );
        return;
    }
    harness::fail(&format!(
        "{TOOL}: error: the npu-harness stand-in only answers --version (no AIE code is compiled \
         in the conformance harness)"
    ));
}
