// Seeded bug 1: a read past the end of an array.
// The tool that finds it on a GPU: compute-sanitizer --tool memcheck.
//
// row_dot: out[n] = sum over f of g[n, f] * x[n, f], one block of 256 threads per row n:
// the reduction of chapter 04's points gradient (a sum over f), in its two steps: warp
// shuffles, then shared memory across the 8 warps.
//
// The bug: the loop over f runs while f <= F, one step too far. Thread F % 256 reads
// g[n, F] and x[n, F]: row n + 1's first elements (a wrong sum, without a sound) and, for
// the last row, one element past the end of each allocation, which only memcheck (or the
// GPU-free judge's guard pages) sees. The fix, compiled with -DFIXED: f < F.
//
//   nvcc -lineinfo -o oob_read oob_read.cu && compute-sanitizer --tool memcheck ./oob_read
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kThreads = 256;  // 8 warps

__global__ void row_dot(const float* __restrict__ g, const float* __restrict__ x, float* __restrict__ out, int F) {
  const int n = blockIdx.x;
  float sum = 0.0f;
#ifdef FIXED
  for (int f = threadIdx.x; f < F; f += blockDim.x) {
#else
  for (int f = threadIdx.x; f <= F; f += blockDim.x) {  // BUG: f == F is past the row
#endif
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
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < blockDim.x / 32; ++w) {
      total += partial[w];
    }
    out[n] = total;
  }
}

#define CHECK(call)                                                                      \
  do {                                                                                   \
    const cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));   \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

int main() {
  const int N = 6, F = 200;  // F: not a multiple of 32, fewer features than threads
  std::vector<float> g(N * F), x(N * F), out(N);
  for (int i = 0; i < N * F; ++i) {
    g[i] = 0.25f * (i * 7 % 11) - 1.0f;
    x[i] = 0.5f * (i * 5 % 13) - 3.0f;
  }
  float *d_g, *d_x, *d_out;
  CHECK(cudaMalloc(&d_g, N * F * sizeof(float)));
  CHECK(cudaMalloc(&d_x, N * F * sizeof(float)));
  CHECK(cudaMalloc(&d_out, N * sizeof(float)));
  CHECK(cudaMemcpy(d_g, g.data(), N * F * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_x, x.data(), N * F * sizeof(float), cudaMemcpyHostToDevice));
  row_dot<<<N, kThreads>>>(d_g, d_x, d_out, F);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(out.data(), d_out, N * sizeof(float), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int n = 0; n < N; ++n) {
    double want = 0;
    for (int f = 0; f < F; ++f) {
      want += double(g[n * F + f]) * x[n * F + f];
    }
    if (!(std::fabs(out[n] - want) <= 1e-4 * (1 + std::fabs(want)))) {
      std::printf("row_dot: out[%d] = %g, expected %g\n", n, out[n], want);
      ++wrong;
    }
  }
  std::printf("row_dot: %d of %d rows wrong\n", wrong, N);
  CHECK(cudaFree(d_g));
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_out));
  return wrong ? 1 : 0;
}
