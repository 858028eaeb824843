//! `triton-npu doctor`.

use crate::Host;

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_args: &DoctorArgs, _host: &Host) -> u8 {
    1
}
