// What the CUDA C++ twins in this folder share, each piece once, beside the Rust code it mirrors.
// Every twin includes it as "common.cuh". gpu-run.sh builds only *.cu files, so this header is
// no program of its own; kernels.cu does not use it (it is built alone, as the cubin of exactly
// the kernels the Rust host loads).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

// Any CUDA error ends the program with exit code 1 and one line on stderr: file, line, the
// call, the error's name and description.
#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t check_err_ = (call);                                                   \
    if (check_err_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,          \
                   cudaGetErrorName(check_err_), cudaGetErrorString(check_err_));      \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

// The harness's defaults (host/src/lab/harness/common.rs, REPS and SEED): 10 timed repeats
// (after one warm-up), input seed 0x5EED.
static const int REPS = 10;
static const uint64_t SEED = 0x5EED;

// kernels-gpu for_each_index: a grid-stride loop with a 64-bit index, so any grid covers any
// n, and i + stride cannot wrap around near n = 2^32.
#define FOR_EACH(i, n)                                                                 \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
       i += (size_t)gridDim.x * blockDim.x)

// kernels-gpu compute_slice: x = sin(x) * cos(x), `iters` times, on each of data[0 .. n). Sin
// and cos come from one sincosf, as the Rust kernel computes them (same bits as sinf * cosf),
// and the loop is unrolled 16 times, as kernels_gpu::math::compute_element unrolls it (UNROLL),
// so a Rust-vs-C++ comparison compares compilers, not unrolls.
__device__ __forceinline__ void compute_slice(float* data, unsigned n, unsigned iters) {
  FOR_EACH(i, n) {
    float x = data[i];
#pragma unroll 16
    for (unsigned k = 0; k < iters; ++k) {
      float s, c;
      sincosf(x, &s, &c);
      x = s * c;
    }
    data[i] = x;
  }
}

// kernels-gpu compute_kernel(data, n, iters).
__global__ void compute_kernel(float* data, unsigned n, unsigned iters) {
  compute_slice(data, n, iters);
}

// kernels-gpu chunk_kernel(data, offset, len, iters): the same work on data[offset ..
// offset + len) (what Gpu::compute_chunk launches).
__global__ void chunk_kernel(float* data, unsigned offset, unsigned len, unsigned iters) {
  compute_slice(data + offset, len, iters);
}

// runtime/op.rs LaunchConfig::for_elements: one thread per element, 256 a block, at least one
// block.
static inline unsigned blocks(size_t n) {
  return (unsigned)std::max<size_t>((n + 255) / 256, 1);
}

// lab/data.rs random_inputs: xorshift64*, 24 bits, mapped to [-pi, pi).
static inline void random_inputs(float* out, size_t n, uint64_t seed) {
  const float pi = 3.14159265358979323846f;
  uint64_t state = (seed * 0x9E3779B97F4A7C15ull) | 1ull;
  for (size_t i = 0; i < n; ++i) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    uint64_t bits = (state * 0x2545F4914F6CDD1Dull) >> 40;
    out[i] = ((float)bits / (float)(1u << 24)) * 2.0f * pi - pi;
  }
}

// lab/data.rs chunk_ranges: k contiguous ranges covering [0, n), the first n % k one element
// longer.
static inline void chunk_ranges(size_t n, size_t k, std::vector<size_t>& off,
                                std::vector<size_t>& len) {
  off.clear();
  len.clear();
  const size_t parts = std::max<size_t>(k, 1);
  size_t base = n / parts, extra = n % parts, start = 0;
  for (size_t i = 0; i < k; ++i) {
    size_t l = base + (i < extra ? 1 : 0);
    off.push_back(start);
    len.push_back(l);
    start += l;
  }
}

// lab/stats.rs Stats::of's median: the middle value, or the mean of the two middle ones.
template <class T>
static T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One warm-up, then the median of REPS runs; each run returns its own event-timed ms.
template <class F>
static float median_ms(F run) {
  run();
  std::vector<float> times;
  for (int r = 0; r < REPS; ++r) times.push_back(run());
  return median(times);
}

// runtime/stream.rs Event::elapsed_ms, after waiting for `stop`: milliseconds between two
// recorded events. Either event may belong to another GPU than the current one.
static inline float elapsed(cudaEvent_t start, cudaEvent_t stop) {
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

// lab/pipeline.rs Bracket, on one GPU, in two halves around the work. Open: `start` on s[0],
// then the other streams of s[0 .. k) wait for `fork`, recorded right after it, so no stream's
// work begins before `start`.
static inline void bracket_open(const cudaStream_t* s, int k, cudaEvent_t start,
                                cudaEvent_t fork) {
  CHECK(cudaEventRecord(start, s[0]));
  CHECK(cudaEventRecord(fork, s[0]));
  for (int i = 1; i < k; ++i) CHECK(cudaStreamWaitEvent(s[i], fork, 0));
}

// Close: each other stream records joins[i] and s[0] waits for it, then `stop` on s[0] comes
// after every stream's work (joins[0] is not used).
static inline void bracket_close(const cudaStream_t* s, int k, const cudaEvent_t* joins,
                                 cudaEvent_t stop) {
  for (int i = 1; i < k; ++i) {
    CHECK(cudaEventRecord(joins[i], s[i]));
    CHECK(cudaStreamWaitEvent(s[0], joins[i], 0));
  }
  CHECK(cudaEventRecord(stop, s[0]));
}
