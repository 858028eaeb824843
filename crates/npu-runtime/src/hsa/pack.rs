//! HSA's preparation of a build: packing `kernel.hsaco` (upstream's `_pack_hsaco`), and
//! reading it back with the external variables its code needs.

use npu_hsaco::Arch;
use npu_target::{NpuVersion, OutputFormat};

use crate::backend::files::{ELF, INSTS, XCLBIN};
use crate::backend::{Build, BuildFiles, PrepareError};
use crate::{Artifact, RuntimeError};

/// The packed file HSA loads, beside aircc's outputs.
pub const HSACO: &str = "kernel.hsaco";

/// The hsaco section name of a target.
pub fn arch(target: NpuVersion) -> Arch {
    match target {
        NpuVersion::Npu1 => Arch::Aie2,
        NpuVersion::Npu2 => Arch::Aie2p,
    }
}

/// Packs the build into an hsaco, in memory: a full ELF becomes one FullElf kernel named
/// `build.kernel` (`main:<instance>`), an xclbin + instructions one PdiInsts kernel named
/// after the Triton kernel, with ROCr's kernarg layout of 16 bytes per buffer (an address and
/// a size each).
pub fn pack(build: &Build) -> Result<Vec<u8>, String> {
    let read = |name: &str| {
        let path = build.file(name);
        std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    match build.format {
        OutputFormat::Elf => {
            let bytes = read(ELF)?;
            let kernels = npu_hsaco::kernels_from_full_elf(&bytes, Some(&[build.kernel.as_str()]))
                .map_err(|e| e.to_string())?;
            let entries = kernels
                .iter()
                .map(|k| k.to_kernel(None, None))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            npu_hsaco::pack::pack(None, arch(build.target), &entries).map_err(|e| e.to_string())
        }
        OutputFormat::Xclbin => {
            let xclbin = read(XCLBIN)?;
            let insts = read(INSTS)?;
            let part = npu_hsaco::xclbin::partition(&xclbin).map_err(|e| e.to_string())?;
            let kernarg = u32::try_from(16 * build.buffers)
                .map_err(|_| format!("{} buffers do not fit a kernarg size", build.buffers))?;
            let entry = npu_hsaco::Kernel::pdi_insts(
                &build.kernel,
                &insts[..],
                part.pdi,
                kernarg,
                part.num_cols,
            );
            npu_hsaco::pack::pack(None, arch(build.target), &[entry]).map_err(|e| e.to_string())
        }
        OutputFormat::Pdi => {
            Err("the pdi format cannot be packed into an hsaco; use elf or xclbin".to_owned())
        }
    }
}

/// Writes `kernel.hsaco` into the build's directory.
pub(crate) fn prepare(build: &Build) -> Result<(), PrepareError> {
    let fail = |reason: String| PrepareError {
        runtime: npu_target::RuntimeKind::HSA.label(),
        kernel: build.kernel.clone(),
        reason: format!("cannot pack {HSACO}: {reason}"),
    };
    let bytes = pack(build).map_err(fail)?;
    let path = build.file(HSACO);
    std::fs::write(&path, bytes).map_err(|e| fail(format!("cannot write {}: {e}", path.display())))
}

/// The external variables (name, size in bytes) the control code relocates against.
fn external_variables(kernels: &[npu_hsaco::FullElfKernel<'_>]) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for v in kernels.iter().flat_map(|k| k.external_variables()) {
        if !out.iter().any(|(name, _)| *name == v.name) {
            out.push((v.name.clone(), u64::from(v.size)));
        }
    }
    out
}

/// The packed hsaco of the build of `kernel` in `files`, with the variables its code needs.
pub(crate) fn artifact(
    files: &BuildFiles,
    format: OutputFormat,
    kernel: &str,
) -> Result<Artifact, RuntimeError> {
    let refuse = |reason: String| RuntimeError::Load {
        kernel: kernel.to_owned(),
        reason,
    };
    let read = |name: &str| {
        files
            .read(name)
            .map_err(|e| RuntimeError::reading(kernel, &files.path(name), &e))
    };
    let bytes = read(HSACO)?;
    // The variables are read from the packed file's full ELF, so they always match what ROCr
    // will ask for.
    let variables = match format {
        OutputFormat::Elf => {
            let elf = read(ELF)?;
            let kernels = npu_hsaco::kernels_from_full_elf(&elf, Some(&[kernel]))
                .map_err(|e| refuse(e.to_string()))?;
            external_variables(&kernels)
        }
        _ => Vec::new(),
    };
    Ok(Artifact::Hsaco {
        bytes,
        kernel_name: kernel.to_owned(),
        variables,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the child process: the build folder it loads from.
    const CHILD_DIR: &str = "NPU_RUNTIME_TEST_EMFILE_DIR";

    #[test]
    fn running_out_of_file_descriptors_at_load_is_reported_as_such() {
        if let Some(dir) = std::env::var_os(CHILD_DIR) {
            // The child: a build on disk, and no descriptor left to read it with.
            npu_process::set_open_file_limit(0, 4096).unwrap();
            let files = BuildFiles::on_disk(std::path::PathBuf::from(dir));
            match artifact(&files, OutputFormat::Xclbin, "add_kernel") {
                Ok(_) => println!("\nLOADED"),
                Err(e) => println!("\nERROR {}: {}", e.kind(), e.to_string().replace('\n', " ")),
            }
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(HSACO), b"not read").unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "hsa::pack::tests::running_out_of_file_descriptors_at_load_is_reported_as_such",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, tmp.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("ERROR "))
            .unwrap_or_else(|| panic!("no error in:\n{text}"));
        // Before: "cannot load kernel …: cannot read …: Too many open files" as a load refusal,
        // which the Python binding raised as a launch failure.
        assert!(line.starts_with("ERROR resources_exhausted: "), "{line}");
        for want in [
            "Too many open files",
            "EMFILE",
            "RLIMIT_NOFILE",
            "ulimit -n 4096",
        ] {
            assert!(line.contains(want), "{want:?} missing in {line}");
        }
        // Any other read failure stays a refusal of the build.
        let missing = BuildFiles::on_disk(tmp.path().join("gone"));
        let e = artifact(&missing, OutputFormat::Xclbin, "add_kernel").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::LoadRefused, "{e}");
    }
}
