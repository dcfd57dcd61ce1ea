//! Modules, their functions, and kernel launches.
use std::ffi::{c_void, CStr};

use cudarc::driver::sys as cu;

use super::{result, DriverResult};

/// `cuModuleLoadData`, in the current context: the driver JIT-compiles PTX here.
pub(crate) fn module_load_data(image: &CStr) -> DriverResult<cu::CUmodule> {
    let mut module = std::ptr::null_mut();
    // SAFETY: valid out-pointer; `image` is NUL-terminated text, as PTX must be.
    result(unsafe { cu::cuModuleLoadData(&mut module, image.as_ptr().cast()) })?;
    Ok(module)
}

/// `cuModuleLoad`, in the current context: a cubin, fatbin or PTX file.
pub(crate) fn module_load(path: &CStr) -> DriverResult<cu::CUmodule> {
    let mut module = std::ptr::null_mut();
    // SAFETY: valid out-pointer and NUL-terminated path.
    result(unsafe { cu::cuModuleLoad(&mut module, path.as_ptr()) })?;
    Ok(module)
}

/// `cuModuleUnload`: work using its functions completes first.
///
/// # Safety
/// The caller owns `module`, a live module, and uses it and its functions no more.
pub(crate) unsafe fn module_unload(module: cu::CUmodule) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuModuleUnload(module) })
}

/// `cuModuleGetFunction`.
///
/// # Safety
/// `module` is live.
pub(crate) unsafe fn module_get_function(
    module: cu::CUmodule,
    name: &CStr,
) -> DriverResult<cu::CUfunction> {
    let mut function = std::ptr::null_mut();
    // SAFETY: valid out-pointer, NUL-terminated name; the module is the caller's contract.
    result(unsafe { cu::cuModuleGetFunction(&mut function, module, name.as_ptr()) })?;
    Ok(function)
}

/// `cuFuncGetParamInfo`: the size of parameter `index` (an error past the last one).
///
/// # Safety
/// `function` is a function of a live module.
pub(crate) unsafe fn func_get_param_info(
    function: cu::CUfunction,
    index: usize,
) -> DriverResult<usize> {
    let (mut offset, mut size) = (0usize, 0usize);
    // SAFETY: valid out-pointers; the function is the caller's contract.
    result(unsafe { cu::cuFuncGetParamInfo(function, index, &mut offset, &mut size) })?;
    Ok(size)
}

/// `cuLaunchKernel`, with no `extra`.
///
/// # Safety
/// `function` is a function of a live module and `stream` is live; `params` points to one
/// pointer per parameter of `function`, each to a value of that parameter's type, and every
/// device address among them is valid for what the kernel accesses.
pub(crate) unsafe fn launch_kernel(
    function: cu::CUfunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    stream: cu::CUstream,
    params: *mut *mut c_void,
) -> DriverResult<()> {
    let ((gx, gy, gz), (bx, by, bz)) = (grid, block);
    let extra = std::ptr::null_mut();
    // SAFETY: the caller's contract.
    result(unsafe {
        cu::cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra)
    })
}
