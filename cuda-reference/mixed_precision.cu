// CUDA C++ twin of streamlab's mixed-precision lesson, to compare Rust and C++ timings in one
// run: 8 micro-batches of 4,194,304 weights; each step runs the 16-bit "layer" (8 cell steps,
// every operation rounded to the format) on the compute stream, then the FP32 master copy is
// updated with the step's gradient (lr = 2^-12) and cast back to 16 bits
// (host/src/lessons/mixed_precision.rs). Two versions, in bf16 (cuda_bf16.h) and f16
// (cuda_fp16.h):
//   one stream    layer step, then update and cast, in turn
//   side stream   update and cast of gradient i-1 on a second stream while step i computes,
//                 linked by events (step i uses the weights updated up to gradient i-2)
// Same sizes, seed (0x5EED), input generator, initial weights and launch geometry as the Rust
// lesson's defaults (the layer kernel on 50% of the blocks the GPU holds at once, grid-stride;
// update and cast one thread per element), so both programs compute the same bits.
//
//   nvcc -O3 -arch=sm_90 mixed_precision.cu -o mixed_precision && ./mixed_precision
//
// Prints `name: median_ms` per version and format (10 reps after one warm-up, cudaEvent
// timing), the per-step layer and update+cast times on one stream, then `check ...: ok|FAILED`
// lines (side stream against one stream bit for bit; 4096 sampled elements against a CPU
// reference that uses cuda_bf16.h/cuda_fp16.h's host conversions) and an FNV-1a checksum of
// the final master copy, which the Rust test `defaults_match_the_cpu_everywhere` prints too.
// Exits 1 on a CUDA error, 2 if a check fails.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common.cuh"

static const int B = 8;
static const size_t N = 4194304;
static const unsigned ITERS = 8;
static const unsigned LAYER_SHARE = 50;
static const float LR = 1.0f / 4096.0f;

// The two formats: conversions from cuda_bf16.h / cuda_fp16.h, host and device alike.
struct Bf16 {
  typedef __nv_bfloat16 T;
  static const char* name() { return "bf16"; }
  static __host__ __device__ T from(float x) { return __float2bfloat16_rn(x); }
  static __host__ __device__ float to(T b) { return __bfloat162float(b); }
};
struct F16 {
  typedef __half T;
  static const char* name() { return "f16"; }
  static __host__ __device__ T from(float x) { return __float2half_rn(x); }
  static __host__ __device__ float to(T b) { return __half2float(b); }
};

template <class H>
__host__ __device__ float rnd(float x) {
  return H::to(H::from(x));
}

// kernels_gpu::math::layer_gradient: the cell h = w * h + x, `iters` times, then (h - x) * x,
// every operation rounded to the format.
template <class H>
__host__ __device__ typename H::T layer_gradient(typename H::T weight, float x, unsigned iters) {
  float w = H::to(weight);
  x = rnd<H>(x);
  float h = x;
  for (unsigned k = 0; k < iters; ++k) h = rnd<H>(rnd<H>(w * h) + x);
  return H::from(rnd<H>(h - x) * x);
}

// FOR_EACH (common.cuh): grid-stride loops with a 64-bit index, as in the Rust kernels.
template <class H>
__global__ void layer_kernel(const typename H::T* w, const float* x, typename H::T* g, unsigned n,
                             unsigned iters) {
  FOR_EACH(i, n) g[i] = layer_gradient<H>(w[i], x[i], iters);
}

// lr is a power of two, so lr * g is exact and a fused multiply-add gives the same bits.
template <class H>
__global__ void update_kernel(float* master, const typename H::T* g, unsigned n, float lr) {
  FOR_EACH(i, n) master[i] = master[i] - lr * H::to(g[i]);
}

template <class H>
__global__ void cast_kernel(const float* master, typename H::T* w, unsigned n) {
  FOR_EACH(i, n) w[i] = H::from(master[i]);
}

static int failures = 0;
static void check(const char* fmt, const char* what, bool ok) {
  printf("check mixed-precision %s %s: %s\n", fmt, what, ok ? "ok" : "FAILED");
  if (!ok) failures++;
}

template <class H>
static void run_format(const float* h_input, const float* h_initial, float* const* h_master,
                       unsigned blocks) {
  typedef typename H::T T;
  const size_t n = N;
  const unsigned grid = (unsigned)((n + 255) / 256);
  float *d_batches, *d_initial, *d_master;
  T *w16[2], *grad[2], *h_w16[2];
  CHECK(cudaMalloc((void**)&d_batches, B * n * sizeof(float)));
  CHECK(cudaMalloc((void**)&d_initial, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&d_master, n * sizeof(float)));
  for (int s = 0; s < 2; ++s) {
    CHECK(cudaMalloc((void**)&w16[s], n * sizeof(T)));
    CHECK(cudaMalloc((void**)&grad[s], n * sizeof(T)));
    CHECK(cudaMallocHost((void**)&h_w16[s], n * sizeof(T)));
  }
  CHECK(cudaMemcpy(d_batches, h_input, B * n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_initial, h_initial, n * sizeof(float), cudaMemcpyHostToDevice));

  cudaStream_t compute, side;
  CHECK(cudaStreamCreate(&compute));
  CHECK(cudaStreamCreate(&side));
  cudaEvent_t marks[2 * B + 2], computed[2], cast_done[2];
  for (int i = 0; i < 2 * B + 2; ++i) CHECK(cudaEventCreate(&marks[i]));
  for (int s = 0; s < 2; ++s) {
    CHECK(cudaEventCreateWithFlags(&computed[s], cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&cast_done[s], cudaEventDisableTiming));
  }
  auto layer = [&](int i) {
    layer_kernel<H><<<blocks, 256, 0, compute>>>(w16[std::max(i - 1, 0) % 2], d_batches + i * n,
                                                 grad[i % 2], (unsigned)n, ITERS);
  };
  auto update_and_cast = [&](cudaStream_t s, int k) {  // gradient k, weights of step k + 2
    update_kernel<H><<<grid, 256, 0, s>>>(d_master, grad[k % 2], (unsigned)n, LR);
    cast_kernel<H><<<grid, 256, 0, s>>>(d_master, w16[(k + 1) % 2], (unsigned)n);
  };
  float layer_ms = 0.0f, update_ms = 0.0f;
  // v = 0: one stream; v = 1: side stream. Returns the GPU time in ms.
  auto run = [&](int v) -> float {
    CHECK(cudaMemcpyAsync(d_master, d_initial, n * sizeof(float), cudaMemcpyDeviceToDevice,
                          compute));
    cast_kernel<H><<<grid, 256, 0, compute>>>(d_master, w16[0], (unsigned)n);
    cudaEvent_t start = marks[0], stop = marks[2 * B + 1];
    CHECK(cudaEventRecord(start, compute));
    if (v == 0) {
      for (int i = 0; i < B; ++i) {
        layer(i);
        CHECK(cudaEventRecord(marks[2 * i + 1], compute));
        if (i >= 1) update_and_cast(compute, i - 1);
        CHECK(cudaEventRecord(marks[2 * i + 2], compute));
      }
      update_and_cast(compute, B - 1);
    } else {
      CHECK(cudaStreamWaitEvent(side, start, 0));
      for (int i = 0; i < B; ++i) {
        if (i >= 2) CHECK(cudaStreamWaitEvent(compute, cast_done[(i - 1) % 2], 0));
        layer(i);
        CHECK(cudaEventRecord(computed[i % 2], compute));
        if (i >= 1) {
          CHECK(cudaStreamWaitEvent(side, computed[(i - 1) % 2], 0));
          update_and_cast(side, i - 1);
          CHECK(cudaEventRecord(cast_done[i % 2], side));
        }
      }
      CHECK(cudaStreamWaitEvent(side, computed[(B - 1) % 2], 0));
      update_and_cast(side, B - 1);
      CHECK(cudaEventRecord(cast_done[B % 2], side));
      CHECK(cudaStreamWaitEvent(compute, cast_done[B % 2], 0));
    }
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop, compute));
    float ms = elapsed(start, stop);
    if (v == 0) {  // the parts, as the Rust lesson takes them
      float layer = 0.0f;
      for (int i = 0; i < B; ++i) layer += elapsed(marks[2 * i], marks[2 * i + 1]);
      layer_ms = layer / B;
      update_ms = (ms - layer) / B;
    }
    CHECK(cudaMemcpy(h_master[v], d_master, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_w16[v], w16[B % 2], n * sizeof(T), cudaMemcpyDeviceToHost));
    return ms;
  };
  // Interleaved, as the Rust harness: one warm-up of each, then REPS rounds of both.
  std::vector<float> times[2];
  run(0);
  run(1);
  std::vector<float> layer_parts, update_parts;
  for (int r = 0; r < REPS; ++r)
    for (int v = 0; v < 2; ++v) {
      times[v].push_back(run(v));
      if (v == 0) {
        layer_parts.push_back(layer_ms);
        update_parts.push_back(update_ms);
      }
    }
  const char* f = H::name();
  printf("mixed-precision %s one stream: %.3f\n", f, median(times[0]));
  printf("mixed-precision %s side stream: %.3f\n", f, median(times[1]));
  printf("mixed-precision %s layer step (one stream, per step): %.4f\n", f, median(layer_parts));
  printf("mixed-precision %s update + cast (one stream, per step): %.4f\n", f,
         median(update_parts));

  check(f, "master copy, side stream == one stream",
        memcmp(h_master[0], h_master[1], n * sizeof(float)) == 0);
  check(f, "16-bit weights, side stream == one stream",
        memcmp(h_w16[0], h_w16[1], n * sizeof(T)) == 0);
  // The CPU reference, with the same conversions on the host, at 4096 spread elements.
  bool same = true;
  for (size_t k = 0; k < 4096 && same; ++k) {
    size_t j = (size_t)((double)k * (n - 1) / 4095.0 + 0.5);
    float master = h_initial[j];
    T weight = H::from(master), pending = weight;
    for (int i = 0; i < B; ++i) {
      T g = layer_gradient<H>(weight, h_input[i * n + j], ITERS);
      if (i >= 1) {
        master = master - LR * H::to(pending);
        weight = H::from(master);
      }
      pending = g;
    }
    master = master - LR * H::to(pending);
    weight = H::from(master);
    same = memcmp(&master, &h_master[1][j], sizeof(float)) == 0 &&
           memcmp(&weight, &h_w16[1][j], sizeof(T)) == 0;
  }
  check(f, "GPU == CPU reference (4096 sampled elements, bit for bit)", same);
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the master copy's bytes
  const unsigned char* bytes = (const unsigned char*)h_master[1];
  for (size_t i = 0; i < n * sizeof(float); ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  printf("mixed-precision %s checksum of the master copy: %016llx\n", f, (unsigned long long)hash);

  for (int i = 0; i < 2 * B + 2; ++i) CHECK(cudaEventDestroy(marks[i]));
  for (int s = 0; s < 2; ++s) {
    CHECK(cudaEventDestroy(computed[s]));
    CHECK(cudaEventDestroy(cast_done[s]));
    CHECK(cudaFree(w16[s]));
    CHECK(cudaFree(grad[s]));
    CHECK(cudaFreeHost(h_w16[s]));
  }
  CHECK(cudaStreamDestroy(compute));
  CHECK(cudaStreamDestroy(side));
  CHECK(cudaFree(d_batches));
  CHECK(cudaFree(d_initial));
  CHECK(cudaFree(d_master));
}

int main() {
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  unsigned resident = (unsigned)prop.multiProcessorCount * (prop.maxThreadsPerMultiProcessor / 256);
  unsigned blocks = std::min(std::max(resident * LAYER_SHARE / 100, 1u), (unsigned)((N + 255) / 256));
  float *input, *initial, *master[2];
  CHECK(cudaMallocHost((void**)&input, B * N * sizeof(float)));
  CHECK(cudaMallocHost((void**)&initial, N * sizeof(float)));
  for (int v = 0; v < 2; ++v) CHECK(cudaMallocHost((void**)&master[v], N * sizeof(float)));
  random_inputs(input, B * N, SEED);
  random_inputs(initial, N, SEED ^ 0xA5A5);  // MixedPrecision::initial_weights
  for (size_t i = 0; i < N; ++i) initial[i] *= 0.125f;
  printf("mixed-precision: %d x %zu weights, %u cell steps, layer grid %u blocks of 256\n", B, N,
         ITERS, blocks);
  run_format<Bf16>(input, initial, master, blocks);
  run_format<F16>(input, initial, master, blocks);
  CHECK(cudaFreeHost(input));
  CHECK(cudaFreeHost(initial));
  for (int v = 0; v < 2; ++v) CHECK(cudaFreeHost(master[v]));
  return failures ? 2 : 0;
}
