//! Executing a run: the harness program from the instruction buffer (npu1, opcode 3) or the
//! instance's control code (npu2), over the buffers' device memory.

use std::collections::BTreeMap;

use npu_harness_program::Program;
use xrt_sys::bindings as b;

use super::{ArgValue, BoKind, FIRST_BUFFER_ARG, KernelKind, World};

/// The opcode of an instruction-stream ("transaction") command.
const OPCODE_TXN: u64 = 3;

impl World {
    /// Runs the harness program over the run's buffers (device memory only).
    pub(super) fn execute(&mut self, run: usize) -> Result<(), String> {
        let r = &self.runs[&run];
        let k = &self.kernels[&r.kernel];
        let (program, buffers): (Program, Vec<usize>) = match &k.kind {
            KernelKind::Xclbin(_) => {
                let opcode = scalar(&r.args, 0)?;
                if opcode != OPCODE_TXN {
                    return Err(format!(
                        "argument 0 (opcode) is {opcode}; the NPU runs instruction streams with \
                         opcode {OPCODE_TXN}"
                    ));
                }
                let instr = bo_arg(&r.args, 1)?;
                let words = scalar(&r.args, 2)? as usize;
                let buf = &self.bos[&instr];
                if !matches!(buf.kind, BoKind::Flags { flags, .. } if flags & b::TRITON_NPU_XRT_BO_CACHEABLE != 0)
                {
                    return Err(
                        "the instruction buffer (argument 1) is not a cacheable buffer object"
                            .into(),
                    );
                }
                if words == 0 || words * 4 > buf.device_mem.len() {
                    return Err(format!(
                        "argument 2 says {words} instruction words, the instruction buffer holds {} bytes",
                        buf.device_mem.len()
                    ));
                }
                let program = program_from(
                    &buf.device_mem[..words * 4],
                    "the instruction buffer (as synced to the device)",
                )?;
                let rest = r
                    .args
                    .range(FIRST_BUFFER_ARG..)
                    .map(|(i, _)| bo_arg(&r.args, *i))
                    .collect::<Result<_, _>>()?;
                (program, rest)
            }
            KernelKind::Ext { ctrltext } => {
                let program = program_from(ctrltext, "the kernel's control code")?;
                let all = r
                    .args
                    .keys()
                    .map(|i| bo_arg(&r.args, *i))
                    .collect::<Result<_, _>>()?;
                (program, all)
            }
        };
        let mut memories: Vec<Vec<u8>> = buffers
            .iter()
            .map(|bo| self.bos[bo].device_mem.clone())
            .collect();
        {
            let mut views: Vec<&mut [u8]> = memories.iter_mut().map(Vec::as_mut_slice).collect();
            program.execute(&mut views).map_err(|e| e.to_string())?;
        }
        for (bo, memory) in buffers.iter().zip(memories) {
            if let Some(buf) = self.bos.get_mut(bo) {
                buf.device_mem = memory;
            }
        }
        Ok(())
    }
}

/// The `NPUX` code the stand-in toolchain writes for a kernel the harness cannot compute:
/// words `NPUX, 1, num_args, reason length`, then the reason.
const NOT_COMPUTABLE_MAGIC: &[u8; 4] = b"NPUX";

fn program_from(code: &[u8], what: &str) -> Result<Program, String> {
    if code.get(..4) == Some(NOT_COMPUTABLE_MAGIC.as_slice()) {
        let len = code
            .get(12..16)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let reason = code
            .get(16..16 + len)
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        return Err(format!(
            "the kernel is not computable by the conformance harness (no NPU here): {reason}"
        ));
    }
    Program::decode(code).map_err(|e| format!("{what} does not hold a runnable program ({e})"))
}

fn scalar(args: &BTreeMap<i32, ArgValue>, index: i32) -> Result<u64, String> {
    match args.get(&index) {
        Some(ArgValue::Scalar(bytes)) if bytes.len() <= 8 => {
            let mut le = [0u8; 8];
            le[..bytes.len()].copy_from_slice(bytes);
            Ok(u64::from_le_bytes(le))
        }
        _ => Err(format!(
            "argument {index} is not a scalar of at most 8 bytes"
        )),
    }
}

fn bo_arg(args: &BTreeMap<i32, ArgValue>, index: i32) -> Result<usize, String> {
    match args.get(&index) {
        Some(ArgValue::Bo(bo)) => Ok(*bo),
        _ => Err(format!("argument {index} is not a buffer")),
    }
}
