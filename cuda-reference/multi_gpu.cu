// CUDA C++ + NCCL twin of streamlab's three two-GPU lessons, at their default sizes and with
// their schedules, to compare Rust and C++ timings in one run:
//   p2p                256 MiB GPU 0 -> GPU 1: staged through pinned host memory (D2H on GPU 0,
//                      event hand-over, H2D on GPU 1), one cudaMemcpyPeerAsync with peer access
//                      on, and peer copies both ways at once (host/src/lessons/p2p.rs)
//   allreduce-overlap  64M gradient floats per GPU, 10 iterations, 8 buckets: backward (copy
//                      params -> grads, compute_kernel) then one ncclAllReduce on the compute
//                      stream, against bucket by bucket with each bucket's all-reduce on a comm
//                      stream (greatest priority, least priority, then 32 buckets), and 8
//                      buckets summed on the copy engines (peer pushes in pieces, 1 a bucket
//                      or the first argument, an add, peer pushes of the sums back); also the
//                      all-reduce of everything alone (host/src/lessons/allreduce_overlap.rs,
//                      host/src/lessons/allreduce_overlap/collective.rs)
//   pipeline-parallel  8 micro-batches of 4M floats, 50 iterations a stage: stage 0 on GPU 0, a
//                      peer copy on a copy stream of GPU 0, stage 1 on GPU 1; one micro-batch at
//                      a time against GPU 0 running ahead (host/src/lessons/pipeline_parallel.rs)
// One thread drives both GPUs (ncclCommInitAll, collectives inside ncclGroupStart/End). Same
// kernel, input generator and seeds as the Rust lessons (0x5EED; rank r's parameters
// 0x5EED + r * 7919, lessons/allreduce_overlap/collective.rs rank_seed). NVLink multicast is off (NCCL_NVLS_ENABLE=0).
//
//   nvcc -O3 -arch=sm_90 multi_gpu.cu -lnccl -o multi_gpu && ./multi_gpu [copy-engine pieces]
//
// Prints one `name: median_ms` line per version (10 reps after one warm-up; cudaEvents on
// GPU 0's first stream, every stream forked from its own GPU's first stream and joined back
// into GPU 0's first, as lab/pipeline.rs Bracket does), a few derived figures (GB/s, parts, bounds), then
// `check ...: ok|FAILED` lines (bit for bit: bytes received == bytes sent, the all-reduce ==
// the CPU's a + b, bucketed == sequential, pipelined == naive == both stages on GPU 0).
// With fewer than 2 GPUs it prints "multi_gpu: needs 2 GPUs, found N" and exits 0.
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "common.cuh"

#define NCCL_CHECK(call)                                                               \
  do {                                                                                 \
    ncclResult_t res_ = (call);                                                        \
    if (res_ != ncclSuccess) {                                                         \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                    \
              ncclGetErrorString(res_));                                               \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

// The median of a part measured in every run, the warm-up (the first value) left out.
static float part_median(const std::vector<float>& all) {
  return median(std::vector<float>(all.begin() + 1, all.end()));
}

static void on(int device) { CHECK(cudaSetDevice(device)); }

static void check(const char* what, bool ok) {
  printf("check %s: %s\n", what, ok ? "ok" : "FAILED");
}

static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

static std::vector<float> read_back(int device, const float* d, size_t n) {
  std::vector<float> out(n);
  on(device);
  CHECK(cudaMemcpy(out.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

// cudaDeviceEnablePeerAccess, where turning it on twice is not an error (peer::enable_access).
static void enable_peer_access(int from, int to) {
  on(from);
  cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return;
  }
  CHECK(e);
}

// lab/pipeline.rs Bracket: start and stop on the first stream; the other streams (on any
// GPU) fork from it before the work and join back into it after, so the stop event waits for
// all of them. Each join event is made on its own stream's GPU (common.cuh's bracket_open and
// bracket_close are the one-GPU form).
struct Bracket {
  std::vector<cudaStream_t> streams;
  std::vector<int> devices;
  cudaEvent_t start, stop;
  // Per stream: the fork event of its GPU's first stream (the Rust Bracket's per-GPU fork).
  std::vector<cudaEvent_t> forks;
  std::vector<cudaEvent_t> joins;

  Bracket(std::vector<cudaStream_t> s, std::vector<int> d) : streams(s), devices(d) {
    on(devices[0]);
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    forks.resize(streams.size());
    joins.resize(streams.size());
    for (size_t i = 0; i < streams.size(); ++i) {
      if (leader(i) != i) continue;
      on(devices[i]);
      CHECK(cudaEventCreateWithFlags(&forks[i], cudaEventDisableTiming));
    }
    for (size_t i = 1; i < streams.size(); ++i) {
      on(devices[i]);
      CHECK(cudaEventCreateWithFlags(&joins[i], cudaEventDisableTiming));
    }
  }

  // The first stream on stream i's GPU.
  size_t leader(size_t i) const {
    size_t l = 0;
    while (devices[l] != devices[i]) ++l;
    return l;
  }

  ~Bracket() {
    for (size_t i = 1; i < streams.size(); ++i) cudaEventDestroy(joins[i]);
    for (size_t i = 0; i < streams.size(); ++i)
      if (leader(i) == i) cudaEventDestroy(forks[i]);
    cudaEventDestroy(stop);
    cudaEventDestroy(start);
  }

  float time(const std::function<void()>& work) {
    on(devices[0]);
    CHECK(cudaEventRecord(start, streams[0]));
    // Each GPU's streams fork from that GPU's first stream: no wait on another GPU's event
    // before the work.
    for (size_t i = 0; i < streams.size(); ++i) {
      if (leader(i) != i) continue;
      on(devices[i]);
      CHECK(cudaEventRecord(forks[i], streams[i]));
    }
    for (size_t i = 1; i < streams.size(); ++i) {
      if (leader(i) == i) continue;
      on(devices[i]);
      CHECK(cudaStreamWaitEvent(streams[i], forks[leader(i)], 0));
    }
    work();
    CHECK(cudaGetLastError());
    for (size_t i = 1; i < streams.size(); ++i) {
      on(devices[i]);
      CHECK(cudaEventRecord(joins[i], streams[i]));
      on(devices[0]);
      CHECK(cudaStreamWaitEvent(streams[0], joins[i], 0));
    }
    on(devices[0]);
    CHECK(cudaEventRecord(stop, streams[0]));
    return elapsed(start, stop);
  }
};

// ---------------------------------------------------------------------------------------------
// p2p: --mib 256.
static void p2p() {
  const size_t n = (size_t)256 << 18, bytes = n * sizeof(float);
  int can01 = 0, can10 = 0;
  CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
  CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
  const bool access = can01 && can10;
  if (access) {
    enable_peer_access(0, 1);
    enable_peer_access(1, 0);
  }
  printf("p2p peer access both ways: %s\n", access ? "on" : "not supported (staged by the driver)");

  std::vector<float> in0(n), in1(n);
  random_inputs(in0.data(), n, SEED);
  random_inputs(in1.data(), n, SEED ^ 0x9e37);
  // src[g]: GPU g's data; dst0 on GPU 1 receives GPU 0's, dst1 on GPU 0 receives GPU 1's.
  float *src0, *src1, *dst0, *dst1, *staging;
  cudaStream_t s0, s1;
  cudaEvent_t m0, m1, m2, m3, handover;
  on(0);
  CHECK(cudaMalloc((void**)&src0, bytes));
  CHECK(cudaMalloc((void**)&dst1, bytes));
  CHECK(cudaMemcpy(src0, in0.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dst1, 0, bytes));
  CHECK(cudaHostAlloc((void**)&staging, bytes, cudaHostAllocPortable));
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&m0));
  CHECK(cudaEventCreate(&m1));
  CHECK(cudaEventCreateWithFlags(&handover, cudaEventDisableTiming));
  on(1);
  CHECK(cudaMalloc((void**)&src1, bytes));
  CHECK(cudaMalloc((void**)&dst0, bytes));
  CHECK(cudaMemcpy(src1, in1.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dst0, 0, bytes));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&m2));
  CHECK(cudaEventCreate(&m3));
  CHECK(cudaDeviceSynchronize());
  on(0);
  CHECK(cudaDeviceSynchronize());

  std::vector<float> down, up;
  {
    Bracket bracket({s0, s1}, {0, 1});
    auto staged = [&] {
      float ms = bracket.time([&] {
        on(0);
        CHECK(cudaEventRecord(m0, s0));
        CHECK(cudaMemcpyAsync(staging, src0, bytes, cudaMemcpyDeviceToHost, s0));
        CHECK(cudaEventRecord(m1, s0));
        CHECK(cudaEventRecord(handover, s0));
        on(1);
        CHECK(cudaStreamWaitEvent(s1, handover, 0));
        CHECK(cudaEventRecord(m2, s1));
        CHECK(cudaMemcpyAsync(dst0, staging, bytes, cudaMemcpyHostToDevice, s1));
        CHECK(cudaEventRecord(m3, s1));
      });
      down.push_back(elapsed(m0, m1));
      up.push_back(elapsed(m2, m3));
      return ms;
    };
    auto peer = [&](bool both) {
      return bracket.time([&] {
        on(0);
        CHECK(cudaMemcpyPeerAsync(dst0, 1, src0, 0, bytes, s0));
        if (both) {
          on(1);
          CHECK(cudaMemcpyPeerAsync(dst1, 0, src1, 1, bytes, s1));
        }
      });
    };
    auto gbs = [&](float ms) { return bytes / (double)ms / 1e6; };

    float t_staged = median_ms(staged);
    float t_one = median_ms([&] { return peer(false); });
    float t_both = median_ms([&] { return peer(true); });
    printf("p2p staged through pinned host memory: %.3f\n", t_staged);
    printf("p2p peer copy, one way: %.3f\n", t_one);
    printf("p2p peer copies, both ways at once: %.3f\n", t_both);
    printf("p2p GPU 0 to host (part of staged): %.3f\n", part_median(down));
    printf("p2p host to GPU 1 (part of staged): %.3f\n", part_median(up));
    printf("p2p staged, GB/s: %.1f\n", gbs(t_staged));
    printf("p2p peer copy one way, GB/s: %.1f\n", gbs(t_one));
    printf("p2p peer copies both ways, GB/s (sum): %.1f\n", 2.0 * gbs(t_both));

    // Each version again with the destinations cleared, then every byte compared.
    const char* names[3] = {"staged through pinned host memory", "peer copy, one way",
                            "peer copies, both ways at once"};
    for (int v = 0; v < 3; ++v) {
      on(1);
      CHECK(cudaMemset(dst0, 0, bytes));
      CHECK(cudaDeviceSynchronize());
      on(0);
      CHECK(cudaMemset(dst1, 0, bytes));
      CHECK(cudaDeviceSynchronize());
      if (v == 0) staged();
      else peer(v == 2);
      char what[160];
      snprintf(what, sizeof what, "p2p %s: GPU 1 got GPU 0's bytes", names[v]);
      check(what, same_bits(read_back(1, dst0, n), in0));
      if (v == 2) {
        snprintf(what, sizeof what, "p2p %s: GPU 0 got GPU 1's bytes", names[v]);
        check(what, same_bits(read_back(0, dst1, n), in1));
      }
    }
  }

  on(0);
  CHECK(cudaEventDestroy(m0));
  CHECK(cudaEventDestroy(m1));
  CHECK(cudaEventDestroy(handover));
  CHECK(cudaStreamDestroy(s0));
  CHECK(cudaFree(src0));
  CHECK(cudaFree(dst1));
  CHECK(cudaFreeHost(staging));
  on(1);
  CHECK(cudaEventDestroy(m2));
  CHECK(cudaEventDestroy(m3));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaFree(src1));
  CHECK(cudaFree(dst0));
}

// ---------------------------------------------------------------------------------------------
// allreduce-overlap: --elements 67108864 --buckets 8 --iters 10; the versions also use 4B.

// One rank of lessons/allreduce_overlap/collective.rs: a GPU, its streams, buffers, events and communicator.
struct Rank {
  int device;
  cudaStream_t compute, comm[2];  // comm[0] greatest priority, comm[1] least
  cudaStream_t copy_back;         // greatest priority: the copy engines' adds and push backs
  float *params, *grads, *sums;
  float* received;  // the halves the other GPU pushed here (copy engines' all-reduce)
  std::vector<cudaEvent_t> ready, pushed;
  cudaEvent_t marks[3];
  ncclComm_t nccl;
};

static void backward(const Rank& r, size_t off, size_t len, unsigned iters) {
  on(r.device);
  CHECK(cudaMemcpyAsync(r.grads + off, r.params + off, len * sizeof(float),
                        cudaMemcpyDeviceToDevice, r.compute));
  compute_kernel<<<blocks(len), 256, 0, r.compute>>>(r.grads + off, (unsigned)len, iters);
}

__global__ void add_kernel(const float* a, const float* b, float* c, unsigned n) {
  FOR_EACH(i, n) c[i] = a[i] + b[i];
}

static void all_reduce(const Rank& r, size_t off, size_t len, cudaStream_t stream) {
  on(r.device);
  NCCL_CHECK(ncclAllReduce(r.grads + off, r.sums + off, len, ncclFloat, ncclSum, r.nccl, stream));
}

// --copy-engine-pieces of the lesson: the first argument, 1 by default as in the lesson.
static size_t copy_engine_pieces = 1;

static void allreduce_overlap() {
  const size_t n = (size_t)1 << 26;
  const size_t B = 8;
  const unsigned iters = 10;
  const char* label = "allreduce-overlap";

  int devices[2] = {0, 1};
  ncclComm_t comms[2];
  NCCL_CHECK(ncclCommInitAll(comms, 2, devices));
  Rank ranks[2];
  std::vector<float> host(n);
  for (int r = 0; r < 2; ++r) {
    Rank& k = ranks[r];
    k.device = r;
    k.nccl = comms[r];
    on(r);
    int least = 0, greatest = 0;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK(cudaStreamCreateWithPriority(&k.compute, cudaStreamNonBlocking, 0));
    CHECK(cudaStreamCreateWithPriority(&k.comm[0], cudaStreamNonBlocking, greatest));
    CHECK(cudaStreamCreateWithPriority(&k.comm[1], cudaStreamNonBlocking, least));
    CHECK(cudaStreamCreateWithPriority(&k.copy_back, cudaStreamNonBlocking, greatest));
    random_inputs(host.data(), n, SEED + (uint64_t)r * 7919);  // rank_seed
    CHECK(cudaMalloc((void**)&k.params, n * sizeof(float)));
    CHECK(cudaMalloc((void**)&k.grads, n * sizeof(float)));
    CHECK(cudaMalloc((void**)&k.sums, n * sizeof(float)));
    CHECK(cudaMalloc((void**)&k.received, n * sizeof(float)));
    CHECK(cudaMemset(k.received, 0, n * sizeof(float)));
    CHECK(cudaMemcpy(k.params, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(k.grads, 0, n * sizeof(float)));
    CHECK(cudaMemset(k.sums, 0, n * sizeof(float)));
    k.ready.resize(4 * B);
    k.pushed.resize(4 * B * copy_engine_pieces);
    for (auto& e : k.ready) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (auto& e : k.pushed) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (auto& e : k.marks) CHECK(cudaEventCreate(&e));
    CHECK(cudaDeviceSynchronize());
  }
  // Peer access both ways, as lessons/allreduce_overlap/collective.rs turns on for the copy engines.
  int access01 = 0, access10 = 0;
  CHECK(cudaDeviceCanAccessPeer(&access01, 0, 1));
  CHECK(cudaDeviceCanAccessPeer(&access10, 1, 0));
  if (access01 && access10) {
    on(0);
    cudaError_t e0 = cudaDeviceEnablePeerAccess(1, 0);
    on(1);
    cudaError_t e1 = cudaDeviceEnablePeerAccess(0, 0);
    if (e0 == cudaErrorPeerAccessAlreadyEnabled || e1 == cudaErrorPeerAccessAlreadyEnabled)
      (void)cudaGetLastError();
  }
  // Compute first, as Ranks::streams lists them.
  Bracket bracket({ranks[0].compute, ranks[0].comm[0], ranks[0].comm[1], ranks[0].copy_back,
                   ranks[1].compute, ranks[1].comm[0], ranks[1].comm[1], ranks[1].copy_back},
                  {0, 0, 0, 0, 1, 1, 1, 1});
  auto synchronize = [&] {
    for (auto& r : ranks) {
      on(r.device);
      CHECK(cudaDeviceSynchronize());
    }
  };

  std::vector<float> c_parts, a_parts;
  // Every GPU's backward, then one all-reduce of all of it, on the compute streams.
  auto sequential = [&] {
    float ms = bracket.time([&] {
      for (auto& r : ranks) {
        on(r.device);
        CHECK(cudaEventRecord(r.marks[0], r.compute));
        backward(r, 0, n, iters);
        CHECK(cudaEventRecord(r.marks[1], r.compute));
      }
      NCCL_CHECK(ncclGroupStart());
      for (auto& r : ranks) all_reduce(r, 0, n, r.compute);
      NCCL_CHECK(ncclGroupEnd());
      for (auto& r : ranks) {
        on(r.device);
        CHECK(cudaEventRecord(r.marks[2], r.compute));
      }
    });
    float c = 0.0f, a = 0.0f;
    for (auto& r : ranks) {
      c = std::max(c, elapsed(r.marks[0], r.marks[1]));
      a = std::max(a, elapsed(r.marks[1], r.marks[2]));
    }
    c_parts.push_back(c);
    a_parts.push_back(a);
    return ms;
  };
  // Bucket by bucket: the backward on the compute stream, each bucket's all-reduce on
  // comm[comm] once its event fires.
  auto bucketed = [&](size_t buckets, int comm) {
    std::vector<size_t> off, len;
    chunk_ranges(n, buckets, off, len);
    return bracket.time([&] {
      for (size_t b = 0; b < buckets; ++b) {
        for (auto& r : ranks) {
          backward(r, off[b], len[b], iters);
          CHECK(cudaEventRecord(r.ready[b], r.compute));
        }
        NCCL_CHECK(ncclGroupStart());
        for (auto& r : ranks) {
          on(r.device);
          CHECK(cudaStreamWaitEvent(r.comm[comm], r.ready[b], 0));
          all_reduce(r, off[b], len[b], r.comm[comm]);
        }
        NCCL_CHECK(ncclGroupEnd());
      }
    });
  };
  // The same buckets summed on the copy engines (Ranks::copy_engine_all_reduce, in
  // copy_engine_pieces pieces a bucket): on comm[0] each GPU pushes the half the other owns,
  // piece by piece; on its copy-back stream, as each piece of the other's push lands, it adds
  // that piece of its own half and pushes the sums back.
  const size_t pieces = copy_engine_pieces;
  auto piece = [&](size_t start, size_t len, size_t k, size_t& at, size_t& count) {
    size_t n_pieces = std::min(pieces, std::max(len, (size_t)1));
    size_t base = len / n_pieces, extra = len % n_pieces;
    at = start + k * base + std::min(k, extra);
    count = k < n_pieces ? base + (k < extra ? 1 : 0) : 0;
  };
  auto copy_engines = [&](size_t buckets) {
    std::vector<size_t> off, len;
    chunk_ranges(n, buckets, off, len);
    return bracket.time([&] {
      for (size_t b = 0; b < buckets; ++b) {
        for (auto& r : ranks) {
          backward(r, off[b], len[b], iters);
          CHECK(cudaEventRecord(r.ready[b], r.compute));
        }
        size_t half[2] = {len[b] / 2, len[b] - len[b] / 2};
        size_t start[2] = {off[b], off[b] + len[b] / 2};
        for (int me = 0; me < 2; ++me) {
          Rank &r = ranks[me], &o = ranks[1 - me];
          int theirs = 1 - me;
          on(r.device);
          CHECK(cudaStreamWaitEvent(r.comm[0], r.ready[b], 0));
          for (size_t k = 0; k < pieces; ++k) {
            size_t at, count;
            piece(start[theirs], half[theirs], k, at, count);
            if (count > 0)
              CHECK(cudaMemcpyPeerAsync(o.received + at, o.device, r.grads + at, r.device,
                                        count * sizeof(float), r.comm[0]));
            CHECK(cudaEventRecord(r.pushed[b * pieces + k], r.comm[0]));
          }
        }
        for (int me = 0; me < 2; ++me) {
          Rank &r = ranks[me], &o = ranks[1 - me];
          on(r.device);
          CHECK(cudaStreamWaitEvent(r.copy_back, r.ready[b], 0));
          for (size_t k = 0; k < pieces; ++k) {
            size_t at, count;
            piece(start[me], half[me], k, at, count);
            CHECK(cudaStreamWaitEvent(r.copy_back, o.pushed[b * pieces + k], 0));
            if (count == 0) continue;
            add_kernel<<<blocks(count), 256, 0, r.copy_back>>>(r.grads + at, r.received + at,
                                                                r.sums + at, (unsigned)count);
            CHECK(cudaMemcpyPeerAsync(o.sums + at, o.device, r.sums + at, r.device,
                                      count * sizeof(float), r.copy_back));
          }
        }
      }
    });
  };
  // The all-reduce of everything, alone.
  auto alone = [&] {
    return bracket.time([&] {
      NCCL_CHECK(ncclGroupStart());
      for (auto& r : ranks) all_reduce(r, 0, n, r.compute);
      NCCL_CHECK(ncclGroupEnd());
    });
  };

  float t_seq = median_ms(sequential);
  float t_hi = median_ms([&] { return bucketed(B, 0); });
  float t_lo = median_ms([&] { return bucketed(B, 1); });
  float t_many = median_ms([&] { return bucketed(4 * B, 0); });
  float t_engines = median_ms([&] { return copy_engines(B); });
  float t_alone = median_ms(alone);
  float c = part_median(c_parts), a = part_median(a_parts);
  printf("%s backward, then one all-reduce: %.3f\n", label, t_seq);
  printf("%s %zu buckets, comm stream at greatest priority: %.3f\n", label, B, t_hi);
  printf("%s %zu buckets, comm stream at least priority: %.3f\n", label, B, t_lo);
  printf("%s %zu buckets, comm stream at greatest priority: %.3f\n", label, 4 * B, t_many);
  printf("%s %zu buckets, all-reduce on the copy engines: %.3f\n", label, B, t_engines);
  printf("%s all-reduce of %zu floats alone: %.3f\n", label, n, t_alone);
  printf("%s backward C (part of sequential): %.3f\n", label, c);
  printf("%s all-reduce A (part of sequential): %.3f\n", label, a);
  printf("%s bound max(C, A) + min(C, A)/B: %.3f\n", label,
         std::max(c, a) + std::min(c, a) / (float)B);

  // Checks: each version once more with the sums cleared first, then read back.
  auto clear_sums = [&] {
    for (auto& r : ranks) {
      on(r.device);
      CHECK(cudaMemset(r.sums, 0, n * sizeof(float)));
    }
    synchronize();
  };
  clear_sums();
  sequential();
  synchronize();
  std::vector<float> seq[2] = {read_back(0, ranks[0].sums, n), read_back(1, ranks[1].sums, n)};
  std::vector<float> g0 = read_back(0, ranks[0].grads, n), g1 = read_back(1, ranks[1].grads, n);
  std::vector<float> expected(n);
  for (size_t i = 0; i < n; ++i) expected[i] = g0[i] + g1[i];
  check("allreduce-overlap all-reduce sum == CPU a + b, bit for bit (rank 0)",
        same_bits(seq[0], expected));
  check("allreduce-overlap all-reduce sum == CPU a + b, bit for bit (rank 1)",
        same_bits(seq[1], expected));
  struct { size_t buckets; int comm; const char* name; } versions[3] = {
      {B, 0, "8 buckets, comm stream at greatest priority"},
      {B, 1, "8 buckets, comm stream at least priority"},
      {4 * B, 0, "32 buckets, comm stream at greatest priority"}};
  for (auto& v : versions) {
    clear_sums();
    bucketed(v.buckets, v.comm);
    synchronize();
    for (int r = 0; r < 2; ++r) {
      char what[160];
      snprintf(what, sizeof what, "allreduce-overlap %s == sequential, bit for bit (rank %d)",
               v.name, r);
      check(what, same_bits(read_back(r, ranks[r].sums, n), seq[r]));
    }
  }

  clear_sums();
  copy_engines(B);
  synchronize();
  for (int r = 0; r < 2; ++r) {
    char what[160];
    snprintf(what, sizeof what,
             "allreduce-overlap copy engines' sums == NCCL's, bit for bit (rank %d)", r);
    check(what, same_bits(read_back(r, ranks[r].sums, n), seq[r]));
  }

  for (auto& r : ranks) {
    on(r.device);
    for (auto& e : r.ready) CHECK(cudaEventDestroy(e));
    for (auto& e : r.pushed) CHECK(cudaEventDestroy(e));
    CHECK(cudaFree(r.received));
    for (auto& e : r.marks) CHECK(cudaEventDestroy(e));
    NCCL_CHECK(ncclCommDestroy(r.nccl));
    CHECK(cudaStreamDestroy(r.compute));
    CHECK(cudaStreamDestroy(r.comm[0]));
    CHECK(cudaStreamDestroy(r.comm[1]));
    CHECK(cudaStreamDestroy(r.copy_back));
    CHECK(cudaFree(r.params));
    CHECK(cudaFree(r.grads));
    CHECK(cudaFree(r.sums));
  }
}

// ---------------------------------------------------------------------------------------------
// pipeline-parallel: --micro-batches 8 --elements 4194304 --iters 50.
static void pipeline_parallel() {
  const size_t M = 8, per = (size_t)1 << 22, n = M * per;
  const unsigned iters = 50;
  const char* label = "pipeline-parallel";
  int can01 = 0;
  CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
  if (can01) enable_peer_access(0, 1);

  std::vector<float> inputs(n);
  random_inputs(inputs.data(), n, SEED);
  std::vector<size_t> off, len;
  chunk_ranges(n, M, off, len);
  float *input, *act0, *act1;
  cudaStream_t s0, copy, s1;
  std::vector<cudaEvent_t> done0(M), sent(M), done1(M);
  std::vector<std::vector<cudaEvent_t>> marks(M, std::vector<cudaEvent_t>(6));
  on(0);
  CHECK(cudaMalloc((void**)&input, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&act0, n * sizeof(float)));
  CHECK(cudaMemcpy(input, inputs.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(act0, 0, n * sizeof(float)));
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  for (size_t m = 0; m < M; ++m) {
    CHECK(cudaEventCreateWithFlags(&done0[m], cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&sent[m], cudaEventDisableTiming));
    for (int i = 0; i < 4; ++i) CHECK(cudaEventCreate(&marks[m][i]));
  }
  CHECK(cudaDeviceSynchronize());
  on(1);
  CHECK(cudaMalloc((void**)&act1, n * sizeof(float)));
  CHECK(cudaMemset(act1, 0, n * sizeof(float)));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  for (size_t m = 0; m < M; ++m) {
    CHECK(cudaEventCreateWithFlags(&done1[m], cudaEventDisableTiming));
    for (int i = 4; i < 6; ++i) CHECK(cudaEventCreate(&marks[m][i]));
  }
  CHECK(cudaDeviceSynchronize());

  std::vector<float> t0s, tcs, t1s;
  {
    Bracket bracket({s0, copy, s1}, {0, 0, 1});
    // Every micro-batch through both stages; with `naive`, GPU 0 waits for GPU 1 to finish
    // micro-batch m before it starts m + 1, and timing events mark each step.
    auto run = [&](bool naive) {
      float ms = bracket.time([&] {
        for (size_t m = 0; m < M; ++m) {
          float* a0 = act0 + off[m];
          float* a1 = act1 + off[m];
          on(0);
          if (naive) CHECK(cudaEventRecord(marks[m][0], s0));
          CHECK(cudaMemcpyAsync(a0, input + off[m], len[m] * sizeof(float),
                                cudaMemcpyDeviceToDevice, s0));
          compute_kernel<<<blocks(len[m]), 256, 0, s0>>>(a0, (unsigned)len[m], iters);
          if (naive) CHECK(cudaEventRecord(marks[m][1], s0));
          CHECK(cudaEventRecord(done0[m], s0));
          CHECK(cudaStreamWaitEvent(copy, done0[m], 0));
          if (naive) CHECK(cudaEventRecord(marks[m][2], copy));
          CHECK(cudaMemcpyPeerAsync(a1, 1, a0, 0, len[m] * sizeof(float), copy));
          if (naive) CHECK(cudaEventRecord(marks[m][3], copy));
          CHECK(cudaEventRecord(sent[m], copy));
          on(1);
          CHECK(cudaStreamWaitEvent(s1, sent[m], 0));
          if (naive) CHECK(cudaEventRecord(marks[m][4], s1));
          compute_kernel<<<blocks(len[m]), 256, 0, s1>>>(a1, (unsigned)len[m], iters);
          if (naive) CHECK(cudaEventRecord(marks[m][5], s1));
          if (naive) {
            CHECK(cudaEventRecord(done1[m], s1));
            on(0);
            CHECK(cudaStreamWaitEvent(s0, done1[m], 0));
          }
        }
      });
      if (naive) {
        float t[3] = {0.0f, 0.0f, 0.0f};
        for (size_t m = 0; m < M; ++m)
          for (int i = 0; i < 3; ++i) t[i] += elapsed(marks[m][2 * i], marks[m][2 * i + 1]);
        t0s.push_back(t[0]);
        tcs.push_back(t[1]);
        t1s.push_back(t[2]);
      }
      return ms;
    };

    float t_naive = median_ms([&] { return run(true); });
    float t_piped = median_ms([&] { return run(false); });
    float t0 = part_median(t0s), tc = part_median(tcs), t1 = part_median(t1s);
    float k = (float)M, slowest = std::max(t0, std::max(tc, t1));
    printf("%s one micro-batch at a time: %.3f\n", label, t_naive);
    printf("%s pipelined, %zu micro-batches: %.3f\n", label, M, t_piped);
    printf("%s stage 0 (part of naive, all micro-batches): %.3f\n", label, t0);
    printf("%s copy (part of naive, all micro-batches): %.3f\n", label, tc);
    printf("%s stage 1 (part of naive, all micro-batches): %.3f\n", label, t1);
    printf("%s bound (t0 + tc + t1)/M + (M-1)/M * max, from the parts: %.3f\n", label,
           (t0 + tc + t1) / k + (k - 1.0f) / k * slowest);

    // Checks: each version once more with GPU 1's output cleared first; then both stages on
    // GPU 0 alone.
    std::vector<float> outputs[2];
    for (int v = 0; v < 2; ++v) {
      on(1);
      CHECK(cudaMemset(act1, 0, n * sizeof(float)));
      CHECK(cudaDeviceSynchronize());
      run(v == 0);
      outputs[v] = read_back(1, act1, n);
    }
    on(0);
    CHECK(cudaMemcpyAsync(act0, input, n * sizeof(float), cudaMemcpyDeviceToDevice, s0));
    compute_kernel<<<blocks(n), 256, 0, s0>>>(act0, (unsigned)n, iters);
    compute_kernel<<<blocks(n), 256, 0, s0>>>(act0, (unsigned)n, iters);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(s0));
    check("pipeline-parallel pipelined == one micro-batch at a time, bit for bit",
          same_bits(outputs[1], outputs[0]));
    check("pipeline-parallel two GPUs == both stages on GPU 0 alone, bit for bit",
          same_bits(outputs[1], read_back(0, act0, n)));
  }

  on(0);
  for (size_t m = 0; m < M; ++m) {
    CHECK(cudaEventDestroy(done0[m]));
    CHECK(cudaEventDestroy(sent[m]));
    for (int i = 0; i < 4; ++i) CHECK(cudaEventDestroy(marks[m][i]));
  }
  CHECK(cudaStreamDestroy(s0));
  CHECK(cudaStreamDestroy(copy));
  CHECK(cudaFree(input));
  CHECK(cudaFree(act0));
  on(1);
  for (size_t m = 0; m < M; ++m) {
    CHECK(cudaEventDestroy(done1[m]));
    for (int i = 4; i < 6; ++i) CHECK(cudaEventDestroy(marks[m][i]));
  }
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaFree(act1));
}

int main(int argc, char** argv) {
  if (argc > 1) copy_engine_pieces = (size_t)std::max(1, atoi(argv[1]));
  // Before NCCL reads its settings: never NVLink multicast (it can take shared GPUs out).
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (count < 2) {
    printf("multi_gpu: needs 2 GPUs, found %d\n", count);
    return 0;
  }
  int version = 0;
  NCCL_CHECK(ncclGetVersion(&version));
  printf("multi_gpu: NCCL %d.%d.%d\n", version / 10000, version / 100 % 100, version % 100);
  p2p();
  allreduce_overlap();
  pipeline_parallel();
  return 0;
}
