// CUDA C++ twin of streamlab's stream-ordered-alloc lesson, to compare Rust and C++ timings in
// one run: 4 streams, 8 rounds; in each round every stream allocates a temporary buffer of
// 524,288 floats, copies its chunk in (pinned), runs compute_kernel (100 iterations), copies
// the chunk out and frees the buffer (host/src/lessons/stream_ordered_alloc.rs). Four versions:
//   cudaMalloc/cudaFree in the loop   (cudaFree waits for the whole device: streams serialize)
//   cudaMallocAsync/cudaFreeAsync     (default pool, release threshold UINT64_MAX)
//   the same, release threshold 0     (each synchronize may give the pool's memory back)
//   buffers allocated once (bound)    (no allocation in the loop at all)
// Same sizes, kernel, seed (0x5EED) and input generator as the Rust lesson's defaults; each
// pool version starts from the pool its own loop leaves behind, as in the lesson: filled with
// one freed buffer per stream at UINT64_MAX, trimmed to nothing at 0.
//
//   nvcc -O3 -arch=sm_90 stream_ordered_alloc.cu -o stream_ordered_alloc && ./stream_ordered_alloc
//
// Prints one `name: median_ms` line per version (10 reps after one warm-up, cudaEvent timing
// from stream 0, the other streams forked from and joined back into it), the pool's reserved
// memory after a run at each threshold, then `check ...: ok|FAILED` lines (every version's
// output against the cudaMalloc version's, bit for bit).
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "common.cuh"

int main() {
  CHECK(cudaSetDevice(0));
  int pools = 0;
  CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0));
  if (!pools) {
    printf("stream-ordered-alloc: not run: this device has no memory pools\n");
    return 0;
  }
  const int K = 4, B = 8, V = 4;
  const size_t n = 524288;
  const unsigned iters = 100;
  const size_t total = (size_t)K * B * n, bytes = n * sizeof(float);
  const char* names[V] = {"cudaMalloc/cudaFree in the loop", "cudaMallocAsync/cudaFreeAsync",
                          "the same, release threshold 0", "buffers allocated once (bound)"};

  float *in, *out[V], *pre[K];
  CHECK(cudaMallocHost((void**)&in, total * sizeof(float)));
  for (int v = 0; v < V; ++v) CHECK(cudaMallocHost((void**)&out[v], total * sizeof(float)));
  for (int k = 0; k < K; ++k) CHECK(cudaMalloc((void**)&pre[k], bytes));
  random_inputs(in, total, SEED);

  cudaStream_t s[K];
  for (int k = 0; k < K; ++k) CHECK(cudaStreamCreate(&s[k]));
  cudaEvent_t start, stop, forked, joined[K];
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
  for (int k = 0; k < K; ++k) CHECK(cudaEventCreateWithFlags(&joined[k], cudaEventDisableTiming));
  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t threshold_before = 0;
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold_before));
  uint64_t kept[V] = {0, 0, 0, 0};

  auto chunk = [&](int v, int k, size_t c, float* d) {
    CHECK(cudaMemcpyAsync(d, in + c * n, bytes, cudaMemcpyHostToDevice, s[k]));
    compute_kernel<<<blocks(n), 256, 0, s[k]>>>(d, (unsigned)n, iters);
    CHECK(cudaMemcpyAsync(out[v] + c * n, d, bytes, cudaMemcpyDeviceToHost, s[k]));
  };

  auto run = [&](int v) -> float {
    if (v == 1) {  // what the last run leaves in the pool at UINT64_MAX: one buffer a stream
      uint64_t keep = UINT64_MAX;
      CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
      float* held[K];
      for (int k = 0; k < K; ++k) CHECK(cudaMallocAsync((void**)&held[k], bytes, s[k]));
      for (int k = 0; k < K; ++k) CHECK(cudaFreeAsync(held[k], s[k]));
      for (int k = 0; k < K; ++k) CHECK(cudaStreamSynchronize(s[k]));
    } else if (v == 2) {  // what it leaves at 0: nothing
      uint64_t keep = 0;
      CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
      CHECK(cudaMemPoolTrimTo(pool, 0));
    }
    bracket_open(s, K, start, forked);
    for (int r = 0; r < B; ++r)
      for (int k = 0; k < K; ++k) {
        size_t c = (size_t)r * K + k;
        float* d;
        if (v == 0) {
          CHECK(cudaMalloc((void**)&d, bytes));
          chunk(v, k, c, d);
          CHECK(cudaFree(d));  // waits for the whole device
        } else if (v == 3) {
          chunk(v, k, c, pre[k]);
        } else {
          CHECK(cudaMallocAsync((void**)&d, bytes, s[k]));
          chunk(v, k, c, d);
          CHECK(cudaFreeAsync(d, s[k]));
        }
      }
    CHECK(cudaGetLastError());
    bracket_close(s, K, joined, stop);
    CHECK(cudaEventSynchronize(stop));  // at threshold 0, the pool may give memory back here
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &kept[v]));
    return elapsed(start, stop);
  };

  for (int v = 0; v < V; ++v)
    printf("stream-ordered-alloc %s: %.3f\n", names[v], median_ms([&] { return run(v); }));
  printf("stream-ordered-alloc pool kept after a run, threshold UINT64_MAX (MiB): %.1f\n",
         kept[1] / 1048576.0);
  printf("stream-ordered-alloc pool kept after a run, threshold 0 (MiB): %.1f\n",
         kept[2] / 1048576.0);
  for (int v = 1; v < V; ++v) {
    bool same = memcmp(out[0], out[v], total * sizeof(float)) == 0;
    printf("check stream-ordered-alloc %s == cudaMalloc/cudaFree: %s\n", names[v],
           same ? "ok" : "FAILED");
  }

  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold_before));
  CHECK(cudaMemPoolTrimTo(pool, 0));
  for (int k = 0; k < K; ++k) {
    CHECK(cudaEventDestroy(joined[k]));
    CHECK(cudaStreamDestroy(s[k]));
    CHECK(cudaFree(pre[k]));
  }
  CHECK(cudaEventDestroy(forked));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaFreeHost(in));
  for (int v = 0; v < V; ++v) CHECK(cudaFreeHost(out[v]));
  return 0;
}
