//! Kernel launches: the geometry, and `cuLaunchKernel` with an argument list whose types come
//! from the kernel's one declaration in `kernels-gpu` (see [`kernels_gpu::Signature`]).
use std::ffi::c_void;

use cudarc::driver::sys as cu;

use crate::runtime::driver;
use crate::runtime::error::{cuda_error, Result};
pub use crate::runtime::op::LaunchConfig;
use crate::runtime::op::{Op, OpKind};
use crate::runtime::stream::Stream;

/// The most parameters a kernel declared in `kernels-gpu` takes.
pub const MAX_ARGS: usize = 6;

/// A tuple of kernel arguments, turned into the array of pointers `cuLaunchKernel` reads.
pub trait KernelArgs {
    /// Up to [`MAX_ARGS`] pointers, written into `out`; returns how many. A fixed array, not
    /// a `Vec`: a launch allocates nothing on the host.
    fn pointers(&mut self, out: &mut [*mut c_void; MAX_ARGS]) -> usize;
}

macro_rules! tuple_args {
    ($($field:tt $t:ident),*) => {
        impl<$($t),*> KernelArgs for ($($t,)*) {
            #[allow(clippy::unused_unit)]
            #[allow(unused_variables)]
            fn pointers(&mut self, out: &mut [*mut c_void; MAX_ARGS]) -> usize {
                let all = [$(&mut self.$field as *mut $t as *mut c_void),*];
                out[..all.len()].copy_from_slice(&all);
                all.len()
            }
        }
    };
}
tuple_args!();
tuple_args!(0 A);
tuple_args!(0 A, 1 B);
tuple_args!(0 A, 1 B, 2 C);
tuple_args!(0 A, 1 B, 2 C, 3 D);
tuple_args!(0 A, 1 B, 2 C, 3 D, 4 E);
tuple_args!(0 A, 1 B, 2 C, 3 D, 4 E, 5 F);

/// `cuLaunchKernel`: what CUDA C++'s `kernel<<<grid, block, shared, stream>>>(args...)`
/// compiles to, through the stream's observer.
///
/// # Safety
/// `args` must be the parameters of `function` in number, order and type (the generated
/// launchers take them as the kernel's declared tuple), and every device pointer among them
/// must be valid for what the kernel accesses.
pub(crate) unsafe fn launch<P: KernelArgs>(
    function: cu::CUfunction,
    name: &str,
    config: LaunchConfig,
    stream: &Stream,
    mut args: P,
) -> Result<()> {
    let mut pointers = [std::ptr::null_mut(); MAX_ARGS];
    args.pointers(&mut pointers);
    let op = Op { kind: OpKind::Kernel, label: name, bytes: 0, launch: Some(config) };
    stream.enqueue(op, || {
        // SAFETY: forwarded from this function's contract; `stream` is live.
        let launched = unsafe {
            driver::launch_kernel(
                function,
                config.grid,
                config.block,
                config.shared_bytes,
                stream.as_raw(),
                pointers.as_mut_ptr(),
            )
        };
        // The error text is built only when there is an error.
        launched.map_err(|status| {
            cuda_error(status, format!("cuLaunchKernel({name})"), Some(stream.name()))
        })
    })
}
