// Kernels of two processes: time-sliced, or side by side under MPS. Each process runs one
// kernel of fixed work on a few SMs (4 blocks of 128 threads, a chain of dependent FMAs), so
// two such kernels would fit on the GPU at once. Without MPS, each process has its own context
// and the GPU switches between contexts: the two kernels take turns. Under MPS the two
// processes share one context on the server, and their kernels can run at the same time.
//
//   nvcc -O3 -arch=sm_90 mps_probe.cu -o mps_probe
//   ./mps_probe                      one process alone: its kernel time
//   ./mps_probe --start-at MS        launch at wall-clock time MS (ms since the epoch), so that
//                                    processes started apart launch together (scripts/mps-check.sh)
//   ./mps_probe --iters N            the FMA chain's length (default 20000000)
//
// Prints one line: "mps_probe pid <pid>: launch <ms> end <ms> kernel <ms> checksum <x>", the
// launch and the end as wall-clock ms since the epoch (the end after cudaStreamSynchronize)
// and the kernel's time between two events around it. Exits 1 on a CUDA error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e = (call);                                                          \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "mps_probe: %s: %s\n", #call, cudaGetErrorString(e));    \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// Fixed work, not fixed time: a kernel that is switched out makes no progress, so under
// time-slicing its time grows (a %globaltimer spin would end on time either way).
__global__ void fma_chain(float *out, long long iters) {
  float x = threadIdx.x * 1e-3f, a = 0.9999f, b = 1e-4f;
  for (long long i = 0; i < iters; ++i) x = fmaf(x, a, b);
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(system_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
  long long iters = 20000000;
  double start_at = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--start-at")) start_at = std::atof(argv[i + 1]);
  }
  const int blocks = 4, threads = 128;
  float *out;
  CHECK(cudaMalloc(&out, blocks * threads * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t begin, end;
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  // Warm-up: the module is loaded and the launch path is ready before the timed launch.
  fma_chain<<<blocks, threads, 0, s>>>(out, 1000);
  CHECK(cudaStreamSynchronize(s));
  while (start_at > 0 && now_ms() < start_at) std::this_thread::sleep_for(std::chrono::microseconds(100));
  double launch = now_ms();
  CHECK(cudaEventRecord(begin, s));
  fma_chain<<<blocks, threads, 0, s>>>(out, iters);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(end, s));
  CHECK(cudaStreamSynchronize(s));
  double finished = now_ms();
  float kernel_ms = 0, first = 0;
  CHECK(cudaEventElapsedTime(&kernel_ms, begin, end));
  CHECK(cudaMemcpy(&first, out, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("mps_probe pid %d: launch %.3f end %.3f kernel %.3f checksum %.6f\n", (int)getpid(), launch,
              finished, kernel_ms, first);
  CHECK(cudaFree(out));
  return 0;
}
