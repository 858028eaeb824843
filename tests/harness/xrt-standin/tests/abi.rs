//! The stand-in at the C ABI itself: the call-order and buffer rules it enforces (which the
//! runtime's owned wrappers never break, so they are driven here through the raw bindings),
//! status codes, truncation, and state names.

mod common;

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr;

use common::*;
use npu_runtime::Artifact;
use xrt_sys::bindings::{self as b, TritonNpuXrt};

struct Abi {
    api: TritonNpuXrt,
}

/// The status and message of one call.
struct Reply {
    status: c_int,
    message: String,
}

impl Reply {
    fn ok(&self) {
        assert_eq!(self.status, 0, "{}", self.message);
    }

    fn fails(&self, status: u32, needle: &str) {
        assert_eq!(self.status, status as c_int, "{}", self.message);
        assert!(
            self.message.contains(needle),
            "{:?} lacks {needle:?}",
            self.message
        );
    }
}

fn call(f: impl FnOnce(*mut c_char, usize) -> c_int) -> Reply {
    let mut err = [0 as c_char; 512];
    let status = f(err.as_mut_ptr(), err.len());
    // SAFETY: the callee NUL-terminates within the buffer.
    let message = unsafe { CStr::from_ptr(err.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Reply { status, message }
}

fn abi() -> Abi {
    // SAFETY: the stand-in implements the header's functions with bindgen's types.
    Abi {
        api: unsafe { TritonNpuXrt::new(standin()) }.expect("the stand-in exports the whole ABI"),
    }
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// An npu1 setup: device, registered xclbin, context, MLIR_AIE kernel.
struct Npu1 {
    device: *mut b::triton_npu_xrt_device,
    xclbin: *mut b::triton_npu_xrt_xclbin,
    context: *mut b::triton_npu_xrt_context,
    kernel: *mut b::triton_npu_xrt_kernel,
}

unsafe fn npu1(a: &Abi, artifact: &Artifact) -> Npu1 {
    let Artifact::XclbinInsts { xclbin: path, .. } = artifact else {
        unreachable!()
    };
    let path = c(path.to_str().unwrap());
    let mut s = Npu1 {
        device: ptr::null_mut(),
        xclbin: ptr::null_mut(),
        context: ptr::null_mut(),
        kernel: ptr::null_mut(),
    };
    unsafe {
        call(|e, l| a.api.triton_npu_xrt_device_open(0, &mut s.device, e, l)).ok();
        call(|e, l| {
            a.api
                .triton_npu_xrt_xclbin_register(s.device, path.as_ptr(), &mut s.xclbin, e, l)
        })
        .ok();
        call(|e, l| {
            a.api
                .triton_npu_xrt_context_from_xclbin(s.device, s.xclbin, &mut s.context, e, l)
        })
        .ok();
        call(|e, l| {
            a.api
                .triton_npu_xrt_kernel_open(s.context, c"MLIR_AIE".as_ptr(), &mut s.kernel, e, l)
        })
        .ok();
    }
    s
}

#[test]
fn release_order_and_handles_are_enforced() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let a = abi();
    // SAFETY: raw calls with valid out pointers and buffers throughout.
    unsafe {
        let s = npu1(&a, &npu1_artifact(dir.path(), &add(1)));
        let api = &a.api;
        call(|e, l| api.triton_npu_xrt_context_free(s.context, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "kernels opened in it");
        call(|e, l| api.triton_npu_xrt_xclbin_free(s.xclbin, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "context");
        call(|e, l| api.triton_npu_xrt_device_close(s.device, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "still open");
        // A handle of another type is not a kernel.
        let mut group = 0;
        call(|e, l| api.triton_npu_xrt_kernel_group_id(s.context.cast(), 1, &mut group, e, l))
            .fails(b::TRITON_NPU_XRT_E_INVALID, "not open");
        call(|e, l| api.triton_npu_xrt_kernel_group_id(s.kernel, 1, ptr::null_mut(), e, l))
            .fails(b::TRITON_NPU_XRT_E_INVALID, "NULL");
        // An ext kernel needs an ELF context.
        let mut k = ptr::null_mut();
        call(|e, l| {
            api.triton_npu_xrt_ext_kernel_open(s.context, c"main:sequence".as_ptr(), &mut k, e, l)
        })
        .fails(b::TRITON_NPU_XRT_E_XRT, "ELF");
        // Children first, and everything releases.
        call(|e, l| api.triton_npu_xrt_kernel_free(s.kernel, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_context_free(s.context, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_xclbin_free(s.xclbin, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_device_close(s.device, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_device_close(s.device, e, l))
            .fails(b::TRITON_NPU_XRT_E_INVALID, "not open");
    }
}

#[test]
fn runs_follow_the_npu1_rules() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let artifact = npu1_artifact(dir.path(), &add(1));
    let Artifact::XclbinInsts { insts, .. } = &artifact else {
        unreachable!()
    };
    let code = std::fs::read(insts).unwrap();
    let a = abi();
    // SAFETY: raw calls with valid out pointers and buffers throughout.
    unsafe {
        let s = npu1(&a, &artifact);
        let api = &a.api;
        let group = |arg| {
            let mut g = -1;
            call(|e, l| api.triton_npu_xrt_kernel_group_id(s.kernel, arg, &mut g, e, l)).ok();
            g
        };
        assert_eq!(
            (group(1), group(3)),
            (1, 0),
            "aiecc's banks: instructions in 1, data in 0"
        );
        let mut g = 0;
        call(|e, l| api.triton_npu_xrt_kernel_group_id(s.kernel, 0, &mut g, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "scalar");
        let bo = |size, flags, group| {
            let mut h = ptr::null_mut();
            call(|e, l| api.triton_npu_xrt_bo_alloc(s.device, size, flags, group, &mut h, e, l))
                .ok();
            let mut map: *mut c_void = ptr::null_mut();
            call(|e, l| api.triton_npu_xrt_bo_map(h, &mut map, e, l)).ok();
            (h, map.cast::<u8>())
        };
        let (instr, instr_map) = bo(code.len(), b::TRITON_NPU_XRT_BO_CACHEABLE, 1);
        ptr::copy_nonoverlapping(code.as_ptr(), instr_map, code.len());
        let data: Vec<_> = (0..3)
            .map(|_| bo(4, b::TRITON_NPU_XRT_BO_HOST_ONLY, 0))
            .collect();
        ptr::copy_nonoverlapping(2.5f32.to_le_bytes().as_ptr(), data[0].1, 4);
        ptr::copy_nonoverlapping(4.0f32.to_le_bytes().as_ptr(), data[1].1, 4);
        let wrong_group = bo(4, b::TRITON_NPU_XRT_BO_HOST_ONLY, 1);

        let mut run = ptr::null_mut();
        call(|e, l| api.triton_npu_xrt_run_create(s.kernel, &mut run, e, l)).ok();
        let mut state = 0;
        call(|e, l| api.triton_npu_xrt_run_wait(run, 10, &mut state, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "never started");
        call(|e, l| api.triton_npu_xrt_run_set_arg_bo(run, 3, wrong_group.0, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "group");
        call(|e, l| {
            api.triton_npu_xrt_run_set_arg_scalar(run, 0, [3u8, 0, 0, 0].as_ptr().cast(), 4, e, l)
        })
        .fails(b::TRITON_NPU_XRT_E_XRT, "declared with 8 bytes");
        call(|e, l| {
            api.triton_npu_xrt_run_set_arg_scalar(
                run,
                0,
                3u64.to_le_bytes().as_ptr().cast(),
                8,
                e,
                l,
            )
        })
        .ok();
        call(|e, l| api.triton_npu_xrt_run_set_arg_bo(run, 1, instr, e, l)).ok();
        let words = (code.len() / 4) as u32;
        call(|e, l| {
            api.triton_npu_xrt_run_set_arg_scalar(
                run,
                2,
                words.to_le_bytes().as_ptr().cast(),
                4,
                e,
                l,
            )
        })
        .ok();
        call(|e, l| api.triton_npu_xrt_bo_sync(instr, 0, code.len(), 0, e, l)).ok();
        // Buffers must be contiguous from argument 3 (trailing declared slots may stay unset).
        call(|e, l| api.triton_npu_xrt_run_set_arg_bo(run, 4, data[1].0, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_run_start(run, e, l)).fails(
            b::TRITON_NPU_XRT_E_XRT,
            "argument 3 of kernel MLIR_AIE was never set",
        );
        for (i, (h, _)) in data.iter().enumerate() {
            call(|e, l| api.triton_npu_xrt_run_set_arg_bo(run, 3 + i as i32, *h, e, l)).ok();
        }
        // Host data not yet synced to the device is refused.
        call(|e, l| api.triton_npu_xrt_run_start(run, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "sync it to the device");
        for (h, _) in &data {
            call(|e, l| api.triton_npu_xrt_bo_sync(*h, 0, 4, 0, e, l)).ok();
        }
        call(|e, l| api.triton_npu_xrt_bo_sync(data[0].0, 0, 8, 0, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "exceeds");
        call(|e, l| api.triton_npu_xrt_run_start(run, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_run_start(run, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "twice");
        call(|e, l| api.triton_npu_xrt_run_wait(run, 0, &mut state, e, l)).ok();
        assert_eq!(state, b::TRITON_NPU_XRT_STATE_COMPLETED as i32);
        // The result is in device memory until it is synced back.
        let read = |map: *mut u8| {
            let mut v = [0u8; 4];
            ptr::copy_nonoverlapping(map, v.as_mut_ptr(), 4);
            f32::from_le_bytes(v)
        };
        assert_eq!(read(data[2].1), 0.0);
        call(|e, l| api.triton_npu_xrt_bo_sync(data[2].0, 1, 4, 0, e, l)).ok();
        assert_eq!(read(data[2].1), 6.5);

        // A run a wait saw finish starts again with the arguments it has, changed or not.
        let created = stats().runs_created;
        ptr::copy_nonoverlapping(1.0f32.to_le_bytes().as_ptr(), data[0].1, 4);
        call(|e, l| api.triton_npu_xrt_bo_sync(data[0].0, 0, 4, 0, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_run_set_arg_bo(run, 4, data[0].0, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_run_start(run, e, l)).ok();
        // Until a wait (or a state query) reports the end, the run may still be going.
        call(|e, l| api.triton_npu_xrt_run_set_arg_bo(run, 4, data[1].0, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "not seen to finish");
        call(|e, l| api.triton_npu_xrt_run_wait(run, 0, &mut state, e, l)).ok();
        assert_eq!(state, b::TRITON_NPU_XRT_STATE_COMPLETED as i32);
        call(|e, l| api.triton_npu_xrt_bo_sync(data[2].0, 1, 4, 0, e, l)).ok();
        assert_eq!(
            read(data[2].1),
            2.0,
            "1.0 + 1.0: arguments 3 and 4 are one buffer now"
        );
        assert_eq!(stats().runs_created, created, "no new run object");

        call(|e, l| api.triton_npu_xrt_kernel_free(s.kernel, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "runs");
        call(|e, l| api.triton_npu_xrt_run_free(run, e, l)).ok();
        for (h, _) in data.iter().chain([&wrong_group, &(instr, instr_map)]) {
            call(|e, l| api.triton_npu_xrt_bo_free(*h, e, l)).ok();
        }
        call(|e, l| api.triton_npu_xrt_kernel_free(s.kernel, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_context_free(s.context, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_xclbin_free(s.xclbin, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_device_close(s.device, e, l)).ok();
    }
}

#[test]
fn ext_kernels_take_ext_buffers() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let Artifact::Elf { elf, .. } = npu2_artifact(dir.path(), &add(1)) else {
        unreachable!()
    };
    let a = abi();
    let api = &a.api;
    // SAFETY: raw calls with valid out pointers and buffers throughout.
    unsafe {
        let (mut dev, mut e_h, mut ctx, mut k) = (
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
        );
        let path = c(elf.to_str().unwrap());
        call(|e, l| api.triton_npu_xrt_device_open(0, &mut dev, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_elf_open(path.as_ptr(), &mut e_h, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_context_from_elf(dev, e_h, &mut ctx, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_kernel_open(ctx, c"main:sequence".as_ptr(), &mut k, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "xrt::ext::kernel");
        call(|e, l| {
            api.triton_npu_xrt_ext_kernel_open(ctx, c"main:sequence".as_ptr(), &mut k, e, l)
        })
        .ok();
        let mut group = 0;
        call(|e, l| api.triton_npu_xrt_kernel_group_id(k, 3, &mut group, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "ext::bo");
        let mut host_only = ptr::null_mut();
        call(|e, l| {
            api.triton_npu_xrt_bo_alloc(
                dev,
                4,
                b::TRITON_NPU_XRT_BO_HOST_ONLY,
                0,
                &mut host_only,
                e,
                l,
            )
        })
        .ok();
        let mut run = ptr::null_mut();
        call(|e, l| api.triton_npu_xrt_run_create(k, &mut run, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_run_set_arg_bo(run, 0, host_only, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "xrt::ext::bo");
        call(|e, l| {
            api.triton_npu_xrt_run_set_arg_scalar(run, 0, [0u8; 4].as_ptr().cast(), 4, e, l)
        })
        .fails(b::TRITON_NPU_XRT_E_XRT, "buffer arguments only");
        let mut zero = ptr::null_mut();
        call(|e, l| api.triton_npu_xrt_ext_bo_alloc(dev, 0, &mut zero, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "size 0");
        call(|e, l| api.triton_npu_xrt_run_free(run, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_bo_free(host_only, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_kernel_free(k, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_elf_free(e_h, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "context");
        call(|e, l| api.triton_npu_xrt_context_free(ctx, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_elf_free(e_h, e, l)).ok();
        call(|e, l| api.triton_npu_xrt_device_close(dev, e, l)).ok();
    }
}

#[test]
fn strings_states_and_versions() {
    let _g = serial();
    let a = abi();
    let api = &a.api;
    // SAFETY: raw calls with valid buffers.
    unsafe {
        assert_eq!(
            api.triton_npu_xrt_abi_version(),
            b::TRITON_NPU_XRT_ABI_VERSION
        );
        for state in -1..13 {
            let name = CStr::from_ptr(api.triton_npu_xrt_state_name(state))
                .to_str()
                .unwrap();
            assert_eq!(name, xrt_sys::CommandState(state).name(), "state {state}");
        }
        let mut small = [0 as c_char; 4];
        call(|e, l| api.triton_npu_xrt_version(small.as_mut_ptr(), small.len(), e, l))
            .fails(b::TRITON_NPU_XRT_E_TRUNCATED, "too small");
        assert_eq!(CStr::from_ptr(small.as_ptr()).to_str().unwrap(), "2.2");
        let mut dev = ptr::null_mut();
        call(|e, l| api.triton_npu_xrt_device_open(1, &mut dev, e, l))
            .fails(b::TRITON_NPU_XRT_E_XRT, "index '1'");
        call(|e, l| api.triton_npu_xrt_device_open(0, ptr::null_mut(), e, l))
            .fails(b::TRITON_NPU_XRT_E_INVALID, "NULL");
        // A NULL error buffer is allowed.
        assert_eq!(
            api.triton_npu_xrt_device_open(1, &mut dev, ptr::null_mut(), 0),
            b::TRITON_NPU_XRT_E_XRT as c_int
        );
    }
}
