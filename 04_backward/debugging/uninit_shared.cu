// Seeded bug 4: a read of shared memory that no thread wrote. compute-sanitizer's initcheck
// tracks global memory only: on a GPU it reports nothing here (run.py --gpu records it); the
// GPU-free judge, whose shared memory starts poisoned, shows the bug as NaN (run.py).
//
// row_dot: out[n] = sum over f of g[n, f] * x[n, f], one block per row n: the reduction
// of chapter 04's points gradient, in its two steps: warp shuffles, then shared memory
// across the warps. partial[] has room for 8 warps (a 256-thread block); this launch
// uses blocks of 128 threads: 4 warps.
//
// The bug: thread 0 adds up all 8 slots, kMaxWarps, instead of the block's 4 warps. Slots
// 4-7 hold whatever the multiprocessor's shared memory held before (often zeros, so the
// answer can even be right). The fix, compiled with -DFIXED: blockDim.x / 32 slots.
//
//   nvcc -lineinfo -o uninit_shared uninit_shared.cu && compute-sanitizer --tool initcheck ./uninit_shared  # silent
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kMaxWarps = 8;   // partial[] fits a block of up to 256 threads
constexpr int kThreads = 128;  // this launch: 4 warps

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
  __shared__ float partial[kMaxWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    partial[warp] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
#ifdef FIXED
    for (int w = 0; w < blockDim.x / 32; ++w) {
#else
    for (int w = 0; w < kMaxWarps; ++w) {  // BUG: slots past the block's warps were never written
#endif
      total += partial[w];
    }
    out[n] = total;
  }
}

#include "row_dot_main.cuh"  // CHECK and main(): six rows, checked against a double-precision sum

void launch_row_dot(const float* g, const float* x, float* out, int N, int F) {
  row_dot<<<N, kThreads>>>(g, x, out, F);
}
