// CUDA C++ twins of two streamlab technique demos, to compare with the Rust demos' figures
// in the same run on the same GPU:
//   - sleep-streams, small grid: copy in, 1-block SleepKernel, copy out, 4 times on one
//     stream vs once on each of 4 streams (1,048,576 floats split in 4);
//   - basics: cudaMemcpy + kernel + cudaMemcpy (blocking, legacy default stream) vs the same
//     with cudaMemcpyAsync on one stream; pinned host memory in both, 1,048,576 floats,
//     1,000 iterations of x = sin(x) * cos(x) (common.cuh's compute_kernel).
//
//   nvcc -O3 -arch=sm_90 techniques.cu -o techniques
//   ./techniques [sleep_cycles]
//
// sleep_cycles defaults to sleep-streams' default: 2,000 us at the rated SM clock
// (cudaDevAttrClockRate), the formula of streamlab's Gpu::cycles_for_micros.
// Prints one line per figure, "name: median_ms": the median of 10 repeats after one warm-up,
// GPU time from cudaEvent pairs. Exits 1 on a CUDA error, 2 if a result check fails.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common.cuh"

__global__ void sleep_kernel(unsigned long long cycles) {
  long long start = clock64();
  while ((unsigned long long)(clock64() - start) < cycles) {}
}

static const int kStreams = 4;
static const size_t kElements = 1 << 20;
static const unsigned kIters = 1000;
static const double kSleepMicros = 2000.0;

// One warm-up of `once` (which returns its GPU ms), then REPS timed runs; prints the median.
template <typename F>
static void report(const char* name, F once) {
  std::printf("%s: %.3f\n", name, median_ms(once));
}

static void verify(const char* what, const float* a, const float* b, size_t n) {
  if (std::memcmp(a, b, n * sizeof(float)) != 0) {
    std::fprintf(stderr, "verification failed: %s\n", what);
    std::exit(2);
  }
}

int main(int argc, char** argv) {
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  unsigned long long cycles =
      argc > 1 ? std::strtoull(argv[1], nullptr, 10)
               : (unsigned long long)(kSleepMicros * clock_khz / 1000.0 + 0.5);
  std::fprintf(stderr, "sleep cycles: %llu, elements: %zu, iters: %u\n", cycles, kElements,
               kIters);

  const size_t n = kElements;
  const size_t bytes = n * sizeof(float);
  const size_t chunk = n / kStreams;  // 2^20 / 4: exact
  const size_t chunk_bytes = chunk * sizeof(float);
  float *h_in, *h_out_one, *h_out_multi, *d_one, *d_multi;
  CHECK(cudaMallocHost(&h_in, bytes));
  CHECK(cudaMallocHost(&h_out_one, bytes));
  CHECK(cudaMallocHost(&h_out_multi, bytes));
  CHECK(cudaMalloc(&d_one, bytes));
  CHECK(cudaMalloc(&d_multi, bytes));
  random_inputs(h_in, n, SEED);  // floats in [-pi, pi)

  cudaStream_t s[kStreams];
  cudaEvent_t start, stop, fork, join[kStreams];
  for (int i = 0; i < kStreams; ++i) {
    CHECK(cudaStreamCreate(&s[i]));
    CHECK(cudaEventCreateWithFlags(&join[i], cudaEventDisableTiming));
  }
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));

  // sleep-streams, small grid: launch i with its copies on stream 0, then on stream i.
  report("sleep_small_one_stream", [&]() {
    CHECK(cudaEventRecord(start, s[0]));
    for (int i = 0; i < kStreams; ++i) {
      size_t off = i * chunk;
      CHECK(cudaMemcpyAsync(d_one + off, h_in + off, chunk_bytes, cudaMemcpyHostToDevice, s[0]));
      sleep_kernel<<<1, 1, 0, s[0]>>>(cycles);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpyAsync(h_out_one + off, d_one + off, chunk_bytes, cudaMemcpyDeviceToHost,
                            s[0]));
    }
    CHECK(cudaEventRecord(stop, s[0]));
    return elapsed(start, stop);
  });
  report("sleep_small_4_streams", [&]() {
    bracket_open(s, kStreams, start, fork);
    for (int i = 0; i < kStreams; ++i) {
      size_t off = i * chunk;
      CHECK(cudaMemcpyAsync(d_multi + off, h_in + off, chunk_bytes, cudaMemcpyHostToDevice,
                            s[i]));
      sleep_kernel<<<1, 1, 0, s[i]>>>(cycles);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpyAsync(h_out_multi + off, d_multi + off, chunk_bytes,
                            cudaMemcpyDeviceToHost, s[i]));
    }
    bracket_close(s, kStreams, join, stop);
    return elapsed(start, stop);
  });
  verify("sleep one-stream output vs input", h_out_one, h_in, n);
  verify("sleep 4-stream output vs input", h_out_multi, h_in, n);

  // basics: blocking cudaMemcpy on the legacy default stream vs async on one stream.
  const unsigned grid = blocks(n);
  report("basics_blocking", [&]() {
    CHECK(cudaEventRecord(start, 0));
    CHECK(cudaMemcpy(d_one, h_in, bytes, cudaMemcpyHostToDevice));
    compute_kernel<<<grid, 256>>>(d_one, (unsigned)n, kIters);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(h_out_one, d_one, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaEventRecord(stop, 0));
    return elapsed(start, stop);
  });
  report("basics_async", [&]() {
    CHECK(cudaEventRecord(start, s[0]));
    CHECK(cudaMemcpyAsync(d_multi, h_in, bytes, cudaMemcpyHostToDevice, s[0]));
    compute_kernel<<<grid, 256, 0, s[0]>>>(d_multi, (unsigned)n, kIters);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(h_out_multi, d_multi, bytes, cudaMemcpyDeviceToHost, s[0]));
    CHECK(cudaEventRecord(stop, s[0]));
    return elapsed(start, stop);
  });
  verify("basics async vs blocking output", h_out_multi, h_out_one, n);
  if (h_out_one[0] == h_in[0]) {
    std::fprintf(stderr, "verification failed: the compute kernel left its input unchanged\n");
    return 2;
  }

  for (int i = 0; i < kStreams; ++i) {
    CHECK(cudaStreamDestroy(s[i]));
    CHECK(cudaEventDestroy(join[i]));
  }
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaEventDestroy(fork));
  CHECK(cudaFree(d_one));
  CHECK(cudaFree(d_multi));
  CHECK(cudaFreeHost(h_in));
  CHECK(cudaFreeHost(h_out_one));
  CHECK(cudaFreeHost(h_out_multi));
  return 0;
}
