//! streamlab's kernels, written in Rust.
//!
//! Built two ways from the same source:
//! - for `nvptx64-nvidia-cuda` (by `host/build.rs`): the `extern "ptx-kernel"` entry points in
//!   [`kernels`], linked against NVIDIA's libdevice so `sinf`/`cosf` are the very functions nvcc
//!   calls, and emitted as one PTX module that the host embeds;
//! - for the host (as an ordinary dependency of `streamlab`): [`math`], the per-element
//!   arithmetic, which is what the CPU reference runs, and [`kernels::signatures`], each
//!   kernel's name and parameter list, from which the host generates its launchers. One
//!   declaration per kernel, one copy of the math, two targets.
//!
//! Device-side helper names follow Rust-CUDA's `cuda_std` (`thread::index_1d()`,
//! `thread::thread_idx_x()`, …) so code reads the same as its examples.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, link_llvm_intrinsics, asm_experimental_arch)
)]

pub mod math;

#[cfg(target_arch = "nvptx64")]
pub mod thread;

pub mod kernels;

/// A kernel's declaration as the host sees it: its PTX entry name and its parameters, in
/// order. [`kernels!`] implements it for every kernel, from the same tokens that define the
/// kernel on the GPU, so the host's launchers cannot drift from the kernels' signatures.
pub trait Signature {
    /// The `.entry` name in the PTX (the function's unmangled name).
    const NAME: &'static str;
    /// The parameter types as a tuple: what a launch must pass, in order.
    type Params;
    /// Each parameter's name and Rust type, as written in the declaration.
    const PARAMS: &'static [(&'static str, &'static str)];
    /// Each parameter's size in bytes: what the PTX's `.param` list must agree with.
    const PARAM_SIZES: &'static [usize];
}

/// Declares kernels once. On nvptx64 each `pub fn` becomes a `#[no_mangle] extern
/// "ptx-kernel"` entry point; on every target it also becomes a marker type in a
/// `signatures` module implementing [`Signature`], and `signatures::ALL` lists them all.
/// Parameters must be scalars or raw pointers: that is the ABI the driver sees.
#[macro_export]
macro_rules! kernels {
    ($( $(#[doc = $doc:literal])* pub fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) $body:block )*) => {
        $(
            $(#[doc = $doc])*
            #[cfg(target_arch = "nvptx64")]
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name($($arg: $ty),*) $body
        )*

        /// Every kernel's name and parameters, generated from the declarations above.
        pub mod signatures {
            $(
                $(#[doc = $doc])*
                #[allow(non_camel_case_types)]
                pub struct $name;

                impl $crate::Signature for $name {
                    const NAME: &'static str = stringify!($name);
                    type Params = ($($ty,)*);
                    const PARAMS: &'static [(&'static str, &'static str)] =
                        &[$((stringify!($arg), stringify!($ty))),*];
                    const PARAM_SIZES: &'static [usize] = &[$(core::mem::size_of::<$ty>()),*];
                }
            )*

            /// (name, parameter sizes) of every kernel, in declaration order.
            pub const ALL: &[(&str, &[usize])] = &[
                $((stringify!($name), <$name as $crate::Signature>::PARAM_SIZES)),*
            ];
        }
    };
}

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees CUDA_ERROR_LAUNCH_FAILED.
    unsafe { core::arch::nvptx::trap() }
}
