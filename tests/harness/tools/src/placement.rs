//! The stand-in aircc's herd placement: where the real aircc places each herd on the AIE array
//! (`air-place-herds`) and where the AIE dialect checks that every core tile exists.
//!
//! * aircc's array (mlir-air tools/aircc/aircc.cpp:991-1010 @ d0e522b): `-num-cols`, else 4
//!   columns for an `npu1*` device and for `npu2_4col`, 8 for another `npu2*`; `-num-rows`,
//!   else 6; herds are placed from row `-row-offset`, else 2. It runs
//!   `air-place-herds{num-rows num-cols row-anchor col-anchor}` (aircc.cpp:1146-1151).
//! * `air-place-herds` (mlir-air mlir/lib/Transform/AIRHerdPlacementPass.cpp:590-597): a herd
//!   of more columns or rows than that array is left unplaced: `No valid placement found.` and
//!   `'air.herd' op \nUnplaced herd: <name>` (test
//!   mlir/test/Transform/AIRHerdPlacement/matmul_gelu_overflow.mlir). A herd's columns are its
//!   first size, its rows the second (`HerdOp::getNumCols`/`getNumRows`, AIRDialect.cpp).
//! * The devices have 6 rows (shim row 0, memory tiles row 1, cores rows 2-5), so a herd that
//!   fits aircc's default 6 rows but not the 4 core rows above the anchor makes a tile the AIE
//!   dialect refuses: `'aie.tile' op row index (6) must be less than the number of rows in the
//!   device (6)` (mlir-aie lib/Dialect/AIE/IR/AIEDialect.cpp, `TileOp::verify`).

/// The array aircc places herds on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Array {
    pub cols: u64,
    pub rows: u64,
    pub row_anchor: u64,
}

/// Rows of an npu1/npu2 device (shim, memory tile, four core rows).
pub const DEVICE_ROWS: u64 = 6;

/// aircc's array for `device`, with its `-num-cols`/`-num-rows`/`-row-offset` values.
pub fn array(
    device: &str,
    num_cols: Option<i64>,
    num_rows: Option<i64>,
    row_offset: Option<i64>,
) -> Array {
    let set = |v: Option<i64>| v.filter(|v| *v >= 0).map(|v| v as u64);
    let cols = set(num_cols).unwrap_or(if device.contains("npu1") || device == "npu2_4col" {
        4
    } else if device.contains("npu2") {
        8
    } else {
        10
    });
    Array {
        cols,
        rows: set(num_rows).unwrap_or(6),
        row_anchor: set(row_offset).unwrap_or(2),
    }
}

/// Places each herd (`[columns, rows]`, named `herd_<k>`) on its own; the first that does not
/// fit gives the real tools' diagnostic.
pub fn place(herds: &[[u64; 2]], array: &Array) -> Result<(), String> {
    for (k, [cols, rows]) in herds.iter().enumerate() {
        if *cols > array.cols || *rows > array.rows {
            return Err(format!(
                "error: No valid placement found.\nerror: 'air.herd' op \nUnplaced herd: \
                 herd_{k}\n(a herd of {cols} columns x {rows} rows on an array of {} x {})",
                array.cols, array.rows
            ));
        }
        let last_row = array.row_anchor + rows - 1;
        if last_row >= DEVICE_ROWS {
            return Err(format!(
                "error: 'aie.tile' op row index ({DEVICE_ROWS}) must be less than the number of \
                 rows in the device ({DEVICE_ROWS})\n(a herd of {rows} rows from row {})",
                array.row_anchor
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npu1_takes_4x4_npu2_8x4() {
        let npu1 = array("npu1", None, None, None);
        let npu2 = array("npu2", None, None, None);
        assert_eq!(npu1.cols, 4);
        assert_eq!(npu2.cols, 8);
        assert_eq!(array("npu2_4col", None, None, None).cols, 4);
        assert!(place(&[[4, 4], [4, 1]], &npu1).is_ok());
        assert!(place(&[[8, 4]], &npu2).is_ok());
        let e = place(&[[8, 1]], &npu1).unwrap_err();
        assert!(e.starts_with("error: No valid placement found."), "{e}");
        assert!(e.contains("Unplaced herd: herd_0"), "{e}");
        assert!(
            place(&[[1, 7]], &npu2)
                .unwrap_err()
                .contains("No valid placement")
        );
        let e = place(&[[4, 5]], &npu1).unwrap_err();
        assert!(
            e.starts_with(
                "error: 'aie.tile' op row index (6) must be less than the number of rows in \
                 the device (6)"
            ),
            "{e}"
        );
        // -num-cols narrows the array.
        assert!(place(&[[4, 1]], &array("npu2", Some(2), None, None)).is_err());
    }
}
