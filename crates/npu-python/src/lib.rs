//! `triton_npu._native`: the Rust core of triton-npu as a Python module.
//!
//! Each submodule registers its functions; Python wraps them in `triton_npu.*`. Every
//! function converts Rust errors into Python exceptions with the message intact, and every
//! call that may block releases the GIL; calls that may wait for a tool do so through
//! [`interrupt::detach_interruptible`], so Ctrl-C stops them.

use pyo3::prelude::*;

mod cache;
mod chain;
mod cli;
mod config;
mod dispatched;
mod errors;
mod host;
mod interrupt;
mod ir;
mod known;
mod launcher;
mod logging;
mod prebuilt;
mod shared;
mod target;
mod toolchain;
mod torch_reads;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", npu_target::VERSION)?;
    config::register(m)?;
    errors::register(m)?;
    logging::register(m)?;
    cache::register(m)?;
    cli::register(m)?;
    toolchain::register(m)?;
    ir::register(m)?;
    launcher::register(m)?;
    dispatched::register(m)?;
    chain::register(m)?;
    shared::register(m)?;
    prebuilt::register(m)?;
    target::register(m)?;
    Ok(())
}
