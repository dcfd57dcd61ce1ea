//! Per-element arithmetic shared by the GPU kernels and the CPU reference, and the
//! half-precision formats (bfloat16, binary16) that the mixed-precision kernels compute in.
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
/// from one [`sincosf`] (1.70x faster on an H200 at the same unroll, see docs/measurements.md), and the loop
/// unrolled [`UNROLL`] times by hand (same operations in the same order, so the same bits).
#[inline(always)]
pub fn compute_element(mut x: f32, iters: u32) -> f32 {
    let mut left = iters;
    // Written out, not `for _ in 0..UNROLL`: that loop gives other PTX (not unrolled the
    // same way), and the measured figure is this body's.
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

// ---------------------------------------------------------------------------------------
// Half precision: the mixed-precision lesson's formats, rounding and per-element steps.
//
// Rust's `f16` type is unstable (and there is no `bf16` at all), so a half-precision value
// is kept as its 16 bits in a `u16` and computed on as `f32`: widen (exact), one f32
// operation, round back. For + - * / a single f32 operation then rounding to 16 bits gives
// exactly the bits of the same operation done natively in the 16-bit format, because f32's
// 24-bit significand has at least 2p + 2 bits for bf16 (p = 8) and f16 (p = 11), which makes
// double rounding innocuous (S. Figueroa, "When is double rounding innocuous?", 1995).
//
// f32 to bf16 uses the GPU's conversion instruction where the architecture has one (PTX
// `cvt.rn.bf16.f32`, sm_80 and newer: `cfg(target_feature = "sm_80")` in the PTX built for
// them); sm_75 has none, so its PTX rounds in integer arithmetic on the bits (bf16 is the top
// half of an f32), the code the CPU runs too. f16 uses the GPU's own instructions on every
// architecture (`cvt.rn.f16.f32` and `cvt.f32.f16`) and, on the CPU, the integer version
// below. Every path must give the same bits, NaNs included (each NaN becomes the format's
// canonical NaN, 0x7FFF, as the instructions and cuda_bf16.h/cuda_fp16.h's own integer
// versions give it); the tests hold them to that.
// ---------------------------------------------------------------------------------------

/// The `format` code the half-precision kernels take for bfloat16.
pub const FORMAT_BF16: u32 = 0;
/// The `format` code for IEEE binary16 (CUDA's `__half`).
pub const FORMAT_F16: u32 = 1;

/// bfloat16's canonical NaN (`CUDART_NAN_BF16`), what every f32 NaN converts to.
pub const BF16_NAN: u16 = 0x7FFF;
/// binary16's canonical NaN (`CUDART_NAN_FP16`), what every f32 NaN converts to.
pub const F16_NAN: u16 = 0x7FFF;

/// f32 to bfloat16 bits, rounding to nearest, ties to even (what `__float2bfloat16_rn`
/// does). A NaN becomes [`BF16_NAN`]; overflow gives infinity.
#[inline(always)]
pub fn bf16_bits_from_f32(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return BF16_NAN;
    }
    // Add just under half of the dropped part's unit, plus the kept part's lowest bit: a
    // tie then carries exactly when the kept part is odd. No overflow: |bits| < 0x7F80_0001.
    let lowest_kept = (bits >> 16) & 1;
    ((bits + 0x7FFF + lowest_kept) >> 16) as u16
}

/// bfloat16 bits to f32: exact.
#[inline(always)]
pub fn f32_from_bf16_bits(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// f32 to IEEE binary16 bits in integer arithmetic, rounding to nearest, ties to even,
/// with subnormals, overflow to infinity, and every NaN made [`F16_NAN`]: the CPU's twin of
/// the GPU's `cvt.rn.f16.f32`.
pub fn f16_bits_from_f32(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xFF) as i32;
    let mantissa = bits & 0x7F_FFFF;
    if exponent == 0xFF {
        return if mantissa != 0 { F16_NAN } else { sign | 0x7C00 };
    }
    // The exponent with binary16's bias; 1..=30 is a normal binary16 number.
    let e = exponent - 127 + 15;
    if e >= 0x1F {
        return sign | 0x7C00;
    }
    // The kept bits and the dropped ones: `(kept, dropped, half of the kept part's unit)`.
    let (kept, dropped, half) = if e >= 1 {
        (((e as u32) << 10) | (mantissa >> 13), mantissa & 0x1FFF, 0x1000)
    } else if e >= -10 {
        // Subnormal: the 24-bit significand, implicit bit included, shifted to units of 2^-24.
        let significand = mantissa | 0x80_0000;
        let shift = (14 - e) as u32; // 14..=24
        (significand >> shift, significand & ((1 << shift) - 1), 1 << (shift - 1))
    } else {
        return sign; // below half the smallest subnormal: a signed zero
    };
    let round_up = dropped > half || (dropped == half && kept & 1 == 1);
    // A carry out of the mantissa moves to the next exponent, or to infinity: still right.
    sign | (kept + u32::from(round_up)) as u16
}

/// IEEE binary16 bits to f32, exactly (every binary16 value is an f32 value).
pub fn f32_from_f16_bits(bits: u16) -> f32 {
    let sign = ((bits & 0x8000) as u32) << 16;
    let exponent = ((bits >> 10) & 0x1F) as u32;
    let mantissa = (bits & 0x3FF) as u32;
    match exponent {
        0 => {
            // Zero or subnormal: mantissa x 2^-24, exact in f32.
            let magnitude = mantissa as f32 * f32::from_bits(0x3380_0000);
            f32::from_bits(sign | magnitude.to_bits())
        }
        0x1F => f32::from_bits(sign | 0x7F80_0000 | (mantissa << 13)),
        _ => f32::from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13)),
    }
}

/// A 16-bit floating-point format: its bits live in a `u16`, its arithmetic is done in f32
/// and rounded back after every operation.
pub trait HalfFormat {
    /// The `format` code the kernels take.
    const CODE: u32;
    /// f32 to this format's bits, rounding to nearest, ties to even.
    fn from_f32(x: f32) -> u16;
    /// This format's bits to f32, exactly.
    fn to_f32(bits: u16) -> f32;
    /// `x` rounded to this format and widened again: one rounding.
    #[inline(always)]
    fn round(x: f32) -> f32 {
        Self::to_f32(Self::from_f32(x))
    }
}

/// bfloat16: f32's exponent range, 8 significant bits.
pub struct Bf16;
/// IEEE binary16: 5 exponent bits (largest finite value 65504), 11 significant bits.
pub struct F16;

impl HalfFormat for Bf16 {
    const CODE: u32 = FORMAT_BF16;
    #[inline(always)]
    fn from_f32(x: f32) -> u16 {
        // The PTX for sm_80 and newer (built with that `-C target-cpu`) has the instruction;
        // sm_75's and the CPU's round in integer arithmetic, to the same bits.
        #[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
        {
            let bits: u16;
            // SAFETY: one conversion instruction between registers; no memory, no side effect.
            unsafe {
                core::arch::asm!("cvt.rn.bf16.f32 {h}, {f};", h = out(reg16) bits,
                    f = in(reg32) x.to_bits(), options(pure, nomem, nostack));
            }
            bits
        }
        #[cfg(not(all(target_arch = "nvptx64", target_feature = "sm_80")))]
        bf16_bits_from_f32(x)
    }
    #[inline(always)]
    fn to_f32(bits: u16) -> f32 {
        f32_from_bf16_bits(bits)
    }
}

impl HalfFormat for F16 {
    const CODE: u32 = FORMAT_F16;
    #[inline(always)]
    fn from_f32(x: f32) -> u16 {
        #[cfg(target_arch = "nvptx64")]
        {
            let bits: u16;
            // SAFETY: one conversion instruction between registers; no memory, no side effect.
            unsafe {
                core::arch::asm!("cvt.rn.f16.f32 {h}, {f};", h = out(reg16) bits,
                    f = in(reg32) x.to_bits(), options(pure, nomem, nostack));
            }
            bits
        }
        #[cfg(not(target_arch = "nvptx64"))]
        f16_bits_from_f32(x)
    }
    #[inline(always)]
    fn to_f32(bits: u16) -> f32 {
        #[cfg(target_arch = "nvptx64")]
        {
            let wide: u32;
            // SAFETY: as above.
            unsafe {
                core::arch::asm!("cvt.f32.f16 {f}, {h};", f = out(reg32) wide, h = in(reg16) bits,
                    options(pure, nomem, nostack));
            }
            f32::from_bits(wide)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        f32_from_f16_bits(bits)
    }
}

/// The mixed-precision lesson's "layer" for one element, computed in format `H`: the input
/// `x` and the weight `w` in `H`, a recurrent cell `h = w * h + x` run `iters` times, then
/// the gradient-like term `(h - x) * x`, every operation rounded to `H`. With |w| < 1 the
/// cell stays within |x| / (1 - |w|), and the term has the sign of `w`: training with it
/// shrinks the weights, so nothing overflows even in binary16.
#[inline(always)]
pub fn layer_gradient<H: HalfFormat>(weight: u16, x: f32, iters: u32) -> u16 {
    let w = H::to_f32(weight);
    let x = H::round(x);
    let mut h = x;
    for _ in 0..iters {
        h = H::round(H::round(w * h) + x);
    }
    H::from_f32(H::round(h - x) * x)
}

/// The FP32 master weight after one plain SGD step with a half-precision gradient:
/// `master - lr * gradient`, in f32.
#[inline(always)]
pub fn master_update<H: HalfFormat>(master: f32, gradient: u16, lr: f32) -> f32 {
    master - lr * H::to_f32(gradient)
}

/// One weight trained on the CPU the way the mixed-precision lesson trains it on the GPU,
/// with the kernels' own per-element functions: step i computes its gradient with the
/// 16-bit weight cast after gradient i-2 (a one-step delay), then gradient i-1 updates the
/// f32 master copy, which is cast again. `inputs` are the weight's element of each
/// micro-batch, in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trained {
    /// The final f32 master weight.
    pub master: f32,
    /// The final 16-bit weight (bits).
    pub weight: u16,
    /// Of the updates that changed the master copy, how many would have vanished had they
    /// been applied to the 16-bit weight instead: below half a unit in its last place.
    pub lost: usize,
    /// The updates that changed the master copy.
    pub updates: usize,
}

/// [`train_delayed`] in the format with code `format` ([`FORMAT_BF16`] or [`FORMAT_F16`]).
pub fn train_delayed_as(
    format: u32,
    w0: f32,
    inputs: impl Iterator<Item = f32>,
    iters: u32,
    lr: f32,
) -> Trained {
    if format == FORMAT_F16 {
        train_delayed::<F16>(w0, inputs, iters, lr)
    } else {
        train_delayed::<Bf16>(w0, inputs, iters, lr)
    }
}

/// See [`Trained`]. `lr` is the learning rate.
pub fn train_delayed<H: HalfFormat>(
    w0: f32,
    inputs: impl Iterator<Item = f32>,
    iters: u32,
    lr: f32,
) -> Trained {
    let mut t = Trained { master: w0, weight: H::from_f32(w0), lost: 0, updates: 0 };
    let apply = |t: &mut Trained, g: u16| {
        let next = master_update::<H>(t.master, g, lr);
        if next != t.master {
            t.updates += 1;
            let on_16_bits = H::from_f32(master_update::<H>(H::to_f32(t.weight), g, lr));
            t.lost += usize::from(on_16_bits == t.weight);
        }
        t.master = next;
        t.weight = H::from_f32(next);
    };
    let mut pending = None;
    for x in inputs {
        let g = layer_gradient::<H>(t.weight, x, iters);
        if let Some(previous) = pending.replace(g) {
            apply(&mut t, previous);
        }
    }
    if let Some(last) = pending {
        apply(&mut t, last);
    }
    t
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
