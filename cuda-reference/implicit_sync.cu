// CUDA C++ twin of streamlab's implicit-sync lesson (host/src/lessons/implicit_sync/): while a
// 20,000 us kernel runs on stream A, the host makes one call, and asks stream A right after it
// returns whether the kernel still runs (cudaStreamQuery). Still running: the call did not
// wait. The lesson calls the driver API (cuMemAlloc, ...); this twin calls the runtime API the
// Programming Guide's list names, so the two together say whether the answer depends on which.
// Streams a and b from cudaStreamCreate (blocking), 1,048,576 floats per allocation and for
// the pageable copy, as the lesson's defaults.
//
//   nvcc -O3 -arch=sm_90 implicit_sync.cu -o implicit_sync && ./implicit_sync
//
// Prints, per call, "implicit-sync <call>: <median host ms in the call>, waited in <k> of 10"
// (10 repeats after one warm-up); then the GPU's order for the two calls whose work lands on
// the legacy default stream (the kernels' %globaltimer stamps), and `check ...: ok|FAILED|not
// asserted` for each call: asserted where CUDA documents the answer (cudaMallocAsync, the
// pageable cudaMemcpyAsync, cudaMemset and a legacy launch return while A runs;
// cudaDeviceSynchronize waits), "not asserted" for cudaMalloc, cudaFree and cudaHostAlloc,
// which CUDA says may synchronize. Exits 1 on a CUDA error, 2 if an asserted check fails.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common.cuh"

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// kernels-gpu sleep_stamped_kernel: spins `cycles` ticks, stamps[0] and stamps[1] its GPU start
// and end (ns).
__global__ void sleep_stamped_kernel(unsigned long long cycles, unsigned long long* stamps) {
  stamps[0] = globaltimer();
  long long start = clock64();
  while ((unsigned long long)(clock64() - start) < cycles) {}
  stamps[1] = globaltimer();
}

enum Call { MALLOC, MALLOC_ASYNC, FREE, PAGEABLE_COPY, MEMSET, HOST_ALLOC, DEVICE_SYNC, LEGACY };
static const int kCalls = 8;
static const char* kNames[kCalls] = {"cudaMalloc",
                                     "cudaMallocAsync on stream B",
                                     "cudaFree",
                                     "pageable cudaMemcpyAsync on stream B",
                                     "cudaMemset",
                                     "cudaHostAlloc",
                                     "cudaDeviceSynchronize",
                                     "kernel launch on the legacy default stream"};
// 1: CUDA documents that it waits; 0: that it does not; -1: it may (not asserted).
static const int kPromise[kCalls] = {-1, 0, -1, 0, 0, -1, 1, 0};

// Whether stream `s` still has work running (cudaStreamQuery says not ready, which is no
// error: cleared from the last-error state in case it was kept there).
static bool still_running(cudaStream_t s) {
  cudaError_t e = cudaStreamQuery(s);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return true;
  }
  CHECK(e);
  return false;
}

static double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int main() {
  CHECK(cudaSetDevice(0));
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double sleep_us = 20000.0;
  const unsigned long long long_cycles = (unsigned long long)(sleep_us * clock_khz / 1000.0 + 0.5);
  const unsigned long long short_cycles = long_cycles / 10;
  const size_t n = 1 << 20, bytes = n * sizeof(float);

  cudaStream_t a, b;
  CHECK(cudaStreamCreate(&a));
  CHECK(cudaStreamCreate(&b));
  unsigned long long* stamps;  // [0, 1]: A's kernel; [2, 3]: the legacy kernel
  CHECK(cudaMalloc((void**)&stamps, 4 * sizeof(unsigned long long)));
  CHECK(cudaMemset(stamps, 0, 4 * sizeof(unsigned long long)));
  CHECK(cudaDeviceSynchronize());
  std::vector<float> pageable(n);
  random_inputs(pageable.data(), n, SEED);
  float* copied;
  CHECK(cudaMalloc((void**)&copied, bytes));

  int waited[kCalls] = {0};
  bool asked_every_time[kCalls];
  std::vector<double> ms[kCalls];
  bool memset_after = true, legacy_after = true;
  double legacy_gap_min_us = 1e300;

  for (int rep = 0; rep <= REPS; ++rep) {  // repeat 0 is the warm-up
    for (int c = 0; c < kCalls; ++c) {
      if (rep == 0) asked_every_time[c] = true;
      float* to_free = nullptr;
      if (c == FREE) CHECK(cudaMalloc((void**)&to_free, bytes));
      if (c == LEGACY) {
        CHECK(cudaMemset(stamps, 0, 4 * sizeof(unsigned long long)));
        CHECK(cudaDeviceSynchronize());
      }
      sleep_stamped_kernel<<<1, 1, 0, a>>>(long_cycles, stamps);
      CHECK(cudaGetLastError());
      bool asked = still_running(a);
      float* kept_device = nullptr;
      float* kept_host = nullptr;
      double t0 = now_ms();
      switch (c) {
        case MALLOC: CHECK(cudaMalloc((void**)&kept_device, bytes)); break;
        case MALLOC_ASYNC: CHECK(cudaMallocAsync((void**)&kept_device, bytes, b)); break;
        case FREE: CHECK(cudaFree(to_free)); break;
        case PAGEABLE_COPY:
          CHECK(cudaMemcpyAsync(copied, pageable.data(), bytes, cudaMemcpyHostToDevice, b));
          break;
        case MEMSET: CHECK(cudaMemset(stamps, 0, 2 * sizeof(unsigned long long))); break;
        case HOST_ALLOC: CHECK(cudaHostAlloc((void**)&kept_host, bytes, cudaHostAllocPortable)); break;
        case DEVICE_SYNC: CHECK(cudaDeviceSynchronize()); break;
        case LEGACY: sleep_stamped_kernel<<<1, 1>>>(short_cycles, stamps + 2); break;
      }
      double t1 = now_ms();
      CHECK(cudaGetLastError());
      bool ended = !still_running(a);
      CHECK(cudaDeviceSynchronize());
      if (kept_device && c == MALLOC) CHECK(cudaFree(kept_device));
      if (kept_device && c == MALLOC_ASYNC) CHECK(cudaFreeAsync(kept_device, b));
      if (kept_host) CHECK(cudaFreeHost(kept_host));
      if (rep == 0) continue;
      asked_every_time[c] = asked_every_time[c] && asked;
      waited[c] += ended ? 1 : 0;
      ms[c].push_back(t1 - t0);
      unsigned long long s[4];
      CHECK(cudaMemcpy(s, stamps, sizeof(s), cudaMemcpyDeviceToHost));
      if (c == MEMSET) memset_after = memset_after && s[0] == 0 && s[1] == 0;
      if (c == LEGACY) {
        double gap_us = ((double)s[2] - (double)s[1]) / 1e3;
        legacy_after = legacy_after && s[2] >= s[1];
        legacy_gap_min_us = gap_us < legacy_gap_min_us ? gap_us : legacy_gap_min_us;
      }
    }
  }

  bool failed = false;
  for (int c = 0; c < kCalls; ++c)
    printf("implicit-sync %s: %.3f, waited in %d of %d\n", kNames[c], median(ms[c]), waited[c],
           REPS);
  printf("implicit-sync legacy kernel start after A's end, min (us): %.1f\n", legacy_gap_min_us);
  for (int c = 0; c < kCalls; ++c) {
    const char* verdict;
    if (kPromise[c] < 0 || !asked_every_time[c]) {
      verdict = "not asserted";
    } else {
      bool holds = kPromise[c] == 1 ? waited[c] == REPS : waited[c] == 0;
      verdict = holds ? "ok" : "FAILED";
      failed = failed || !holds;
    }
    const char* claim = kPromise[c] == 1   ? "waited for A's kernel"
                        : kPromise[c] == 0 ? "returned while A's kernel ran"
                                           : "waited or not (measured)";
    printf("check implicit-sync %s %s: %s\n", kNames[c], claim, verdict);
  }
  printf("check implicit-sync cudaMemset's work ran after A's kernel: %s\n",
         memset_after ? "ok" : "FAILED");
  printf("check implicit-sync the legacy kernel started after A's ended: %s\n",
         legacy_after ? "ok" : "FAILED");
  failed = failed || !memset_after || !legacy_after;

  CHECK(cudaFree(copied));
  CHECK(cudaFree(stamps));
  CHECK(cudaStreamDestroy(a));
  CHECK(cudaStreamDestroy(b));
  return failed ? 2 : 0;
}
