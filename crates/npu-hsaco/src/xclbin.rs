//! Reader for the PDI and partition width inside an xclbin (the XRT "axlf" container), so that
//! no `xclbinutil` is needed.
//!
//! An axlf file starts with the magic `xclbin2\0`; its header at offset 304 holds the file length
//! and, at offset 448, the section count; 40-byte section headers follow from offset 456
//! (`kind` u32, name, then u64 offset and size). The `AIE_PARTITION` section (kind 32) starts
//! with a fixed structure: `column_width` (u16) at 32 and, at 120, the `(count, offset)` of its
//! 96-byte PDI records, each of which holds the `(size, offset)` of its image at 16. All offsets
//! inside the section are relative to the section start.

use crate::error::XclbinError;

/// The axlf magic.
pub const MAGIC: &[u8; 8] = b"xclbin2\0";
/// Section kind of `AIE_PARTITION`.
pub const AIE_PARTITION: u32 = 32;

const SECTION_COUNT_AT: usize = 448;
const SECTIONS_AT: usize = 456;
const SECTION_HEADER_SIZE: usize = 40;
const COLUMN_WIDTH_AT: usize = 32;
const PDI_ARRAY_AT: usize = 120;
const PARTITION_FIXED_SIZE: usize = 184;
const PDI_RECORD_SIZE: u64 = 96;
const PDI_IMAGE_AT: u64 = 16;

/// What a PdiInsts kernel needs from an xclbin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition<'a> {
    /// The single PDI image of the AIE partition.
    pub pdi: &'a [u8],
    /// The partition width (`column_width`).
    pub num_cols: u32,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn slice(bytes: &[u8], offset: u64, size: u64) -> Option<&[u8]> {
    let end = offset.checked_add(size)?;
    bytes.get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
}

/// The sections of an axlf file as `(kind, bytes)`.
pub fn sections(xclbin: &[u8]) -> Result<Vec<(u32, &[u8])>, XclbinError> {
    if xclbin.get(..8) != Some(MAGIC.as_slice()) {
        return Err(XclbinError::BadMagic);
    }
    let count = u32_at(xclbin, SECTION_COUNT_AT)
        .ok_or(XclbinError::Truncated("the header is incomplete"))?;
    let mut out = Vec::new();
    for index in 0..count {
        let at = SECTIONS_AT + index as usize * SECTION_HEADER_SIZE;
        let header = xclbin
            .get(at..at + SECTION_HEADER_SIZE)
            .ok_or(XclbinError::Truncated(
                "the section headers run past the end",
            ))?;
        let kind = u32_at(header, 0).expect("in bounds");
        let offset = u64_at(header, 24).expect("in bounds");
        let size = u64_at(header, 32).expect("in bounds");
        let data = slice(xclbin, offset, size).ok_or(XclbinError::SectionOutOfFile {
            index,
            offset,
            size,
        })?;
        out.push((kind, data));
    }
    Ok(out)
}

/// Reads the PDI and the column width from the xclbin's single `AIE_PARTITION` section.
pub fn partition(xclbin: &[u8]) -> Result<Partition<'_>, XclbinError> {
    let parts: Vec<&[u8]> = sections(xclbin)?
        .into_iter()
        .filter(|(k, _)| *k == AIE_PARTITION)
        .map(|(_, d)| d)
        .collect();
    let section = match parts.as_slice() {
        [] => return Err(XclbinError::NoAiePartition),
        [one] => *one,
        many => return Err(XclbinError::SeveralAiePartitions(many.len())),
    };
    if section.len() < PARTITION_FIXED_SIZE {
        return Err(XclbinError::MalformedPartition(
            "shorter than the aie_partition structure",
        ));
    }
    let num_cols = u32::from(u16::from_le_bytes([
        section[COLUMN_WIDTH_AT],
        section[COLUMN_WIDTH_AT + 1],
    ]));
    let pdi_count = u32_at(section, PDI_ARRAY_AT).expect("in bounds");
    let pdi_array = u32_at(section, PDI_ARRAY_AT + 4).expect("in bounds");
    if pdi_count != 1 {
        return Err(XclbinError::PdiCount(pdi_count));
    }
    let record = slice(section, u64::from(pdi_array), PDI_RECORD_SIZE).ok_or(
        XclbinError::MalformedPartition("the PDI record lies outside the section"),
    )?;
    let image_size = u32_at(record, PDI_IMAGE_AT as usize).expect("in bounds");
    let image_offset = u32_at(record, PDI_IMAGE_AT as usize + 4).expect("in bounds");
    let pdi = slice(section, u64::from(image_offset), u64::from(image_size)).ok_or(
        XclbinError::MalformedPartition("the PDI image lies outside the section"),
    )?;
    if pdi.is_empty() {
        return Err(XclbinError::EmptyPdi);
    }
    if num_cols == 0 {
        return Err(XclbinError::ZeroColumnWidth);
    }
    Ok(Partition { pdi, num_cols })
}
