//! XRT command states (`enum ert_cmd_state`).

use crate::bindings;

/// The state of a run, as XRT numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommandState(pub i32);

impl CommandState {
    pub const COMPLETED: CommandState =
        CommandState(bindings::TRITON_NPU_XRT_STATE_COMPLETED as i32);
    pub const ERROR: CommandState = CommandState(bindings::TRITON_NPU_XRT_STATE_ERROR as i32);
    pub const ABORT: CommandState = CommandState(bindings::TRITON_NPU_XRT_STATE_ABORT as i32);
    pub const TIMEOUT: CommandState = CommandState(bindings::TRITON_NPU_XRT_STATE_TIMEOUT as i32);

    /// XRT's name for the state, e.g. `ERT_CMD_STATE_ABORT`.
    pub fn name(self) -> &'static str {
        match self.0 {
            1 => "ERT_CMD_STATE_NEW",
            2 => "ERT_CMD_STATE_QUEUED",
            3 => "ERT_CMD_STATE_RUNNING",
            4 => "ERT_CMD_STATE_COMPLETED",
            5 => "ERT_CMD_STATE_ERROR",
            6 => "ERT_CMD_STATE_ABORT",
            7 => "ERT_CMD_STATE_SUBMITTED",
            8 => "ERT_CMD_STATE_TIMEOUT",
            9 => "ERT_CMD_STATE_NORESPONSE",
            10 => "ERT_CMD_STATE_SKERROR",
            11 => "ERT_CMD_STATE_SKCRASHED",
            _ => "ERT_CMD_STATE_UNKNOWN",
        }
    }
}

impl std::fmt::Display for CommandState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name() == "ERT_CMD_STATE_UNKNOWN" {
            write!(f, "ERT_CMD_STATE_UNKNOWN ({})", self.0)
        } else {
            f.write_str(self.name())
        }
    }
}
