// CUDA C++ twin of the launch-overhead part of `streamlab run graph`
// (host/src/demos/graph.rs: LaunchOverhead, measure_launch_overhead) and of the
// `launch_overhead` group of benches/graphs.rs.
//
//   nvcc -O3 -arch=sm_90 launch_overhead.cu -o launch_overhead
//   ./launch_overhead [reps=20] [kernels=100]
//
// The method, step for step the same as the Rust version:
//   - one non-blocking stream; the kernel is empty, launched <<<1, 1, 0, stream>>>;
//   - the graph: the same `kernels` launches captured on that stream (global capture mode),
//     instantiated with flags 0 and uploaded once;
//   - one warm-up of each version, then `reps` repeats, each running the stream version and
//     then the graph version;
//   - one measurement: record `start` on the stream; read the host clock; the `kernels`
//     launches one by one (or one cudaGraphLaunch); read the host clock again (the issue
//     time); record `stop` on the stream; cudaEventSynchronize(stop); cudaEventElapsedTime
//     (the GPU time);
//   - the medians over the repeats, divided by the number of kernels.
// Launch errors are checked once after the host clock stops, so the check is not timed (the
// Rust version reads the status cuLaunchKernel returns, which costs no extra call).
//
// It prints `name: value_us` lines; the names are the keys of the `launch_overhead_us`
// detail in `streamlab run graph --json`, so both can be compared from the same GPU run.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common.cuh"

__global__ void empty_kernel() {}

using Clock = std::chrono::steady_clock;

struct Sample {
  double gpu_ms;
  double issue_ms;
};

static double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// `kernels` empty kernels launched one by one.
static Sample run_stream(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, int kernels) {
  CHECK(cudaEventRecord(start, stream));
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < kernels; ++i) {
    empty_kernel<<<1, 1, 0, stream>>>();
  }
  const Clock::time_point t1 = Clock::now();
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(stop, stream));
  Sample s;
  s.gpu_ms = elapsed(start, stop);
  s.issue_ms = ms_between(t0, t1);
  return s;
}

// One launch of the graph holding the same `kernels` empty kernels.
static Sample run_graph(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, cudaGraphExec_t exec) {
  CHECK(cudaEventRecord(start, stream));
  const Clock::time_point t0 = Clock::now();
  const cudaError_t launched = cudaGraphLaunch(exec, stream);
  const Clock::time_point t1 = Clock::now();
  CHECK(launched);
  CHECK(cudaEventRecord(stop, stream));
  Sample s;
  s.gpu_ms = elapsed(start, stop);
  s.issue_ms = ms_between(t0, t1);
  return s;
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const int kernels = argc > 2 ? std::atoi(argv[2]) : 100;
  if (reps < 1 || kernels < 1) {
    std::fprintf(stderr, "usage: %s [reps >= 1] [kernels >= 1]\n", argv[0]);
    return 2;
  }

  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  int runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("device: %s (driver API %d, runtime %d)\n", prop.name, driver, runtime);
  std::printf("kernels: %d, reps: %d\n", kernels, reps);

  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start;
  cudaEvent_t stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  // The graph: the same launches, captured instead of run.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kernels; ++i) {
    empty_kernel<<<1, 1, 0, stream>>>();
  }
  CHECK(cudaGetLastError());
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));  // CUDA 12+ signature: (exec, graph, flags)
  CHECK(cudaGraphUpload(exec, stream));
  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  std::printf("graph nodes: %zu\n", nodes);

  // Warm-up: one of each (module load, first-launch and upload costs).
  run_stream(stream, start, stop, kernels);
  run_graph(stream, start, stop, exec);

  std::vector<double> stream_gpu, stream_issue, graph_gpu, graph_issue;
  for (int r = 0; r < reps; ++r) {
    const Sample s = run_stream(stream, start, stop, kernels);
    stream_gpu.push_back(s.gpu_ms);
    stream_issue.push_back(s.issue_ms);
    const Sample g = run_graph(stream, start, stop, exec);
    graph_gpu.push_back(g.gpu_ms);
    graph_issue.push_back(g.issue_ms);
  }

  const double per_kernel_us = 1000.0 / kernels;
  std::printf("stream_gpu_per_kernel_us: %.3f\n", median(stream_gpu) * per_kernel_us);
  std::printf("stream_issue_per_kernel_us: %.3f\n", median(stream_issue) * per_kernel_us);
  std::printf("graph_gpu_per_kernel_us: %.3f\n", median(graph_gpu) * per_kernel_us);
  std::printf("graph_issue_per_kernel_us: %.3f\n", median(graph_issue) * per_kernel_us);
  std::printf("graph_launch_issue_us: %.3f\n", median(graph_issue) * 1000.0);

  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
