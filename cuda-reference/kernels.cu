// CUDA C++ twins of kernels-gpu/src/kernels.rs: same names, same signatures, same math.
// nvcc -cubin -O3 -arch=sm_90 kernels.cu -o kernels.cubin (and with -DSTREAMLAB_SINCOSF
// for the sincosf form of the compute kernels), then
// `Gpu::with_kernels_from(0, "kernels.cubin")` runs streamlab's host code on nvcc's machine
// code (benches/kernels.rs compares the two compute kernels in one criterion group).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// The loop is unrolled 16 times, as kernels_gpu::math::compute_element unrolls it (UNROLL):
// the same operations in the same order, so the same bits, and benches/kernels.rs then
// compares the compilers' code, not their unrolling.
__device__ __forceinline__ void compute_slice(float* data, unsigned n, unsigned iters) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) {
    float x = data[i];
#pragma unroll 16
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

// The mixed-precision kernels take 16-bit patterns and a format code, as kernels-gpu's do:
// 0 is bfloat16, 1 is binary16 (kernels_gpu::math::FORMAT_BF16, FORMAT_F16). Conversions
// round to nearest even (cuda_bf16.h, cuda_fp16.h), the same as kernels-gpu's.
struct Bf16Bits {
  static __device__ float to(unsigned short b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
  static __device__ unsigned short from(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};
struct F16Bits {
  static __device__ float to(unsigned short b) { return __half2float(__ushort_as_half(b)); }
  static __device__ unsigned short from(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

// kernels_gpu::math::layer_gradient: h = w * h + x, `iters` times, then (h - x) * x, every
// operation rounded to the format.
template <class H>
__device__ void half_layer_slice(const unsigned short* w, const float* in, unsigned short* g,
                                 unsigned n, unsigned iters) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) {
    float wf = H::to(w[i]), x = H::to(H::from(in[i])), h = x;
    for (unsigned k = 0; k < iters; ++k) h = H::to(H::from(H::to(H::from(wf * h)) + x));
    g[i] = H::from(H::to(H::from(h - x)) * x);
  }
}

extern "C" __global__ void half_layer_kernel(const unsigned short* weights, const float* input,
                                             unsigned short* gradient, unsigned n, unsigned iters,
                                             unsigned format) {
  if (format == 1) half_layer_slice<F16Bits>(weights, input, gradient, n, iters);
  else half_layer_slice<Bf16Bits>(weights, input, gradient, n, iters);
}

extern "C" __global__ void master_update_kernel(float* master, const unsigned short* gradient, unsigned n,
                                                float lr, unsigned format) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) {
    float g = format == 1 ? F16Bits::to(gradient[i]) : Bf16Bits::to(gradient[i]);
    master[i] = master[i] - lr * g;
  }
}

extern "C" __global__ void cast_to_half_kernel(const float* master, unsigned short* weights, unsigned n,
                                               unsigned format) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d())
    weights[i] = format == 1 ? F16Bits::from(master[i]) : Bf16Bits::from(master[i]);
}

extern "C" __global__ void copy_kernel(const float* src, float* dst, unsigned n) {
  for (unsigned i = index_1d(); i < n; i += grid_size_1d()) dst[i] = src[i];
}

extern "C" __global__ void empty_kernel() {}
