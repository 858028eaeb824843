//! Status texts for `hsa_status_string`, in our own words.

use hsa_sys::*;

/// A NUL-terminated text for `status`, or `None` for a value HSA does not define.
pub fn text(status: hsa_status_t) -> Option<&'static [u8]> {
    let text: &'static [u8] = match status {
        HSA_STATUS_SUCCESS => b"HSA_STATUS_SUCCESS: the call succeeded.\0",
        HSA_STATUS_INFO_BREAK => b"HSA_STATUS_INFO_BREAK: a callback stopped the iteration.\0",
        HSA_STATUS_ERROR => b"HSA_STATUS_ERROR: a generic error occurred.\0",
        HSA_STATUS_ERROR_INVALID_ARGUMENT => {
            b"HSA_STATUS_ERROR_INVALID_ARGUMENT: one of the arguments is not valid.\0"
        }
        HSA_STATUS_ERROR_INVALID_QUEUE_CREATION => {
            b"HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: the queue cannot be created with these \
              parameters.\0"
        }
        HSA_STATUS_ERROR_INVALID_ALLOCATION => {
            b"HSA_STATUS_ERROR_INVALID_ALLOCATION: an address is not inside memory allocated by \
              this runtime.\0"
        }
        HSA_STATUS_ERROR_INVALID_AGENT => {
            b"HSA_STATUS_ERROR_INVALID_AGENT: the agent is not valid.\0"
        }
        HSA_STATUS_ERROR_INVALID_REGION => {
            b"HSA_STATUS_ERROR_INVALID_REGION: the memory region or pool is not valid.\0"
        }
        HSA_STATUS_ERROR_INVALID_SIGNAL => {
            b"HSA_STATUS_ERROR_INVALID_SIGNAL: the signal is not valid.\0"
        }
        HSA_STATUS_ERROR_INVALID_QUEUE => {
            b"HSA_STATUS_ERROR_INVALID_QUEUE: the queue is not valid.\0"
        }
        HSA_STATUS_ERROR_OUT_OF_RESOURCES => {
            b"HSA_STATUS_ERROR_OUT_OF_RESOURCES: the runtime could not allocate the resources it \
              needs.\0"
        }
        HSA_STATUS_ERROR_INVALID_PACKET_FORMAT => {
            b"HSA_STATUS_ERROR_INVALID_PACKET_FORMAT: a packet in the queue is malformed.\0"
        }
        HSA_STATUS_ERROR_RESOURCE_FREE => {
            b"HSA_STATUS_ERROR_RESOURCE_FREE: a resource could not be released.\0"
        }
        HSA_STATUS_ERROR_NOT_INITIALIZED => {
            b"HSA_STATUS_ERROR_NOT_INITIALIZED: the runtime is not initialised (call hsa_init).\0"
        }
        HSA_STATUS_ERROR_REFCOUNT_OVERFLOW => {
            b"HSA_STATUS_ERROR_REFCOUNT_OVERFLOW: the runtime reference count overflowed.\0"
        }
        HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS => {
            b"HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS: the arguments do not fit together (e.g. \
              the code object has nothing for this agent).\0"
        }
        HSA_STATUS_ERROR_INVALID_INDEX => {
            b"HSA_STATUS_ERROR_INVALID_INDEX: the index is not valid.\0"
        }
        HSA_STATUS_ERROR_INVALID_ISA => b"HSA_STATUS_ERROR_INVALID_ISA: the ISA is not valid.\0",
        HSA_STATUS_ERROR_INVALID_CODE_OBJECT => {
            b"HSA_STATUS_ERROR_INVALID_CODE_OBJECT: the code object is malformed.\0"
        }
        HSA_STATUS_ERROR_INVALID_EXECUTABLE => {
            b"HSA_STATUS_ERROR_INVALID_EXECUTABLE: the executable is not valid.\0"
        }
        HSA_STATUS_ERROR_FROZEN_EXECUTABLE => {
            b"HSA_STATUS_ERROR_FROZEN_EXECUTABLE: the executable is frozen.\0"
        }
        HSA_STATUS_ERROR_INVALID_SYMBOL_NAME => {
            b"HSA_STATUS_ERROR_INVALID_SYMBOL_NAME: there is no symbol with this name.\0"
        }
        HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED => {
            b"HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED: the variable is already defined.\0"
        }
        HSA_STATUS_ERROR_VARIABLE_UNDEFINED => {
            b"HSA_STATUS_ERROR_VARIABLE_UNDEFINED: a variable the code object needs is not \
              defined.\0"
        }
        HSA_STATUS_ERROR_EXCEPTION => {
            b"HSA_STATUS_ERROR_EXCEPTION: the device raised an exception while running a \
              packet.\0"
        }
        HSA_STATUS_ERROR_INVALID_CODE_SYMBOL => {
            b"HSA_STATUS_ERROR_INVALID_CODE_SYMBOL: the code symbol is not valid.\0"
        }
        HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL => {
            b"HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: the executable symbol is not valid.\0"
        }
        HSA_STATUS_ERROR_INVALID_FILE => {
            b"HSA_STATUS_ERROR_INVALID_FILE: the file descriptor is not valid.\0"
        }
        HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER => {
            b"HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER: the code object reader is not valid.\0"
        }
        HSA_STATUS_ERROR_FATAL => b"HSA_STATUS_ERROR_FATAL: a fatal error occurred.\0",
        _ => return None,
    };
    Some(text)
}
