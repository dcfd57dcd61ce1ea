//! Which driver and runtime calls are recorded: those that bear on overlap. Every call of a
//! CUDA program would be hundreds of records per training step (attribute queries, context
//! and event queries, PyTorch's allocator polling events) and would crowd the kernels out of
//! the record limit. CUPTI names each call (`cuMemAlloc_v2`, `cudaMemcpyAsync_v3020`,
//! `cudaLaunchKernel_ptsz`): a call is kept when its name starts with one of these.
//!
//! Calls off the list are left out unwritten and uncounted: they are a choice of what to
//! record, not records lost, and `Dropped` lines count only losses. Where this CUPTI can
//! record single calls (`cuptiActivityEnableDriverApi`), only the kept ones are enabled at
//! all, so the others cost nothing; otherwise every call is recorded and the others are
//! dropped here as their buffers are read.
const KEPT: &[&str] = &[
    // Allocation and free: device, host (pinned or registered), managed, stream-ordered, and
    // the virtual-memory calls PyTorch's expandable segments use. They can synchronize the
    // device (cuMemFree, cudaFree) or stall the host.
    "cuMemAlloc",
    "cuMemFree",
    "cuMemHostAlloc",
    "cuMemHostRegister",
    "cuMemHostUnregister",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemMap",
    "cuMemUnmap",
    "cudaMalloc",
    "cudaFree",
    "cudaHostAlloc",
    "cudaHostRegister",
    "cudaHostUnregister",
    // Host synchronizations and the orderings between streams. Queries (cuStreamQuery,
    // cudaEventQuery) are left out: a polling loop makes thousands and blocks nothing.
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "cuStreamWaitEvent",
    "cuEventRecord",
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaStreamWaitEvent",
    "cudaEventRecord",
    // Launches: kernels, host functions, graphs (a launch's host-side span is what the
    // launch-latency finding measures).
    "cuLaunch",
    "cuGraphLaunch",
    "cudaLaunch",
    "cudaGraphLaunch",
    // Copies, memsets and prefetches.
    "cuMemcpy",
    "cuMemset",
    "cuMemPrefetch",
    "cudaMemcpy",
    "cudaMemset",
    "cudaMemPrefetch",
];

/// Whether a call of this name is recorded.
pub fn kept(name: &str) -> bool {
    KEPT.iter().any(|prefix| name.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_that_bear_on_overlap_are_kept_and_the_rest_are_not() {
        for name in [
            "cuMemAlloc_v2",
            "cuMemAllocAsync",
            "cuMemFreeHost",
            "cuMemHostAlloc",
            "cudaMallocHost_v3020",
            "cudaFreeAsync_v11020",
            "cuStreamSynchronize",
            "cudaStreamSynchronize_ptsz",
            "cuLaunchKernel",
            "cudaLaunchKernel_v7000",
            "cuLaunchHostFunc",
            "cuMemcpyHtoDAsync_v2",
            "cudaMemcpyAsync_v3020",
            "cudaMemsetAsync_ptsz",
            "cuEventRecordWithFlags",
            "cuGraphLaunch",
        ] {
            assert!(kept(name), "{name} should be kept");
        }
        for name in [
            "cuDriverGetVersion",
            "cuDeviceGetAttribute",
            "cuCtxGetCurrent",
            "cuStreamQuery",
            "cudaEventQuery_v3020",
            "cuMemGetInfo_v2",
            "cudaGetDevice_v3020",
            "cuModuleGetFunction",
        ] {
            assert!(!kept(name), "{name} should be left out");
        }
    }
}
