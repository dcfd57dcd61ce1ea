//! GPU tests of what a host buffer waits for: the event recorded after its own last copy,
//! not the stream (work queued behind the copy goes on). Ignored without a GPU (run them with
//! `cargo test --release --test host_buffer_waits -- --include-ignored` on a GPU machine).
//!
//! Each asserts an order, read with an event query right after the host call returned: a
//! kernel queued behind the copy on the same stream was still running (the call did not wait
//! for it), or a kernel queued before the copy had ended (the call waited for the copy). The
//! long kernel spins 500 ms, far beyond the few microseconds between the call's return and
//! the query.
use streamlab::runtime::{DeviceBuffer, Event, HostBuffer, LaunchConfig, Stream};
use testkit::{gpu, TestGpu};

/// How long the kernel queued behind the copies spins.
const LONG_KERNEL_US: f64 = 500_000.0;

/// One thread spinning `LONG_KERNEL_US` on `s`, then `end` recorded behind it.
fn long_kernel(gpu: &TestGpu, s: &Stream, end: &Event) {
    let cycles = gpu.info.cycles_for_micros(LONG_KERNEL_US);
    gpu.sleep(s, LaunchConfig::new((1, 1, 1), (1, 1, 1)), cycles).unwrap();
    end.record(s).unwrap();
}

fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.5 - 7.0).collect()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_read_returns_while_a_later_kernel_on_the_same_stream_still_runs() {
    let gpu = gpu();
    let s = Stream::new(&*gpu, "one stream").unwrap();
    let (n, kernel_end) = (1 << 20, Event::without_timing(&*gpu).unwrap());
    let expected = values(n);
    let dev = DeviceBuffer::from_slice(&*gpu, &expected).unwrap();
    let result = HostBuffer::<f32>::pinned(&*gpu, n).unwrap();
    // Dropped below: pageable, because freeing pinned memory (cuMemFreeHost) may wait for the
    // device by itself, whatever the buffer waits for.
    let dropped = HostBuffer::<f32>::pageable(&*gpu, n).unwrap();
    s.copy_to_host(&dev, &result).unwrap();
    s.copy_to_host(&dev, &dropped).unwrap();
    long_kernel(&gpu, &s, &kernel_end);
    let read = result.read().unwrap();
    let kernel_still_running = !kernel_end.is_complete().unwrap();
    // The bytes had landed: read() waited for the copy itself.
    assert_eq!(bits(&read), bits(&expected));
    assert!(kernel_still_running, "read() waited for the kernel queued after the copy");
    drop(read);
    // Writing and dropping wait for the copies of the buffer only, too.
    let write = result.write().unwrap();
    assert!(!kernel_end.is_complete().unwrap(), "write() waited for the later kernel");
    drop(write);
    drop(dropped);
    assert!(!kernel_end.is_complete().unwrap(), "dropping waited for the later kernel");
    s.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_read_waits_for_a_copy_queued_behind_a_long_kernel() {
    let gpu = gpu();
    let s = Stream::new(&*gpu, "one stream").unwrap();
    let (n, kernel_end) = (1 << 16, Event::without_timing(&*gpu).unwrap());
    let expected = values(n);
    let dev = DeviceBuffer::from_slice(&*gpu, &expected).unwrap();
    let result = HostBuffer::<f32>::pinned(&*gpu, n).unwrap();
    long_kernel(&gpu, &s, &kernel_end);
    s.copy_to_host(&dev, &result).unwrap();
    let read = result.read().unwrap();
    // The copy ran after the kernel, so a read that waited for the copy finds it ended.
    assert!(kernel_end.is_complete().unwrap(), "read() returned before the copy into it ran");
    assert_eq!(bits(&read), bits(&expected));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn reading_lets_a_copy_from_the_buffer_go_on_and_writing_waits_for_it() {
    let gpu = gpu();
    let s = Stream::new(&*gpu, "one stream").unwrap();
    let (n, kernel_end) = (1 << 16, Event::without_timing(&*gpu).unwrap());
    let expected = values(n);
    let source = HostBuffer::pinned_from(&*gpu, &expected).unwrap();
    let dev = DeviceBuffer::<f32>::zeroed(&*gpu, n).unwrap();
    long_kernel(&gpu, &s, &kernel_end);
    s.copy_to_device(&source, &dev).unwrap();
    // The copy only reads the buffer: the host may read it beside the copy.
    let read = source.read().unwrap();
    assert!(!kernel_end.is_complete().unwrap(), "read() waited for a copy that only reads it");
    assert_eq!(bits(&read), bits(&expected));
    drop(read);
    // Writing would change what the copy reads: it waits for the copy, after the kernel.
    let mut write = source.write().unwrap();
    assert!(kernel_end.is_complete().unwrap(), "write() returned before the copy from it ran");
    write.fill(0.0);
    drop(write);
    assert_eq!(bits(&dev.to_vec().unwrap()), bits(&expected));
}
