//! Names as people write them, from what CUPTI records: a kernel's C++ name demangled and
//! shortened, a call's name without its version suffix, what a call does, and whether a
//! kernel is NCCL's.
use crate::trace::read::model::CallKind;

/// What a driver or runtime call does, for the findings, from its name (`cuMemAlloc_v2`,
/// `cudaLaunchKernel_ptsz`). The stream-ordered `…Async` allocations are not `Alloc`/`Free`:
/// they do not synchronize the device.
pub fn call_kind(name: &str) -> CallKind {
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
    let ordered = name.contains("Async");
    if starts(&["cuMemAlloc", "cudaMalloc", "cuMemHostAlloc", "cudaHostAlloc"]) && !ordered {
        CallKind::Alloc
    } else if starts(&["cuMemFree", "cudaFree"]) && !ordered {
        CallKind::Free
    } else if starts(&["cuLaunch", "cudaLaunch", "cuGraphLaunch", "cudaGraphLaunch"]) {
        CallKind::Launch
    } else if starts(&["cuMemcpy", "cudaMemcpy", "cuMemset", "cudaMemset"]) {
        CallKind::Copy
    } else if name.contains("Synchronize") {
        CallKind::Sync
    } else {
        CallKind::Other
    }
}

/// A kernel's name as people write it: a C++ (Itanium) mangled name demangled, its parameter
/// list and template arguments left out (`at::native::vectorized_elementwise_kernel`); any
/// other name as it is (Rust's `#[no_mangle]` kernels, `extern "C"` ones).
pub fn kernel_name(raw: &str) -> String {
    let Ok(symbol) = cpp_demangle::Symbol::new(raw) else {
        return raw.to_string();
    };
    let options = cpp_demangle::DemangleOptions::new().no_params().no_return_type();
    match symbol.demangle(&options) {
        Ok(full) => without_template_arguments(&full),
        Err(_) => raw.to_string(),
    }
}

/// `a::b<c<d>>::e<f>` -> `a::b::e` (every `<…>`, nested ones included, left out).
fn without_template_arguments(name: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// A driver or runtime call's name without CUPTI's version suffix (`cudaMalloc_v3020` ->
/// `cudaMalloc`, `cuMemAlloc_v2` -> `cuMemAlloc`).
pub fn call_name(raw: &str) -> &str {
    match raw.rsplit_once("_v") {
        Some((name, version))
            if !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()) =>
        {
            name
        }
        _ => raw,
    }
}

/// Whether a kernel is one of NCCL's (a collective's work).
pub fn is_nccl_kernel(name: &str) -> bool {
    name.starts_with("ncclDevKernel") || name.starts_with("ncclKernel")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_and_call_names_read_as_people_write_them() {
        assert_eq!(kernel_name("_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_16tanh_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE0_clEvENKUlvE0_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_"),
            "at::native::vectorized_elementwise_kernel"
        );
        assert_eq!(kernel_name("_Z12chunk_kernelPfjjj"), "chunk_kernel");
        // Not mangled (Rust's #[no_mangle] kernels, extern "C" ones): as it is.
        assert_eq!(kernel_name("compute_kernel"), "compute_kernel");
        assert_eq!(
            kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        );
        assert_eq!(call_name("cudaMalloc_v3020"), "cudaMalloc");
        assert_eq!(call_name("cuMemAlloc_v2"), "cuMemAlloc");
        assert_eq!(call_name("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(call_name("cuMemcpyHtoDAsync_v2"), "cuMemcpyHtoDAsync");
        assert_eq!(call_name("cudaStreamSynchronize_v"), "cudaStreamSynchronize_v");
    }

    #[test]
    fn calls_are_sorted_by_what_they_do() {
        for (name, kind) in [
            ("cuMemAlloc_v2", CallKind::Alloc),
            ("cudaMalloc", CallKind::Alloc),
            ("cudaMallocHost", CallKind::Alloc),
            ("cudaHostAlloc", CallKind::Alloc),
            ("cuMemHostAlloc", CallKind::Alloc),
            ("cuMemAllocAsync", CallKind::Other),
            ("cudaMallocAsync_ptsz", CallKind::Other),
            ("cuMemFree_v2", CallKind::Free),
            ("cudaFree", CallKind::Free),
            ("cudaFreeAsync", CallKind::Other),
            ("cuLaunchKernel", CallKind::Launch),
            ("cudaLaunchKernel_ptsz", CallKind::Launch),
            ("cudaGraphLaunch", CallKind::Launch),
            ("cuMemcpyHtoDAsync_v2", CallKind::Copy),
            ("cudaMemsetAsync", CallKind::Copy),
            ("cudaStreamSynchronize", CallKind::Sync),
            ("cuCtxSynchronize", CallKind::Sync),
            ("cuStreamWaitEvent", CallKind::Other),
            ("cuMemPrefetchAsync", CallKind::Other),
        ] {
            assert_eq!(call_kind(name), kind, "{name}");
        }
        assert!(is_nccl_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
        assert!(is_nccl_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"));
        assert!(!is_nccl_kernel("my_ncclDevKernel"));
    }
}
