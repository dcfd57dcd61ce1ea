// CUDA C++ twin of streamlab's unified-memory lesson, to compare Rust and C++ timings in one
// run (host/src/lessons/unified_memory.rs): 16 chunks of 524,288 floats on 4 streams,
// compute_kernel with 50 iterations on each chunk. Four versions:
//   managed, migrated on demand       (kernels fault the pages in, the host's read faults them back)
//   managed + cudaMemPrefetchAsync    (each chunk to the GPU before its kernel, back after it)
//   explicit pinned copies (bound)    (cudaMemcpyAsync in, kernel, cudaMemcpyAsync out)
//   managed + cudaMemAdvise           (preferred location host, accessed by the GPU: no migration)
// Each managed version has its own buffer (advice stays with the memory); before each run the
// host writes the input into it (untimed), so the pages start on the host. A run is timed on
// the host's clock from the first enqueue until the host has read every result (memcpy into
// one preallocated buffer); its GPU part by events, from stream 0 with the other streams
// forked from and joined back into it. Same sizes, kernel, seed (0x5EED) and input generator
// as the Rust lesson's defaults. Managed memory is allocated only after cudaMemGetInfo says it
// fits (with 256 MiB to spare), as the lesson does.
//
//   nvcc -O3 -arch=sm_90 unified_memory.cu -o unified_memory && ./unified_memory
//
// Prints one `name: median_ms` line per version (10 reps after one warm-up), then its GPU and
// host-read medians, then `check ...: ok|FAILED` lines (each managed version's output against
// the explicit copies', bit for bit).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common.cuh"

// The location API (cudaMemLocation) is the only one from CUDA 13; 12.x has both.
#if CUDART_VERSION >= 13000
static cudaMemLocation where(bool device) {
  cudaMemLocation at = {};
  at.type = device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  at.id = 0;
  return at;
}
#endif

static void prefetch(float* p, size_t bytes, bool to_device, cudaStream_t s) {
#if CUDART_VERSION >= 13000
  CHECK(cudaMemPrefetchAsync(p, bytes, where(to_device), 0, s));
#else
  CHECK(cudaMemPrefetchAsync(p, bytes, to_device ? 0 : cudaCpuDeviceId, s));
#endif
}

static void advise(float* p, size_t bytes, cudaMemoryAdvise advice, bool device) {
#if CUDART_VERSION >= 13000
  CHECK(cudaMemAdvise(p, bytes, advice, where(device)));
#else
  CHECK(cudaMemAdvise(p, bytes, advice, device ? 0 : cudaCpuDeviceId));
#endif
}

static double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int main() {
  CHECK(cudaSetDevice(0));
  int concurrent = 0;
  CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, 0));
  if (!concurrent) {
    printf("unified-memory: not run: this device cannot migrate managed memory on demand\n");
    return 0;
  }
  const int K = 4, C = 16, V = 4, M = 3;
  const size_t n = 524288, total = (size_t)C * n, bytes = total * sizeof(float);
  const unsigned iters = 50;
  const char* names[V] = {"managed, migrated on demand", "managed + cudaMemPrefetchAsync",
                          "explicit pinned copies (bound)", "managed + cudaMemAdvise"};
  const int slot[V] = {0, 1, -1, 2};  // each version's managed buffer

  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if ((M + 1) * bytes + (256u << 20) > free_bytes) {
    printf("unified-memory: refused: needs %.1f MiB of device memory, %.1f MiB is free\n",
           (M + 1) * bytes / 1048576.0, free_bytes / 1048576.0);
    return 1;
  }
  float *in, *out, *dev, *managed[M];
  CHECK(cudaMallocHost((void**)&in, bytes));
  CHECK(cudaMallocHost((void**)&out, bytes));
  CHECK(cudaMalloc((void**)&dev, bytes));
  for (int i = 0; i < M; ++i) {
    CHECK(cudaMallocManaged((void**)&managed[i], bytes));
    memset(managed[i], 0, bytes);
  }
  advise(managed[2], bytes, cudaMemAdviseSetPreferredLocation, false);
  advise(managed[2], bytes, cudaMemAdviseSetAccessedBy, true);
  random_inputs(in, total, SEED);
  std::vector<float> read_back(total), results[M];

  cudaStream_t s[K];
  for (int k = 0; k < K; ++k) CHECK(cudaStreamCreate(&s[k]));
  cudaEvent_t start, stop, forked, joined[K];
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
  for (int k = 0; k < K; ++k) CHECK(cudaEventCreateWithFlags(&joined[k], cudaEventDisableTiming));

  // One run of version v: returns {total ms, GPU ms, host read ms}.
  auto run = [&](int v) -> std::vector<double> {
    float* m = slot[v] >= 0 ? managed[slot[v]] : nullptr;
    if (m) memcpy(m, in, bytes);  // the input starts on the host (untimed)
    auto t = std::chrono::steady_clock::now();
    bracket_open(s, K, start, forked);
    for (int c = 0; c < C; ++c) {
      cudaStream_t q = s[c % K];
      size_t off = (size_t)c * n, chunk = n * sizeof(float);
      if (!m) {
        CHECK(cudaMemcpyAsync(dev + off, in + off, chunk, cudaMemcpyHostToDevice, q));
        compute_kernel<<<blocks(n), 256, 0, q>>>(dev + off, (unsigned)n, iters);
        CHECK(cudaMemcpyAsync(out + off, dev + off, chunk, cudaMemcpyDeviceToHost, q));
      } else if (v == 1) {
        prefetch(m + off, chunk, true, q);
        compute_kernel<<<blocks(n), 256, 0, q>>>(m + off, (unsigned)n, iters);
        prefetch(m + off, chunk, false, q);
      } else {
        compute_kernel<<<blocks(n), 256, 0, q>>>(m + off, (unsigned)n, iters);
      }
    }
    CHECK(cudaGetLastError());
    bracket_close(s, K, joined, stop);
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaDeviceSynchronize());
    auto r = std::chrono::steady_clock::now();
    memcpy(read_back.data(), m ? m : out, bytes);  // the host reads every result
    double read_ms = ms_since(r), total_ms = ms_since(t);
    return {total_ms, (double)elapsed(start, stop), read_ms};
  };

  for (int v = 0; v < V; ++v) {
    run(v);
    std::vector<double> t, g, h;
    for (int r = 0; r < REPS; ++r) {
      std::vector<double> x = run(v);
      t.push_back(x[0]);
      g.push_back(x[1]);
      h.push_back(x[2]);
    }
    printf("unified-memory %s: %.3f\n", names[v], median(t));
    printf("unified-memory %s, GPU (ms): %.3f\n", names[v], median(g));
    printf("unified-memory %s, host read (ms): %.3f\n", names[v], median(h));
    if (slot[v] >= 0) results[slot[v]] = read_back;
  }
  for (int v = 0; v < V; ++v) {
    if (slot[v] < 0) continue;
    bool same = memcmp(results[slot[v]].data(), out, bytes) == 0;
    printf("check unified-memory %s == explicit copies: %s\n", names[v], same ? "ok" : "FAILED");
  }

  for (int k = 0; k < K; ++k) {
    CHECK(cudaEventDestroy(joined[k]));
    CHECK(cudaStreamDestroy(s[k]));
  }
  CHECK(cudaEventDestroy(forked));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  for (int i = 0; i < M; ++i) CHECK(cudaFree(managed[i]));
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(in));
  CHECK(cudaFreeHost(out));
  return 0;
}
