// Seeded bug 2: a race on shared memory (a barrier left out).
// The tool that finds it on a GPU: compute-sanitizer --tool racecheck.
//
// row_dot: out[n] = sum over f of g[n, f] * x[n, f], one block of 256 threads per row n:
// the reduction of chapter 04's points gradient, in its two steps: warp shuffles, then
// shared memory across the 8 warps.
//
// The bug: no __syncthreads() between the warps' stores to partial[] and thread 0's loads
// of them. Nothing orders warp 0 (thread 0's) after warps 1-7: thread 0 may read a slot
// before its warp has written it (this block's sum, or what the previous block on this
// multiprocessor left there). The result is right or wrong by timing; racecheck reports
// the hazard whatever the timing. The fix, compiled with -DFIXED: the barrier.
//
//   nvcc -lineinfo -o race race.cu && compute-sanitizer --tool racecheck ./race
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kThreads = 256;  // 8 warps

__global__ void row_dot(const float* __restrict__ g, const float* __restrict__ x, float* __restrict__ out, int F) {
  const int n = blockIdx.x;
  float sum = 0.0f;
  for (int f = threadIdx.x; f < F; f += blockDim.x) {
    sum += g[n * F + f] * x[n * F + f];
  }
  // 1. Warp: lane 0 ends with the sum of its warp's 32 values.
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
  }
  // 2. Block: lane 0 of each warp leaves its sum in shared memory; thread 0 adds them up.
  __shared__ float partial[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    partial[warp] = sum;
  }
#ifdef FIXED
  __syncthreads();
#endif
  // BUG (without FIXED): no barrier here; thread 0 reads the other warps' slots below.
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < blockDim.x / 32; ++w) {
      total += partial[w];
    }
    out[n] = total;
  }
}

#include "row_dot_main.cuh"  // CHECK and main(): six rows, checked against a double-precision sum

void launch_row_dot(const float* g, const float* x, float* out, int N, int F) {
  row_dot<<<N, kThreads>>>(g, x, out, F);
}
