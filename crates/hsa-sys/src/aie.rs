//! The AIE dispatch packet of `hsa/hsa_ext_amd_aie.h` (kernel-object form), written by hand
//! because Debian's headers do not ship that header. Field order and offsets follow the
//! hsaco-era layout ROCr's XDNA driver reads (see `runtime-apis.md` A.2.2); the assertions at
//! the bottom fail the build if the layout drifts.

#![allow(non_camel_case_types)]

use core::ffi::c_void;
use core::mem::{align_of, offset_of, size_of};

use crate::bindings::{
    HSA_FENCE_SCOPE_SYSTEM, HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE,
    HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE, HSA_PACKET_HEADER_TYPE, hsa_signal_t,
};

pub const HSA_AMD_AIE_INTERFACE_VERSION_MAJOR: u32 = 1;
pub const HSA_AMD_AIE_INTERFACE_VERSION_MINOR: u32 = 0;

/// `hsa_amd_aie_packet_type_t`.
pub type hsa_amd_aie_packet_type_t = u32;
/// The packet is ready for the packet processor.
pub const HSA_AMD_AIE_PACKET_TYPE_READY: hsa_amd_aie_packet_type_t = 0;
/// The slot holds no packet.
pub const HSA_AMD_AIE_PACKET_TYPE_INVALID: hsa_amd_aie_packet_type_t = 1;

/// `hsa_amd_aie_packet_opcode_t`.
pub type hsa_amd_aie_packet_opcode_t = u32;
/// Kernel-mode queue command: run one kernel object.
pub const HSA_AMD_AIE_PACKET_OPCODE_KMQ: hsa_amd_aie_packet_opcode_t = 0;

/// The value of `count`: bytes after `completion_signal` up to and including `kernarg_address`.
pub const HSA_AMD_AIE_PACKET_COUNT: u16 = 24;

/// Size of one ring slot.
pub const HSA_AMD_AIE_PACKET_SIZE: usize = 64;

/// `hsa_amd_aie_kernel_dispatch_packet_t`: runs the kernel object named by
/// `kernel_object_low/high` over the buffers listed at `kernarg_address` (N device addresses,
/// then N sizes in bytes, all `u64`).
///
/// The C header overlays `header`/`opcode` with a 32-bit `full_header`; see
/// [`Self::full_header`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hsa_amd_aie_kernel_dispatch_packet_t {
    pub header: u16,
    pub opcode: u16,
    pub count: u16,
    pub reserved0: u8,
    pub reserved1: u8,
    pub completion_signal: hsa_signal_t,
    pub reserved2: u32,
    pub kernel_object_low: u32,
    pub kernel_object_high: u32,
    pub num_kernargs: u16,
    pub reserved3: u16,
    pub kernarg_address: *mut c_void,
    pub reserved4: u64,
    pub reserved5: *mut c_void,
    pub reserved6: u64,
}

const _: () = {
    type P = hsa_amd_aie_kernel_dispatch_packet_t;
    assert!(size_of::<P>() == HSA_AMD_AIE_PACKET_SIZE);
    assert!(align_of::<P>() == 8);
    assert!(offset_of!(P, header) == 0);
    assert!(offset_of!(P, opcode) == 2);
    assert!(offset_of!(P, count) == 4);
    assert!(offset_of!(P, reserved0) == 6);
    assert!(offset_of!(P, reserved1) == 7);
    assert!(offset_of!(P, completion_signal) == 8);
    assert!(offset_of!(P, reserved2) == 16);
    assert!(offset_of!(P, kernel_object_low) == 20);
    assert!(offset_of!(P, kernel_object_high) == 24);
    assert!(offset_of!(P, num_kernargs) == 28);
    assert!(offset_of!(P, reserved3) == 30);
    assert!(offset_of!(P, kernarg_address) == 32);
    assert!(offset_of!(P, reserved4) == 40);
    assert!(offset_of!(P, reserved5) == 48);
    assert!(offset_of!(P, reserved6) == 56);
    // `count` covers exactly the bytes from the end of completion_signal to the end of
    // kernarg_address.
    assert!(offset_of!(P, kernarg_address) + 8 - (offset_of!(P, completion_signal) + 8) == 24);
};

/// The header of a ready packet with system-scope acquire and release fences (`0x1400`).
pub const fn ready_header() -> u16 {
    ((HSA_AMD_AIE_PACKET_TYPE_READY << HSA_PACKET_HEADER_TYPE)
        | (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE)
        | (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE)) as u16
}

const _: () = assert!(ready_header() == 0x1400);

impl hsa_amd_aie_kernel_dispatch_packet_t {
    /// A KMQ packet for `kernel_object` over `num_kernargs` buffers listed at `kernarg_address`,
    /// with the header still INVALID: publish it with [`Self::full_header`] stored last.
    pub fn new(
        kernel_object: u64,
        completion_signal: hsa_signal_t,
        num_kernargs: u16,
        kernarg_address: *mut c_void,
    ) -> Self {
        Self {
            header: HSA_AMD_AIE_PACKET_TYPE_INVALID as u16,
            opcode: HSA_AMD_AIE_PACKET_OPCODE_KMQ as u16,
            count: HSA_AMD_AIE_PACKET_COUNT,
            reserved0: 0,
            reserved1: 0,
            completion_signal,
            reserved2: 0,
            kernel_object_low: kernel_object as u32,
            kernel_object_high: (kernel_object >> 32) as u32,
            num_kernargs,
            reserved3: 0,
            kernarg_address,
            reserved4: 0,
            reserved5: core::ptr::null_mut(),
            reserved6: 0,
        }
    }

    /// The kernel object the packet names.
    pub fn kernel_object(&self) -> u64 {
        (u64::from(self.kernel_object_high) << 32) | u64::from(self.kernel_object_low)
    }

    /// The first 32 bits (`full_header` in C): `header | opcode << 16`.
    pub fn full_header(header: u16, opcode: u16) -> u32 {
        u32::from(header) | (u32::from(opcode) << 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_object_round_trips_through_the_split_fields() {
        let ko = 0x1234_5678_9abc_def0;
        let p = hsa_amd_aie_kernel_dispatch_packet_t::new(
            ko,
            hsa_signal_t { handle: 7 },
            3,
            core::ptr::null_mut(),
        );
        assert_eq!(p.kernel_object_low, 0x9abc_def0);
        assert_eq!(p.kernel_object_high, 0x1234_5678);
        assert_eq!(p.kernel_object(), ko);
        assert_eq!(p.count, 24);
        assert_eq!(p.header, 1, "a new packet is not published yet");
        assert_eq!(
            hsa_amd_aie_kernel_dispatch_packet_t::full_header(ready_header(), 0),
            0x1400
        );
    }
}
