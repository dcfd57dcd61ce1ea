//! The mixed-precision lesson's two versions side by side, at its defaults (8 batches of
//! 4,194,304 weights, 8 cell steps, the layer kernel on 50% of the GPU), in bf16 and in f16:
//! the FP32 update and cast on the compute stream between layer steps, and on a side stream
//! behind the next step. GPU time is measured with events by the lesson's own code, fed to
//! criterion through `iter_custom`. Afterwards both versions run once more and the lesson's
//! checks run (side stream against one stream bit for bit, both against the CPU reference);
//! the bench exits 1 if one fails. Then the overlap probe (`lessons::mixed_precision::probe`)
//! prints each kernel's time alone and beside the other, and the bound from each, for the
//! note on measured/bound. The C++ twin is `cuda-reference/mixed_precision.cu` (the
//! `refs` stage of scripts/gpu-run.sh prints its times).
use criterion::{BenchmarkId, Criterion};
use streamlab::lessons::mixed_precision::MixedPrecision;
use testkit::bench::{fail, quick_group, verify, versions};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "mixed-precision";
/// Rounds of the overlap probe, after its warm-up (each about 1 ms at the defaults).
const PROBE_ROUNDS: usize = 20;

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    // The bf16 layer step rounds with cvt.rn.bf16.f32 in the PTX for sm_80 and newer, in
    // integer code in sm_75's (STREAMLAB_GPU_ARCH=sm_75 runs that one on the same GPU).
    println!("{BENCH}: PTX {}", gpu.info.ptx_choice);
    for format in ["bf16", "f16"] {
        let flags = ["--format", format];
        let mut m: MixedPrecision = set_up(&gpu, &flags, 1).unwrap_or_else(|e| fail(BENCH, e));
        let size = format!("{format} 8 x 4M x 8");
        let ids = [
            (0, BenchmarkId::new("sync_one_stream", &size)),
            (1, BenchmarkId::new("async_side_stream", &size)),
        ];
        versions(quick_group(&mut c, "mixed_precision"), BENCH, &mut m, &gpu, ids);
        verify(&gpu, &mut m, 2);
        let overlap = m.probe_overlap(&gpu, PROBE_ROUNDS).unwrap_or_else(|e| fail(BENCH, e));
        for line in overlap.lines(format) {
            println!("{line}");
        }
    }
    c.final_summary();
}
