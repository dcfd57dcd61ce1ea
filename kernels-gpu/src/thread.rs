//! Thread-index helpers, named as in Rust-CUDA's `cuda_std::thread`.
use core::arch::nvptx;

#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reads the %tid.x special register; always valid inside a kernel.
    unsafe { nvptx::_thread_idx_x() as u32 }
}
#[inline(always)]
pub fn thread_idx_y() -> u32 {
    // SAFETY: reads %tid.y; always valid inside a kernel.
    unsafe { nvptx::_thread_idx_y() as u32 }
}
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: reads %ctaid.x; always valid inside a kernel.
    unsafe { nvptx::_block_idx_x() as u32 }
}
#[inline(always)]
pub fn block_idx_y() -> u32 {
    // SAFETY: reads %ctaid.y; always valid inside a kernel.
    unsafe { nvptx::_block_idx_y() as u32 }
}
#[inline(always)]
pub fn block_dim_x() -> u32 {
    // SAFETY: reads %ntid.x; always valid inside a kernel.
    unsafe { nvptx::_block_dim_x() as u32 }
}
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: reads %nctaid.x; always valid inside a kernel.
    unsafe { nvptx::_grid_dim_x() as u32 }
}

/// The global 1-D index of this thread: `blockIdx.x * blockDim.x + threadIdx.x`.
#[inline(always)]
pub fn index_1d() -> u32 {
    block_idx_x() * block_dim_x() + thread_idx_x()
}

/// The total number of threads in a 1-D grid: the stride of a grid-stride loop.
#[inline(always)]
pub fn grid_size_1d() -> u32 {
    grid_dim_x() * block_dim_x()
}

extern "C" {
    #[link_name = "llvm.nvvm.read.ptx.sreg.clock64"]
    fn read_clock64() -> i64;
    #[link_name = "llvm.nvvm.read.ptx.sreg.globaltimer"]
    fn read_globaltimer() -> i64;
}

/// This multiprocessor's cycle counter (`clock64()` in CUDA C++).
#[inline(always)]
pub fn clock64() -> u64 {
    // SAFETY: reads %clock64; always valid.
    unsafe { read_clock64() as u64 }
}

/// The GPU-wide nanosecond timer (`%globaltimer`): comparable across multiprocessors.
#[inline(always)]
pub fn globaltimer() -> u64 {
    // SAFETY: reads %globaltimer; always valid.
    unsafe { read_globaltimer() as u64 }
}
