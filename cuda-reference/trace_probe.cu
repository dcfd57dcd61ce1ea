// A probe for `streamlab trace` and its injected recorder (inject/): one of each thing the
// recorder records, in a known order, each phase inside an NVTX range of its name.
//   nvcc -O2 -arch=sm_90 trace_probe.cu -o trace_probe
// NVTX 3 is header-only (CUDA 12 and 13 ship no libnvToolsExt): it opens the tool named by
// NVTX_INJECTION64_PATH with dlopen, which glibc 2.34 and later hold in libc; with an older
// glibc add -ldl.
//   ./trace_probe         every phase, then exit 0 (prints one line per phase)
//   ./trace_probe abort   abort() after the "pinned" phase, once a periodic flush has passed
//   ./trace_probe segv    a write through a null pointer right after the "pinned" phase,
//                         before any periodic flush: what is recorded, the crash handler wrote
// What a trace of it shows (scripts/inject-check.sh checks it):
//   streams "copy" (non-blocking) and "compute" (non-blocking, greatest priority), named
//   through NVTX; an instant marker "probe start"; ranges "pageable", "pinned", "compute",
//   "alloc", "default", "readback"; a pageable and a pinned host-to-device copy of 64 MiB on
//   "copy", each followed by a stream synchronization; a kernel on "compute"; cudaMalloc and
//   cudaFree between two kernels; a kernel on the legacy default stream; a memset; an event
//   synchronization; a device-to-host copy to pinned memory; a device synchronization.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <unistd.h>

#include <cstring>

#include "common.cuh"

static void phase(const char* name) {
  nvtxRangePushA(name);
  std::printf("trace_probe: %s\n", name);
  std::fflush(stdout);
}

static void phase_end() { nvtxRangePop(); }

int main(int argc, char** argv) {
  const bool crash = argc > 1 && std::strcmp(argv[1], "abort") == 0;
  const bool segv = argc > 1 && std::strcmp(argv[1], "segv") == 0;
  const size_t n = 16u << 20;  // 64 MiB of floats
  const size_t bytes = n * sizeof(float);
  const unsigned iters = 20;

  cudaStream_t copy, compute;
  int least, greatest;
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // After the first CUDA call: the recorder starts at cuInit, so an NVTX mark before it is lost.
  nvtxMarkA("probe start");
  CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithPriority(&compute, cudaStreamNonBlocking, greatest));
  nvtxNameCudaStreamA(copy, "copy");
  nvtxNameCudaStreamA(compute, "compute");

  float* pageable = (float*)std::malloc(bytes);
  if (!pageable) return 1;
  random_inputs(pageable, n, SEED);
  float *pinned, *d;
  CHECK(cudaMallocHost(&pinned, bytes));
  std::memcpy(pinned, pageable, bytes);
  CHECK(cudaMalloc(&d, bytes));

  phase("pageable");
  CHECK(cudaMemcpyAsync(d, pageable, bytes, cudaMemcpyHostToDevice, copy));
  CHECK(cudaStreamSynchronize(copy));
  phase_end();

  phase("pinned");
  CHECK(cudaMemcpyAsync(d, pinned, bytes, cudaMemcpyHostToDevice, copy));
  CHECK(cudaStreamSynchronize(copy));
  phase_end();

  if (segv) {
    std::printf("trace_probe: segv\n");
    std::fflush(stdout);
    *(volatile int*)nullptr = 1;
  }

  if (crash) {
    // Long enough for periodic flushes (200 ms by default) to write the records above.
    sleep(1);
    std::printf("trace_probe: abort\n");
    std::fflush(stdout);
    std::abort();
  }

  phase("compute");
  compute_kernel<<<blocks(n), 256, 0, compute>>>(d, (unsigned)n, iters);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(compute));
  phase_end();

  phase("alloc");
  compute_kernel<<<blocks(n), 256, 0, compute>>>(d, (unsigned)n, iters);
  float* scratch;
  CHECK(cudaMalloc(&scratch, bytes));
  CHECK(cudaFree(scratch));
  compute_kernel<<<blocks(n), 256, 0, compute>>>(d, (unsigned)n, iters);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(compute));
  phase_end();

  phase("default");
  compute_kernel<<<blocks(n), 256>>>(d, (unsigned)n, iters);
  CHECK(cudaGetLastError());
  CHECK(cudaMemsetAsync(d, 0, bytes, 0));
  cudaEvent_t done;
  CHECK(cudaEventCreate(&done));
  CHECK(cudaEventRecord(done, 0));
  CHECK(cudaEventSynchronize(done));
  phase_end();

  phase("readback");
  CHECK(cudaMemcpyAsync(pinned, d, bytes, cudaMemcpyDeviceToHost, copy));
  CHECK(cudaDeviceSynchronize());
  phase_end();
  // The memset zeroed d: every element read back is 0.
  size_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) nonzero += pinned[i] != 0.0f;
  std::printf("trace_probe: done, %zu nonzero elements read back (0 expected)\n", nonzero);

  CHECK(cudaEventDestroy(done));
  CHECK(cudaFree(d));
  CHECK(cudaFreeHost(pinned));
  std::free(pageable);
  CHECK(cudaStreamDestroy(copy));
  CHECK(cudaStreamDestroy(compute));
  return nonzero == 0 ? 0 : 1;
}
