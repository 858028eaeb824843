//! Every `unsafe` operation of this crate, each behind a safe type or function:
//!
//! * [`host`]: host memory handed to dispatches ([`host::HostArg`]) and the memory the device
//!   uses in place ([`host::SharedBuffer`]); all copies in and out of it;
//! * [`hsa`]: HSA's result layer (every `hsa_status_t` becomes a typed error naming the call)
//!   and its safe types that free themselves on drop (ROCr, queue, signal, pool allocation,
//!   code-object reader, executable);
//! * `xrt`: the promise that an XRT buffer object's mapping is valid while it lives (XRT's
//!   own result layer and handle types are `xrt-sys`).
//!
//! The runtimes (`crate::hsa`, `crate::xrt`) are safe code over these.

pub mod host;
pub(crate) mod hsa;
mod xrt;
