//! Device buffers as numbers: the little-endian bytes a harness program reads and writes.

use npu_harness_program::{bf16_to_f32, f32_to_bf16};

/// `bytes` read as f32 values.
pub fn from_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `bytes` read as bf16 values, widened to f32.
pub fn from_bf16(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(2)
        .map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
        .collect()
}

/// `values` as f32 bytes.
pub fn bytes_f32(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `values` rounded to bf16, as bytes.
pub fn bytes_bf16(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|x| f32_to_bf16(*x).to_le_bytes())
        .collect()
}
