//! Per-element arithmetic shared by the GPU kernels and the CPU reference.
//!
//! On the GPU `sinf`/`cosf` are libdevice's `__nv_sinf`/`__nv_cosf` (what CUDA C++ `sinf`
//! compiles to); on the host they are Rust's `f32::sin`/`f32::cos`. The two agree to a few
//! ulps, not bit for bit, which is why GPU-vs-CPU checks use `approx` while async-vs-sync
//! checks on the GPU compare bits.

#[cfg(target_arch = "nvptx64")]
extern "C" {
    fn __nv_sinf(x: f32) -> f32;
    fn __nv_cosf(x: f32) -> f32;
    fn __nv_sincosf(x: f32, s: *mut f32, c: *mut f32);
}

/// Single-precision sine: libdevice on the GPU, std on the host.
#[inline(always)]
pub fn sinf(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a pure libdevice function, linked into the PTX by host/build.rs.
    return unsafe { __nv_sinf(x) };
    #[cfg(not(target_arch = "nvptx64"))]
    return x.sin();
}

/// Single-precision cosine: libdevice on the GPU, std on the host.
#[inline(always)]
pub fn cosf(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a pure libdevice function, linked into the PTX by host/build.rs.
    return unsafe { __nv_cosf(x) };
    #[cfg(not(target_arch = "nvptx64"))]
    return x.cos();
}

/// `sin(x)` and `cos(x)` from one call: libdevice's `__nv_sincosf` on the GPU (one argument
/// reduction for both, where `sinf` and `cosf` each do their own; the results are the same
/// bits), std on the host.
#[inline(always)]
pub fn sincosf(x: f32) -> (f32, f32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let (mut s, mut c) = (0f32, 0f32);
        // SAFETY: a pure libdevice function writing through two valid pointers, linked into
        // the PTX by host/build.rs.
        unsafe { __nv_sincosf(x, &mut s, &mut c) };
        (s, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    return (x.sin(), x.cos());
}

/// Iterations of [`compute_element`]'s loop unrolled into one pass.
pub const UNROLL: u32 = 16;

/// One step of [`compute_element`]: `sin(x) * cos(x)`.
#[inline(always)]
pub fn sin_cos(x: f32) -> f32 {
    let (s, c) = sincosf(x);
    s * c
}

/// The compute-intensive workload of the CUDA streams tutorials: `x = sin(x) * cos(x)`,
/// `iters` times. Bit for bit what CUDA C++'s `sinf(x) * cosf(x)` gives, but with sin and cos
/// from one [`sincosf`] (1.8x faster on an H200, see docs/measurements.md), and the loop
/// unrolled [`UNROLL`] times by hand (same operations in the same order, so the same bits).
#[inline(always)]
pub fn compute_element(mut x: f32, iters: u32) -> f32 {
    let mut left = iters;
    while left >= UNROLL {
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        x = sin_cos(x);
        left -= UNROLL;
    }
    while left > 0 {
        x = sin_cos(x);
        left -= 1;
    }
    x
}

/// `c = a + b`.
#[inline(always)]
pub fn add_element(a: f32, b: f32) -> f32 {
    a + b
}

/// A producer of the two-producers-one-combiner DAG: `scale * sin(x) + 1`.
#[inline(always)]
pub fn produce_element(x: f32, scale: f32) -> f32 {
    scale * sinf(x) + 1.0
}

/// The combiner of that DAG: `a * b + a`.
#[inline(always)]
pub fn combine_element(a: f32, b: f32) -> f32 {
    a * b + a
}

/// `x * factor + offset`, the cheap per-element step of the pipeline demos.
#[inline(always)]
pub fn scale_element(x: f32, factor: f32, offset: f32) -> f32 {
    x * factor + offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unrolled_loop_matches_plain_loop_for_every_remainder() {
        for iters in 0..(2 * UNROLL + 3) {
            let mut plain = 0.7f32;
            for _ in 0..iters {
                plain = plain.sin() * plain.cos();
            }
            assert_eq!(compute_element(0.7, iters).to_bits(), plain.to_bits(), "iters {iters}");
        }
    }

    #[test]
    fn dag_elements() {
        assert_eq!(produce_element(0.0, 3.0), 1.0);
        assert_eq!(combine_element(2.0, 3.0), 8.0);
        assert_eq!(scale_element(2.0, 3.0, 1.0), 7.0);
        assert_eq!(add_element(2.0, 3.5), 5.5);
    }
}
