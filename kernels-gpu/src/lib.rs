//! streamlab's kernels, written in Rust.
//!
//! Built two ways from the same source:
//! - for `nvptx64-nvidia-cuda` (by `host/build.rs`): the `extern "ptx-kernel"` entry points in
//!   [`kernels`], linked against NVIDIA's libdevice so `sinf`/`cosf` are the very functions nvcc
//!   calls, and emitted as one PTX module that the host embeds;
//! - for the host (as an ordinary dependency of `streamlab`): only [`math`], the per-element
//!   arithmetic, which is what the CPU reference runs. One copy of the math, two targets.
//!
//! Device-side helper names follow Rust-CUDA's `cuda_std` (`thread::index_1d()`,
//! `thread::thread_idx_x()`, …) so code reads the same as its examples.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, link_llvm_intrinsics)
)]

pub mod math;

#[cfg(target_arch = "nvptx64")]
pub mod thread;

#[cfg(target_arch = "nvptx64")]
pub mod kernels;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees CUDA_ERROR_LAUNCH_FAILED.
    unsafe { core::arch::nvptx::trap() }
}
