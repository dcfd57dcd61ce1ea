//! The mixed-precision lesson. The GPU tests are ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the rounding and the flags
//! are checked everywhere: the CPU's conversions against the `half` crate (an independent
//! implementation, with x86's F16C instructions where the CPU has them), and the GPU's
//! conversions (`cvt.rn.f16.f32`; `cvt.rn.bf16.f32` in the PTX for sm_80 and newer, integer
//! bf16 in sm_75's) against the CPU's, bit for bit, NaNs included. The GPU tests check the PTX
//! the GPU loads; `STREAMLAB_GPU_ARCH=sm_75` runs them on sm_75's on the same GPU.
use half::{bf16, f16};
use kernels_gpu::math::{
    bf16_bits_from_f32, f16_bits_from_f32, f32_from_bf16_bits, f32_from_f16_bits, layer_gradient,
    master_update, train_delayed, train_delayed_as, Bf16, HalfFormat as _, BF16_NAN, F16, F16_NAN,
    FORMAT_F16,
};
use streamlab::lab::harness::data::random_inputs;
use streamlab::lab::record::report::Verdict;
use streamlab::lab::Lesson;
use streamlab::lessons::mixed_precision::{MixedPrecision, LEARNING_RATE, SIDE_STREAM};
use streamlab::runtime::{DeviceBuffer, HalfFormat, Stream};
use testkit::spans::{is_kernel, ran_at_once};
use testkit::{accepted, gpu, refuses, run_lesson, run_recorded, run_refusal};

/// f32 bit patterns that cross every rounding boundary of both formats: for each of the 2^16
/// upper halves, low halves at, around and between the halfway points of bf16 (bit 15) and
/// of normal f16 (bit 12); f16's subnormal boundaries lie in the upper half, which varies.
fn boundary_patterns() -> impl Iterator<Item = f32> {
    const LOW: [u32; 12] =
        [0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000, 0x7FFF, 0x8000, 0x8001, 0xFFFF];
    (0u32..1 << 16).flat_map(|hi| LOW.iter().map(move |&lo| f32::from_bits(hi << 16 | lo)))
}

/// A million pseudo-random f32 bit patterns (xorshift64*), every exponent alike.
fn random_patterns() -> impl Iterator<Item = f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..1_000_000).map(move |_| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        f32::from_bits((state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32)
    })
}

/// Same bits, or both NaN (a NaN's payload is not part of the contract).
fn same(a: u16, b: u16, nan: impl Fn(u16) -> bool) -> bool {
    a == b || (nan(a) && nan(b))
}

#[test]
fn bf16_rounding_matches_the_half_crate() {
    let nan = |b: u16| bf16::from_bits(b).is_nan();
    for x in boundary_patterns().chain(random_patterns()) {
        let (ours, theirs) = (bf16_bits_from_f32(x), bf16::from_f32(x).to_bits());
        assert!(
            same(ours, theirs, nan),
            "{x:e} ({:#010x}): {ours:#06x} vs {theirs:#06x}",
            x.to_bits()
        );
    }
    for b in 0..=u16::MAX {
        let (ours, theirs) = (f32_from_bf16_bits(b), bf16::from_bits(b).to_f32());
        assert!(
            ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()),
            "{b:#06x}"
        );
    }
}

#[test]
fn f16_rounding_matches_the_half_crate() {
    let nan = |b: u16| f16::from_bits(b).is_nan();
    for x in boundary_patterns().chain(random_patterns()) {
        let (ours, theirs) = (f16_bits_from_f32(x), f16::from_f32(x).to_bits());
        assert!(
            same(ours, theirs, nan),
            "{x:e} ({:#010x}): {ours:#06x} vs {theirs:#06x}",
            x.to_bits()
        );
    }
    for b in 0..=u16::MAX {
        let (ours, theirs) = (f32_from_f16_bits(b), f16::from_bits(b).to_f32());
        assert!(
            ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()),
            "{b:#06x}"
        );
    }
}

/// Every f32 NaN, whatever its sign and payload, becomes the canonical NaN 0x7FFF in both
/// formats: what `cvt.rn.bf16.f32` and `cvt.rn.f16.f32` give, and what cuda_bf16.h's and
/// cuda_fp16.h's own integer conversions (`__float2bfloat16_rn`, `__float2half_rn` on the
/// host and on GPUs without the instruction) give, so every architecture's PTX and the CPU
/// agree bit for bit. The `half` crate keeps the payload instead: NaN there, but other bits.
#[test]
fn every_nan_becomes_the_canonical_nan() {
    let nans = boundary_patterns().chain(random_patterns()).filter(|x| x.is_nan());
    let mut count = 0;
    for x in nans {
        assert_eq!(bf16_bits_from_f32(x), BF16_NAN, "bf16 of {:#010x}", x.to_bits());
        assert_eq!(f16_bits_from_f32(x), F16_NAN, "f16 of {:#010x}", x.to_bits());
        count += 1;
    }
    assert!(count > 1000, "only {count} NaN patterns");
    assert!(bf16::from_bits(BF16_NAN).is_nan() && f16::from_bits(F16_NAN).is_nan());
    // Infinities keep their sign; they are not NaNs.
    assert_eq!(bf16_bits_from_f32(f32::NEG_INFINITY), 0xFF80);
    assert_eq!(f16_bits_from_f32(f32::NEG_INFINITY), 0xFC00);
}

#[test]
fn ties_go_to_even_and_overflow_to_infinity() {
    // bf16 keeps 8 significant bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
    assert_eq!(bf16_bits_from_f32(1.0 + 1.0 / 256.0), 0x3F80); // down to the even 1.0
    assert_eq!(bf16_bits_from_f32(1.0 + 3.0 / 256.0), 0x3F82); // up to the even 1 + 2^-6
    assert_eq!(bf16_bits_from_f32(f32::MAX), 0x7F80); // past the largest bf16: infinity
                                                      // f16: 65520 is halfway between 65504 (the largest) and 65536, which is infinity.
    assert_eq!(f16_bits_from_f32(65519.996), 0x7BFF);
    assert_eq!(f16_bits_from_f32(65520.0), 0x7C00);
    // Subnormals: 2^-24 is the smallest; half of it is a tie that goes to (even) zero, a
    // little more goes up, and the sign of a zero is kept.
    assert_eq!(f16_bits_from_f32(2f32.powi(-24)), 0x0001);
    assert_eq!(f16_bits_from_f32(2f32.powi(-25)), 0x0000);
    assert_eq!(f16_bits_from_f32(2f32.powi(-25) * 1.0001), 0x0001);
    assert_eq!(f16_bits_from_f32(-1e-30), 0x8000);
    assert_eq!(f16_bits_from_f32(3.0 * 2f32.powi(-25)), 0x0002); // 1.5 units: to even 2
}

#[test]
fn every_16_bit_value_survives_the_round_trip() {
    for b in 0..=u16::MAX {
        if !f16::from_bits(b).is_nan() {
            assert_eq!(f16_bits_from_f32(f32_from_f16_bits(b)), b, "f16 {b:#06x}");
        }
        if !bf16::from_bits(b).is_nan() {
            assert_eq!(bf16_bits_from_f32(f32_from_bf16_bits(b)), b, "bf16 {b:#06x}");
        }
    }
}

/// `v` rounded to nearest, ties to even, on the grid of a binary format with `p` significant
/// bits, smallest normal exponent `emin` and largest finite value `max` (beyond it:
/// infinity), computed in f64 by scaling with powers of two (exact): the textbook definition,
/// independent of every conversion under test.
fn round_exactly(v: f64, p: i32, emin: i32, max: f64) -> f64 {
    if v == 0.0 {
        return v;
    }
    let exponent = ((v.to_bits() >> 52) & 0x7FF) as i32 - 1023; // v is a normal f64 here
    let quantum = 2f64.powi(exponent.max(emin) - (p - 1));
    let r = (v / quantum).round_ties_even() * quantum;
    if r.abs() > max {
        f64::INFINITY.copysign(v)
    } else {
        r
    }
}

/// The claim the kernels rely on: one f32 operation, then rounding to 16 bits, gives the
/// correctly rounded 16-bit result, which native 16-bit arithmetic gives. Products and sums
/// of two 16-bit values are exact in f64, so rounding them once there is the reference.
#[test]
fn f32_then_16_bits_is_correct_rounding_for_add_and_multiply() {
    let mut values = random_patterns().map(|x| x.to_bits() as u16);
    let f16_exact = |v: f64| f16_bits_from_f32(round_exactly(v, 11, -14, 65504.0) as f32);
    let bf16_exact =
        |v: f64| bf16_bits_from_f32(round_exactly(v, 8, -126, bf16::MAX.to_f64()) as f32);
    for _ in 0..400_000 {
        let (a, b) = (values.next().unwrap(), values.next().unwrap());
        let (x, y) = (f32_from_f16_bits(a), f32_from_f16_bits(b));
        if x.is_finite() && y.is_finite() {
            let (wx, wy) = (x as f64, y as f64);
            assert_eq!(F16::from_f32(x * y), f16_exact(wx * wy), "f16 {a:#06x} * {b:#06x}");
            assert_eq!(F16::from_f32(x + y), f16_exact(wx + wy), "f16 {a:#06x} + {b:#06x}");
        }
        let (x, y) = (f32_from_bf16_bits(a), f32_from_bf16_bits(b));
        if x.is_finite() && y.is_finite() {
            let (wx, wy) = (x as f64, y as f64);
            assert_eq!(Bf16::from_f32(x * y), bf16_exact(wx * wy), "bf16 {a:#06x} * {b:#06x}");
            assert_eq!(Bf16::from_f32(x + y), bf16_exact(wx + wy), "bf16 {a:#06x} + {b:#06x}");
        }
    }
}

#[test]
fn the_cpu_reference_delays_each_update_by_one_step() {
    let (w0, xs, iters, lr) = (0.3f32, [1.5f32, -2.25, 0.75], 5, LEARNING_RATE);
    // By hand: steps 0 and 1 use the initial weights; step 2 those after gradient 0.
    let h0 = Bf16::from_f32(w0);
    let (g0, g1) =
        (layer_gradient::<Bf16>(h0, xs[0], iters), layer_gradient::<Bf16>(h0, xs[1], iters));
    let w1 = master_update::<Bf16>(w0, g0, lr);
    let g2 = layer_gradient::<Bf16>(Bf16::from_f32(w1), xs[2], iters);
    let w3 = master_update::<Bf16>(master_update::<Bf16>(w1, g1, lr), g2, lr);
    let t = train_delayed::<Bf16>(w0, xs.iter().copied(), iters, lr);
    assert_eq!((t.master.to_bits(), t.weight), (w3.to_bits(), Bf16::from_f32(w3)));
    assert_eq!(t.updates, 3);
    // The gradient has the sign of the weight: training shrinks it.
    assert!(t.master.abs() < w0);
    // The format code picks the format.
    let f = train_delayed_as(FORMAT_F16, w0, xs.iter().copied(), iters, lr);
    assert_eq!(f, train_delayed::<F16>(w0, xs.iter().copied(), iters, lr));
    assert_ne!(f.master, t.master);
}

#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<MixedPrecision, _>([
        (&["--batches", "0"][..], "whole number from 1 to 1024"),
        (&["--batches", "1025"], "whole number from 1 to 1024"),
        (&["--elements", "0"], "whole number from 1 to 4294967295"),
        (&["--iters", "10001"], "whole number from 1 to 10000"),
        (&["--layer-share", "0"], "whole number from 1 to 100"),
        (&["--layer-share", "101"], "whole number from 1 to 100"),
        (&["--format", "fp8"], "fp8"),
        (&["--batches", "1024", "--elements", "1000000"], "--batches 1024 x --elements 1000000"),
        (
            &[
                "--elements",
                "268435456",
                "--batches",
                "1",
                "--iters",
                "10000",
                "--layer-share",
                "1",
            ],
            "per repeat",
        ),
    ]);
    accepted::<MixedPrecision>(&[]);
    accepted::<MixedPrecision>(&[
        "--elements",
        "1",
        "--batches",
        "1",
        "--iters",
        "1",
        "--format",
        "f16",
    ]);
}

fn verdict(o: &streamlab::lab::Outcome<MixedPrecision>, name: &str) -> Option<Verdict> {
    o.checks.iter().find(|c| c.name.contains(name)).map(|c| c.verdict)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn side_stream_equals_one_stream_and_the_cpu_bit_for_bit() {
    let gpu = gpu();
    // 1 and 2 batches reuse no slot; 3 and 9 do. A share of 1% gives a one-block grid-stride.
    for (n, batches, share) in [(1, 1, 50), (4097, 2, 100), (100_003, 3, 1), (5000, 9, 50)] {
        for format in ["bf16", "f16"] {
            let (n_flag, b_flag, s_flag) = (n.to_string(), batches.to_string(), share.to_string());
            let flags = [
                "--elements",
                &n_flag,
                "--batches",
                &b_flag,
                "--layer-share",
                &s_flag,
                "--iters",
                "20",
                "--format",
                format,
            ];
            let o = run_lesson::<MixedPrecision>(&gpu, &flags, 1);
            for check in ["master copy, bit for bit", "16-bit weights, bit for bit", "GPU vs CPU"] {
                assert_eq!(verdict(&o, check), Some(Verdict::Passed), "{flags:?}: {:?}", o.checks);
            }
        }
    }
}

/// Runs the side-stream version with `flags` (and `format`), compares every element of the
/// master copy and of the 16-bit weights with the CPU's training, and returns the master copy.
fn every_element_against_the_cpu(flags: &[&str], format: HalfFormat, seed: u64) -> Vec<f32> {
    let gpu = gpu();
    let flags: Vec<&str> = flags.iter().copied().chain(["--format", format.name()]).collect();
    let a = streamlab::lab::harness::args_from::<MixedPrecision>(&flags).unwrap();
    let mut p = MixedPrecision::setup(&gpu, &a, seed).unwrap();
    p.version(&gpu, SIDE_STREAM).unwrap();
    let (master, weights) = p.output(1).unwrap();
    let n = a.elements;
    let (w0, input) =
        (MixedPrecision::initial_weights(n, seed), random_inputs(n * a.batches, seed));
    for j in 0..n {
        let column = input.iter().skip(j).step_by(n).copied();
        let t = train_delayed_as(format.code(), w0[j], column, a.iters, LEARNING_RATE);
        let (gpu, cpu) = ((master[j].to_bits(), weights[j]), (t.master.to_bits(), t.weight));
        assert_eq!(gpu, cpu, "{flags:?}: element {j}");
    }
    master
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_element_matches_the_cpu_reference() {
    for format in [HalfFormat::Bf16, HalfFormat::F16] {
        every_element_against_the_cpu(
            &["--elements", "20000", "--batches", "5", "--iters", "30"],
            format,
            7,
        );
    }
}

/// At the defaults and the default seed: every element against the CPU, then the checksum
/// that `cuda-reference/mixed_precision.cu` prints too (run with `--nocapture` to see it), so
/// the two programs' bits can be compared.
#[test]
#[ignore = "needs a CUDA GPU"]
fn defaults_match_the_cpu_everywhere() {
    for format in [HalfFormat::Bf16, HalfFormat::F16] {
        let master =
            every_element_against_the_cpu(&[], format, streamlab::lab::harness::common::SEED);
        let bytes = master.iter().flat_map(|x| x.to_le_bytes());
        let hash = bytes
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        println!("mixed-precision {} checksum of the master copy: {hash:016x}", format.name());
    }
}

/// The GPU's conversions against the CPU's: `cast_to_half` (f32 to 16 bits) on every
/// boundary pattern, NaNs of every sign and payload included, and widening (16 bits to f32)
/// through `master_update` with master 0 and lr -1, which computes 0 - (-1 * g) = g exactly
/// (but turns -0 into +0, and a NaN into the f32 arithmetic's own NaN). Run once as the GPU
/// loads its PTX and once with `STREAMLAB_GPU_ARCH=sm_75`: instruction and integer rounding.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_conversions_match_the_cpu_bit_for_bit() {
    let gpu = gpu();
    println!("PTX: {}", gpu.info.ptx_choice);
    let s = Stream::new(&*gpu, "convert").unwrap();
    let values: Vec<f32> = boundary_patterns().collect();
    assert!(values.iter().filter(|x| x.is_nan()).count() > 1000);
    let all_bits: Vec<u16> = (0..=u16::MAX).collect();
    for format in [HalfFormat::Bf16, HalfFormat::F16] {
        let narrow = |x: f32| match format {
            HalfFormat::Bf16 => bf16_bits_from_f32(x),
            HalfFormat::F16 => f16_bits_from_f32(x),
        };
        let master = DeviceBuffer::from_slice(&*gpu, &values).unwrap();
        let out = DeviceBuffer::<u16>::zeroed(&*gpu, values.len()).unwrap();
        gpu.cast_to_half(&s, &master, &out, format).unwrap();
        s.synchronize().unwrap();
        let got = out.to_vec().unwrap();
        let wrong = values.iter().zip(&got).filter(|(x, g)| narrow(**x) != **g).count();
        let first = values.iter().zip(&got).find(|(x, g)| narrow(**x) != **g);
        assert_eq!(wrong, 0, "{format:?}: {wrong} of {} differ, first {first:?}", values.len());

        let grads = DeviceBuffer::from_slice(&*gpu, &all_bits).unwrap();
        let zeros = DeviceBuffer::<f32>::zeroed(&*gpu, all_bits.len()).unwrap();
        gpu.master_update(&s, &zeros, &grads, -1.0, format).unwrap();
        s.synchronize().unwrap();
        for (b, got) in all_bits.iter().zip(zeros.to_vec().unwrap()) {
            let want = format.widen(*b);
            if !want.is_nan() && want != 0.0 {
                assert_eq!(got.to_bits(), want.to_bits(), "{format:?} widening {b:#06x}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_lesson_passes_at_its_defaults_and_hides_the_update() {
    let gpu = gpu();
    let o = run_recorded::<MixedPrecision>(&gpu, &[], 5);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    // The update and cast on the side stream ran beside a layer step on the compute stream
    // (what that hid is scripts/perf-check.sh's: the speed-up and measured / bound).
    let side = &o.recordings[1];
    assert!(ran_at_once(side, is_kernel, is_kernel), "{:?}\n{text}", side.spans);
    // The bound with the kernels' times beside each other, set beside the free one: the gap
    // above the free bound splits into sharing and scheduling, which add up to it.
    let value = |name: &str| o.report.value(name).unwrap_or_else(|| panic!("no {name}\n{text}"));
    let free = value("bound c + (B-1) max(c, u) + u");
    let aware = value("bound with times beside (contention-aware)");
    let (sharing, scheduling) = (value("gap: SM and memory sharing"), value("gap: scheduling"));
    let measured = o.measured.with().time.median;
    assert!((sharing - (aware - free)).abs() < 1e-9, "{text}");
    assert!((sharing + scheduling - (measured - free)).abs() < 1e-9, "{text}");
    for stretch in [
        "layer step beside update + cast / alone (probed)",
        "update + cast beside a layer step / alone (probed)",
    ] {
        assert!(value(stretch) > 0.5 && value(stretch) < 10.0, "{stretch}\n{text}");
    }
    assert!(text.contains("is SM and memory sharing"), "{text}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn one_batch_is_reported_as_nothing_to_hide() {
    let gpu = gpu();
    let o = run_lesson::<MixedPrecision>(&gpu, &["--elements", "4096", "--batches", "1"], 3);
    assert!(o.results_right(), "{}", o.report.to_text());
    assert!(o.report.interpretation[0].contains("no next step"), "{}", o.report.to_text());
    // Nothing ran beside anything: no bound with times beside, no split.
    assert_eq!(o.report.value("gap: scheduling"), None, "{}", o.report.to_text());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn hostile_flags_are_refused_in_one_line_before_running() {
    let gpu = gpu();
    let why = run_refusal::<MixedPrecision>(&gpu, &["--batches", "1024", "--elements", "1000000"]);
    assert!(why.contains("--batches 1024"), "{why}");
}
