// CUDA C++ twins of kernels-gpu/src/kernels.rs: same names, same signatures, same math.
// nvcc -cubin -O3 -arch=sm_90 kernels.cu -o kernels.cubin (and with -DSTREAMLAB_SINCOSF
// for the sincosf form of the compute kernels), then
// `Gpu::with_kernels_from(0, "kernels.cubin")` runs streamlab's host code on nvcc's machine
// code (benches/kernels.rs compares the two compute kernels in one criterion group).
#include <cstdint>

__device__ __forceinline__ unsigned index_1d() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ unsigned grid_size_1d() { return gridDim.x * blockDim.x; }
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void sleep_kernel(unsigned long long cycles) {
  long long start = clock64();
  while ((unsigned long long)(clock64() - start) < cycles) {}
}

extern "C" __global__ void sleep_stamped_kernel(unsigned long long cycles, unsigned long long* stamps) {
  bool first = index_1d() == 0;
  if (first) stamps[0] = globaltimer();
  long long start = clock64();
  while ((unsigned long long)(clock64() - start) < cycles) {}
  if (first) stamps[1] = globaltimer();
}

// x = sinf(x) * cosf(x), as the tutorials write it. -DSTREAMLAB_SINCOSF takes sin and cos
// from one sincosf call instead, as kernels-gpu does (the same bits, one argument reduction
// instead of two); benches/kernels.rs times both builds beside the Rust kernel.
__device__ __forceinline__ float sin_cos(float x) {
#ifdef STREAMLAB_SINCOSF
  float s, c;
  sincosf(x, &s, &c);
  return s * c;
#else
  return sinf(x) * cosf(x);
#endif
}

__device__ __forceinline__ void compute_slice(float* data, unsigned n, unsigned iters) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) {
    float x = data[i];
    for (unsigned k = 0; k < iters; ++k) x = sin_cos(x);
    data[i] = x;
  }
}

extern "C" __global__ void compute_kernel(float* data, unsigned n, unsigned iters) { compute_slice(data, n, iters); }

extern "C" __global__ void chunk_kernel(float* data, unsigned offset, unsigned len, unsigned iters) {
  compute_slice(data + offset, len, iters);
}

extern "C" __global__ void vector_add_kernel(const float* a, const float* b, float* c, unsigned n) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) c[i] = a[i] + b[i];
}

extern "C" __global__ void produce_kernel(const float* in, float* out, unsigned n, float scale) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) out[i] = scale * sinf(in[i]) + 1.0f;
}

extern "C" __global__ void combine_kernel(const float* a, const float* b, float* out, unsigned n) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) out[i] = a[i] * b[i] + a[i];
}

extern "C" __global__ void scale_kernel(float* data, unsigned n, float factor, float offset) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) data[i] = data[i] * factor + offset;
}

extern "C" __global__ void slow_scale_kernel(const float* in, float* out, unsigned n, float factor,
                                             unsigned long long cycles) {
  long long start = clock64();
  while ((unsigned long long)(clock64() - start) < cycles) {}
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) out[i] = in[i] * factor;
}

extern "C" __global__ void copy_kernel(const float* src, float* dst, unsigned n) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) dst[i] = src[i];
}

extern "C" __global__ void empty_kernel() {}
