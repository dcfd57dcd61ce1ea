//! A planted error for compute-sanitizer: a kernel of ours reads device memory nobody wrote.
//!
//! Run plainly it passes (the values read are garbage, and nothing checks them). gpu-run.sh's
//! sanitizer stage runs this executable under `compute-sanitizer --tool initcheck` and requires
//! scripts/sanitizer_findings.py to count at least one finding of ours there, in
//! `compute_kernel`: proof that a finding of ours still fails the stage now that NCCL's are
//! listed apart.
use streamlab::runtime::{DeviceBuffer, Stream};
use testkit::gpu;

#[test]
#[ignore = "needs a CUDA GPU"]
fn planted_uninitialized_read_for_the_sanitizer() {
    let n = 256;
    let gpu = gpu();
    let stream = Stream::new(&*gpu, "planted").unwrap();
    // cuMemAlloc without a memset: every element is uninitialized.
    let buf = DeviceBuffer::<f32>::alloc(&*gpu, n).unwrap();
    // compute_kernel reads each element before writing it: initcheck's finding, n times.
    gpu.compute(&stream, &buf, 1).unwrap();
    stream.synchronize().unwrap();
    // The kernel wrote every element, so this copy reads initialized memory.
    let values = buf.to_vec().unwrap();
    assert_eq!(values.len(), n);
}
