//! mlir-air's `air-split-launch-for-padding`, which aircc runs on every launch that carries
//! `air.actual_sizes` (set by `air-wrap-func-with-parallel{actual-sizes=M,N,K}`; Xilinx/mlir-air
//! `mlir/lib/Transform/AIRSplitLaunchForPadding.cpp`, run from aircc after placement with
//! `pad-location=memtile`). The launch grid tiles a matmul's output C (M×N) by launch tiles:
//! program (x, y) owns rows `x·BM …` and columns `y·BN …`, BM×BN being the tile `tl.dot`
//! computes. On the tiles that cross M or N the pass rewrites the L3↔L2 DMAs to move only the
//! actual rows and columns: the L2 buffers still hold whole tiles, the rows of A beyond M and
//! the columns of B beyond N are never read (the tile computes zeros there), and the rows and
//! columns of C beyond M or N are never written.
//!
//! The harness applies that to the loads that feed a `dot` (through casts: the operands'
//! L3→L2 transfers) and to the stores of its result (through elementwise ops: the output's
//! L2→L3 transfer); everything else in the launch runs as written.

use std::collections::HashMap;

use crate::check::Types;
use crate::ops::{Op, V};

/// Which part of a 2-D block a load or store moves on a launch with actual sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cut {
    /// Rows beyond M are not moved: the launch tile's height (BM), when rows are cut.
    pub rows: Option<u32>,
    /// Columns beyond N are not moved: the launch tile's width (BN), when columns are cut.
    pub cols: Option<u32>,
}

/// The cuts of one launch: by the index of the load or store op in the launch.
#[derive(Debug, Default)]
pub struct Padding {
    pub m: u32,
    pub n: u32,
    cuts: HashMap<usize, Cut>,
}

impl Padding {
    /// The padding of a launch's `ops` (with their value `types`), `None` when the launch has
    /// no actual sizes.
    pub fn of(ops: &[Op], types: &Types) -> Option<Padding> {
        let [m, n, _] = ops.iter().find_map(|op| match op {
            Op::Actual(s) => Some(*s),
            _ => None,
        })?;
        // Each value's defining op, by op index.
        let defs: Vec<usize> = (0..ops.len()).filter(|i| ops[*i].has_result()).collect();
        let def = |v: V| defs.get(v as usize).map(|i| (*i, &ops[*i]));
        let shape = |v: V| {
            types
                .get(v as usize)
                .map(|t| t.shape.clone())
                .unwrap_or_default()
        };
        // The load an operand comes from, through casts.
        let source_load = |mut v: V| loop {
            match def(v)? {
                (_, Op::Cast { a, .. }) => v = *a,
                (i, Op::Load { .. }) if shape(v).len() == 2 => return Some(i),
                _ => return None,
            }
        };
        let mut padding = Padding {
            m,
            n,
            cuts: HashMap::new(),
        };
        for (v, &i) in defs.iter().enumerate() {
            let Op::Dot { a, b, .. } = &ops[i] else {
                continue;
            };
            let [bm, bn] = shape(v as V)[..] else {
                continue;
            };
            if let Some(load) = source_load(*a) {
                padding.cuts.entry(load).or_default().rows = Some(bm);
            }
            if let Some(load) = source_load(*b) {
                padding.cuts.entry(load).or_default().cols = Some(bn);
            }
            // The values computed elementwise from the result, then the stores of any of them.
            let mut derived = vec![v as V];
            for (w, &j) in defs.iter().enumerate().skip(v + 1) {
                let elementwise = matches!(
                    ops[j],
                    Op::Cast { .. } | Op::Bin { .. } | Op::Un { .. } | Op::Fma { .. }
                );
                if elementwise
                    && shape(w as V) == [bm, bn]
                    && ops[j].operands().iter().any(|o| derived.contains(o))
                {
                    derived.push(w as V);
                }
            }
            for (j, op) in ops.iter().enumerate() {
                if let Op::Store { value, .. } = op
                    && derived.contains(value)
                {
                    padding.cuts.insert(
                        j,
                        Cut {
                            rows: Some(bm),
                            cols: Some(bn),
                        },
                    );
                }
            }
        }
        Some(padding)
    }

    /// Whether element `i` of the 2-D block `shape` that op `op` moves lies beyond the actual
    /// sizes for program `pid` (so the DMA does not move it).
    pub fn cut(&self, op: usize, pid: [u32; 3], shape: &[u32], i: usize) -> bool {
        let Some(cut) = self.cuts.get(&op) else {
            return false;
        };
        let [_, width] = shape[..] else {
            return false;
        };
        let (row, col) = ((i / width as usize) as u64, (i % width as usize) as u64);
        let beyond = |tile: Option<u32>, axis: usize, at: u64, size: u32| {
            tile.is_some_and(|t| u64::from(pid[axis]) * u64::from(t) + at >= u64::from(size))
        };
        beyond(cut.rows, 0, row, self.m) || beyond(cut.cols, 1, col, self.n)
    }
}
