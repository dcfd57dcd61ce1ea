// CUDA C++ reference for `streamlab run overlap`: the same work, the same chunking, the same
// event placement, so the Rust figures can be compared with C++ in one GPU run.
//   nvcc -O3 -arch=sm_90 overlap.cu -o overlap && ./overlap 16777216 8 100 10
// Prints `name: median_ms` lines. Each timed repeat is an NVTX range ("one stream", "8
// streams"), so `streamlab trace -- ./overlap` reports each phase as a window of its own;
// NVTX costs nothing when no tool is attached.
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common.cuh"

int main(int argc, char** argv) {
  size_t n = argc > 1 ? strtoull(argv[1], 0, 10) : 16777216;
  int k = argc > 2 ? atoi(argv[2]) : 8;
  unsigned iters = argc > 3 ? atoi(argv[3]) : 100;
  int reps = argc > 4 ? atoi(argv[4]) : 10;
  size_t bytes = n * sizeof(float);
  float *in, *out_one, *out_multi, *d;
  CHECK(cudaMallocHost(&in, bytes));
  CHECK(cudaMallocHost(&out_one, bytes));
  CHECK(cudaMallocHost(&out_multi, bytes));
  CHECK(cudaMalloc(&d, bytes));
  for (size_t i = 0; i < n; ++i) in[i] = (float)((i * 2654435761u) % 6283) / 1000.0f - 3.14f;
  std::vector<cudaStream_t> s(k);
  for (auto& x : s) CHECK(cudaStreamCreate(&x));
  cudaEvent_t m[4], fork;
  for (auto& e : m) CHECK(cudaEventCreate(&e));
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  std::vector<cudaEvent_t> joins(k);
  for (auto& e : joins) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  // Chunks as streamlab makes them: the first n % k get one more element.
  std::vector<size_t> off, len;
  chunk_ranges(n, k, off, len);
  auto one = [&](double* h, double* c, double* dd) {
    CHECK(cudaEventRecord(m[0], s[0]));
    CHECK(cudaMemcpyAsync(d, in, bytes, cudaMemcpyHostToDevice, s[0]));
    CHECK(cudaEventRecord(m[1], s[0]));
    chunk_kernel<<<blocks(n), 256, 0, s[0]>>>(d, 0, n, iters);
    CHECK(cudaEventRecord(m[2], s[0]));
    CHECK(cudaMemcpyAsync(out_one, d, bytes, cudaMemcpyDeviceToHost, s[0]));
    CHECK(cudaEventRecord(m[3], s[0]));
    CHECK(cudaEventSynchronize(m[3]));
    float a = elapsed(m[0], m[1]), b = elapsed(m[1], m[2]), e = elapsed(m[2], m[3]);
    *h = a, *c = b, *dd = e;
    return (double)a + b + e;
  };
  auto multi = [&]() {
    bracket_open(s.data(), k, m[0], fork);
    for (int i = 0; i < k; ++i) {
      CHECK(cudaMemcpyAsync(d + off[i], in + off[i], len[i] * 4, cudaMemcpyHostToDevice, s[i]));
      chunk_kernel<<<blocks(len[i]), 256, 0, s[i]>>>(d, off[i], len[i], iters);
      CHECK(cudaMemcpyAsync(out_multi + off[i], d + off[i], len[i] * 4, cudaMemcpyDeviceToHost, s[i]));
    }
    bracket_close(s.data(), k, joins.data(), m[3]);
    return (double)elapsed(m[0], m[3]);
  };
  double h, c, dd;
  one(&h, &c, &dd);
  multi();
  std::vector<double> ones, multis, hs, cs, ds;
  char multi_name[32];
  snprintf(multi_name, sizeof multi_name, "%d streams", k);
  for (int r = 0; r < reps; ++r) {
    nvtxRangePushA("one stream");
    ones.push_back(one(&h, &c, &dd));
    nvtxRangePop();
    hs.push_back(h), cs.push_back(c), ds.push_back(dd);
    nvtxRangePushA(multi_name);
    multis.push_back(multi());
    nvtxRangePop();
  }
  CHECK(cudaGetLastError());
  if (memcmp(out_one, out_multi, bytes) != 0) {
    fprintf(stderr, "one-stream and multi-stream outputs differ\n");
    return 1;
  }
  double H = median(hs), C = median(cs), D = median(ds);
  double bound = (H + C + D) / k + (double)(k - 1) / k * std::max(H, std::max(C, D));
  printf("cuda_overlap_H: %.4f\ncuda_overlap_C: %.4f\ncuda_overlap_D: %.4f\n", H, C, D);
  printf("cuda_overlap_one_stream: %.4f\ncuda_overlap_%d_streams: %.4f\ncuda_overlap_bound: %.4f\n", median(ones), k,
         median(multis), bound);
  return 0;
}
