// CUDA C++ twin of two streamlab pipeline demos, to compare Rust and C++ timings in one run:
//   compute-transfer: 4 batches of 524,288 floats, 100 iterations: one stream vs a transfer
//                     stream and a compute stream linked by per-batch events
//                     (host/src/demos/compute_transfer.rs);
//   prefetch:         8 batches of 1,048,576 floats, 50 iterations: upload-then-step on one
//                     stream vs double-buffered prefetch on a copy stream
//                     (host/src/demos/prefetch.rs).
// Same sizes, kernels, seed (0x5EED) and input generator as the Rust demos' defaults.
//
//   nvcc -O3 -arch=sm_90 pipelines.cu -o pipelines && ./pipelines
//
// Prints one `name: median_ms` line per figure (10 reps after one warm-up, cudaEvent timing),
// then `check ...: ok|FAILED` lines (asynchronous vs synchronous output, bit for bit).
#include <cstdio>
#include <cstring>

#include "common.cuh"

// The other kernels of cuda-reference/kernels.cu (and kernels-gpu/src/kernels.rs); the compute
// kernel is common.cuh's.
__global__ void vector_add_kernel(const float* a, const float* b, float* c, unsigned n) {
  FOR_EACH(i, n) c[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* data, unsigned n, float factor, float offset) {
  FOR_EACH(i, n) data[i] = data[i] * factor + offset;
}

static void compute_transfer() {
  const int B = 4;
  const size_t n = 524288;
  const unsigned iters = 100;
  const size_t total = B * n, bytes = n * sizeof(float);

  float *in, *out_one, *out_two, *d;
  CHECK(cudaMallocHost((void**)&in, total * sizeof(float)));
  CHECK(cudaMallocHost((void**)&out_one, total * sizeof(float)));
  CHECK(cudaMallocHost((void**)&out_two, total * sizeof(float)));
  CHECK(cudaMalloc((void**)&d, total * sizeof(float)));
  random_inputs(in, total, SEED);

  cudaStream_t transfer, compute;
  CHECK(cudaStreamCreate(&transfer));
  CHECK(cudaStreamCreate(&compute));
  cudaEvent_t start, stop, up[B], done[B];
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < B; ++i) {
    CHECK(cudaEventCreateWithFlags(&up[i], cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
  }

  auto one_stream = [&]() -> float {
    CHECK(cudaEventRecord(start, compute));
    for (int i = 0; i < B; ++i) {
      CHECK(cudaMemcpyAsync(d + i * n, in + i * n, bytes, cudaMemcpyHostToDevice, compute));
      compute_kernel<<<blocks(n), 256, 0, compute>>>(d + i * n, (unsigned)n, iters);
      CHECK(cudaMemcpyAsync(out_one + i * n, d + i * n, bytes, cudaMemcpyDeviceToHost, compute));
    }
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop, compute));
    return elapsed(start, stop);
  };

  auto two_streams = [&]() -> float {
    CHECK(cudaEventRecord(start, transfer));
    CHECK(cudaMemcpyAsync(d, in, bytes, cudaMemcpyHostToDevice, transfer));
    CHECK(cudaEventRecord(up[0], transfer));
    for (int i = 0; i < B; ++i) {
      CHECK(cudaStreamWaitEvent(compute, up[i], 0));
      compute_kernel<<<blocks(n), 256, 0, compute>>>(d + i * n, (unsigned)n, iters);
      CHECK(cudaEventRecord(done[i], compute));
      if (i + 1 < B) {  // upload the next batch before downloading this one
        CHECK(cudaMemcpyAsync(d + (i + 1) * n, in + (i + 1) * n, bytes, cudaMemcpyHostToDevice,
                              transfer));
        CHECK(cudaEventRecord(up[i + 1], transfer));
      }
      CHECK(cudaStreamWaitEvent(transfer, done[i], 0));
      CHECK(cudaMemcpyAsync(out_two + i * n, d + i * n, bytes, cudaMemcpyDeviceToHost, transfer));
    }
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop, transfer));  // the last download followed the last kernel
    return elapsed(start, stop);
  };

  printf("compute-transfer one stream: %.3f\n", median_ms(one_stream));
  printf("compute-transfer transfer + compute streams: %.3f\n", median_ms(two_streams));
  bool same = memcmp(out_one, out_two, total * sizeof(float)) == 0;
  printf("check compute-transfer two streams == one stream: %s\n", same ? "ok" : "FAILED");

  for (int i = 0; i < B; ++i) {
    CHECK(cudaEventDestroy(up[i]));
    CHECK(cudaEventDestroy(done[i]));
  }
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaStreamDestroy(transfer));
  CHECK(cudaStreamDestroy(compute));
  CHECK(cudaFree(d));
  CHECK(cudaFreeHost(in));
  CHECK(cudaFreeHost(out_one));
  CHECK(cudaFreeHost(out_two));
}

static void prefetch() {
  const int B = 8;
  const size_t n = 1 << 20;
  const unsigned iters = 50;
  const size_t bytes = n * sizeof(float);

  float *in, *acc_serial, *acc_prefetch, *slot[2], *acc;
  CHECK(cudaMallocHost((void**)&in, B * bytes));
  CHECK(cudaMallocHost((void**)&acc_serial, bytes));
  CHECK(cudaMallocHost((void**)&acc_prefetch, bytes));
  CHECK(cudaMalloc((void**)&slot[0], bytes));
  CHECK(cudaMalloc((void**)&slot[1], bytes));
  CHECK(cudaMalloc((void**)&acc, bytes));
  random_inputs(in, B * n, SEED);

  cudaStream_t copy, compute;
  CHECK(cudaStreamCreate(&copy));
  CHECK(cudaStreamCreate(&compute));
  cudaEvent_t start, stop, uploaded[2], consumed[2];
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int s = 0; s < 2; ++s) {
    CHECK(cudaEventCreateWithFlags(&uploaded[s], cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&consumed[s], cudaEventDisableTiming));
  }

  // The training step: compute on the batch in place, then acc += batch.
  auto step = [&](float* batch) {
    compute_kernel<<<blocks(n), 256, 0, compute>>>(batch, (unsigned)n, iters);
    vector_add_kernel<<<blocks(n), 256, 0, compute>>>(acc, batch, acc, (unsigned)n);
  };

  auto no_prefetch = [&]() -> float {
    CHECK(cudaEventRecord(start, compute));
    scale_kernel<<<blocks(n), 256, 0, compute>>>(acc, (unsigned)n, 0.0f, 0.0f);
    for (int i = 0; i < B; ++i) {
      CHECK(cudaMemcpyAsync(slot[0], in + i * n, bytes, cudaMemcpyHostToDevice, compute));
      step(slot[0]);
    }
    CHECK(cudaMemcpyAsync(acc_serial, acc, bytes, cudaMemcpyDeviceToHost, compute));
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop, compute));
    return elapsed(start, stop);
  };

  auto double_buffered = [&]() -> float {
    CHECK(cudaEventRecord(start, compute));
    scale_kernel<<<blocks(n), 256, 0, compute>>>(acc, (unsigned)n, 0.0f, 0.0f);
    CHECK(cudaStreamWaitEvent(copy, start, 0));
    for (int i = 0; i < B; ++i) {
      int s = i % 2;
      if (i >= 2) CHECK(cudaStreamWaitEvent(copy, consumed[s], 0));  // step i-2 is done with it
      CHECK(cudaMemcpyAsync(slot[s], in + i * n, bytes, cudaMemcpyHostToDevice, copy));
      CHECK(cudaEventRecord(uploaded[s], copy));
      CHECK(cudaStreamWaitEvent(compute, uploaded[s], 0));
      step(slot[s]);
      CHECK(cudaEventRecord(consumed[s], compute));
    }
    CHECK(cudaMemcpyAsync(acc_prefetch, acc, bytes, cudaMemcpyDeviceToHost, compute));
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop, compute));
    return elapsed(start, stop);
  };

  printf("prefetch no prefetch: %.3f\n", median_ms(no_prefetch));
  printf("prefetch double-buffered: %.3f\n", median_ms(double_buffered));
  bool same = memcmp(acc_serial, acc_prefetch, bytes) == 0;
  printf("check prefetch double-buffered == no prefetch: %s\n", same ? "ok" : "FAILED");

  for (int s = 0; s < 2; ++s) {
    CHECK(cudaEventDestroy(uploaded[s]));
    CHECK(cudaEventDestroy(consumed[s]));
    CHECK(cudaFree(slot[s]));
  }
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaStreamDestroy(copy));
  CHECK(cudaStreamDestroy(compute));
  CHECK(cudaFree(acc));
  CHECK(cudaFreeHost(in));
  CHECK(cudaFreeHost(acc_serial));
  CHECK(cudaFreeHost(acc_prefetch));
}

int main() {
  CHECK(cudaSetDevice(0));
  compute_transfer();
  prefetch();
  return 0;
}
