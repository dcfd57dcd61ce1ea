//! The kernels, each declared once in [`kernels!`](crate::kernels!): on the GPU an
//! `extern "ptx-kernel"` entry point, on the host a [`Signature`](crate::Signature) in
//! [`signatures`] from which `streamlab` generates its launcher. Parameters are scalars and
//! raw pointers only: that is the ABI the driver sees, and what `cuLaunchKernel`'s argument
//! array carries. Every element-wise kernel is a grid-stride loop (`for_each_index`), so any
//! grid covers any `n`; the pointers' validity for `n` elements is the host launchers' job.
#[cfg(target_arch = "nvptx64")]
use crate::math;
#[cfg(target_arch = "nvptx64")]
use crate::thread::{clock64, globaltimer, grid_size_1d, index_1d, thread_idx_x};

/// Calls `f(i)` for every `i < n` this thread owns in a grid-stride loop: thread `t` takes
/// `t`, `t + grid size`, `t + 2 * grid size`, ... so any grid covers any `n`. The index is
/// 64-bit: with `n` near `u32::MAX`, a 32-bit `i + grid size` would wrap around to an
/// element another thread already did.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn for_each_index(n: u32, mut f: impl FnMut(usize)) {
    let (n, step) = (n as u64, grid_size_1d() as u64);
    let mut i = index_1d() as u64;
    while i < n {
        f(i as usize);
        i += step;
    }
}

#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn compute_slice(data: *mut f32, n: u32, iters: u32) {
    for_each_index(n, |k| {
        let p = data.add(k);
        *p = math::compute_element(*p, iters);
    });
}

/// The mixed-precision layer on one format: see [`math::layer_gradient`].
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn half_layer_slice<H: math::HalfFormat>(
    weights: *const u16,
    input: *const f32,
    gradient: *mut u16,
    n: u32,
    iters: u32,
) {
    // Two loops, so that in the one that runs the weight is read on every path. With one loop,
    // LLVM sinks the weight's load into the `iters > 0` branch, after the input's conversion,
    // so each element waited for two global loads in turn instead of both at once (nvcc issues
    // them together); the layer step took 1.16x the C++ twin's on an H100 then.
    if iters == 0 {
        for_each_index(n, |k| *gradient.add(k) = math::layer_gradient::<H>(0, *input.add(k), 0));
    } else {
        for_each_index(n, |k| {
            *gradient.add(k) = math::layer_gradient::<H>(*weights.add(k), *input.add(k), iters)
        });
    }
}

crate::kernels! {
    /// Spins until `cycles` clock ticks of this multiprocessor have passed (the tutorials'
    /// SleepKernel). Occupies its block without touching memory.
    pub fn sleep_kernel(cycles: u64) {
        let start = clock64();
        while clock64().wrapping_sub(start) < cycles {}
    }

    /// `sleep_kernel`, plus thread 0 of block 0 writes `%globaltimer` at its start and its end
    /// to `stamps[0]` and `stamps[1]`: when the kernel really ran, as the GPU saw it.
    pub fn sleep_stamped_kernel(cycles: u64, stamps: *mut u64) {
        let first = index_1d() == 0;
        if first {
            *stamps = globaltimer();
        }
        let start = clock64();
        while clock64().wrapping_sub(start) < cycles {}
        if first {
            *stamps.add(1) = globaltimer();
        }
    }

    /// In place: `data[i] = compute_element(data[i], iters)` for `i < n`.
    pub fn compute_kernel(data: *mut f32, n: u32, iters: u32) {
        compute_slice(data, n, iters);
    }

    /// The same work on one slice `data[offset .. offset + len]` (the tutorials' processChunk).
    pub fn chunk_kernel(data: *mut f32, offset: u32, len: u32, iters: u32) {
        compute_slice(data.add(offset as usize), len, iters);
    }

    /// `c[i] = a[i] + b[i]`.
    pub fn vector_add_kernel(a: *const f32, b: *const f32, c: *mut f32, n: u32) {
        for_each_index(n, |k| *c.add(k) = math::add_element(*a.add(k), *b.add(k)));
    }

    /// A DAG producer: `output[i] = scale * sin(input[i]) + 1`.
    pub fn produce_kernel(input: *const f32, output: *mut f32, n: u32, scale: f32) {
        for_each_index(n, |k| {
            *output.add(k) = math::produce_element(*input.add(k), scale)
        });
    }

    /// The DAG combiner: `out[i] = a[i] * b[i] + a[i]`.
    pub fn combine_kernel(a: *const f32, b: *const f32, out: *mut f32, n: u32) {
        for_each_index(n, |k| {
            *out.add(k) = math::combine_element(*a.add(k), *b.add(k))
        });
    }

    /// In place: `data[i] = data[i] * factor + offset`.
    pub fn scale_kernel(data: *mut f32, n: u32, factor: f32, offset: f32) {
        for_each_index(n, |k| {
            let p = data.add(k);
            *p = math::scale_element(*p, factor, offset);
        });
    }

    /// `output[i] = input[i] * factor`, but each thread first spins `cycles` clock ticks: a
    /// deliberately slow producer, so that a consumer that forgets to wait for it reads stale data.
    pub fn slow_scale_kernel(input: *const f32, output: *mut f32, n: u32, factor: f32, cycles: u64) {
        let start = clock64();
        while clock64().wrapping_sub(start) < cycles {}
        for_each_index(n, |k| {
            *output.add(k) = math::scale_element(*input.add(k), factor, 0.0)
        });
    }

    /// One mixed-precision layer step: `gradient[i] = layer_gradient(weights[i], input[i],
    /// iters)`, computed in bfloat16 (`format` 0) or binary16 (1), weights and gradient as
    /// 16-bit patterns.
    pub fn half_layer_kernel(
        weights: *const u16,
        input: *const f32,
        gradient: *mut u16,
        n: u32,
        iters: u32,
        format: u32,
    ) {
        if format == math::FORMAT_F16 {
            half_layer_slice::<math::F16>(weights, input, gradient, n, iters);
        } else {
            half_layer_slice::<math::Bf16>(weights, input, gradient, n, iters);
        }
    }

    /// The FP32 master copy's SGD step: `master[i] -= lr * gradient[i]` (gradient in `format`).
    pub fn master_update_kernel(master: *mut f32, gradient: *const u16, n: u32, lr: f32, format: u32) {
        for_each_index(n, |k| {
            let (p, g) = (master.add(k), *gradient.add(k));
            *p = if format == math::FORMAT_F16 {
                math::master_update::<math::F16>(*p, g, lr)
            } else {
                math::master_update::<math::Bf16>(*p, g, lr)
            };
        });
    }

    /// The cast the compute stream waits for: `weights[i] = master[i]` rounded to `format`.
    pub fn cast_to_half_kernel(master: *const f32, weights: *mut u16, n: u32, format: u32) {
        use math::HalfFormat;
        for_each_index(n, |k| {
            let x = *master.add(k);
            *weights.add(k) = if format == math::FORMAT_F16 {
                math::F16::from_f32(x)
            } else {
                math::Bf16::from_f32(x)
            };
        });
    }

    /// `dst[i] = src[i]`: a copy done by the SMs instead of a copy engine. Either pointer may
    /// be pinned host memory (mapped into the device's address space), so a kernel can stand
    /// in for a host-to-device or device-to-host copy, e.g. in a CUDA graph.
    pub fn copy_kernel(src: *const f32, dst: *mut f32, n: u32) {
        for_each_index(n, |k| *dst.add(k) = *src.add(k));
    }

    /// Does nothing: what is left of a launch is its overhead.
    pub fn empty_kernel() {
        let _ = thread_idx_x();
    }
}
