// Seeded bug 5 (the global-memory cousin of bug 4): a sum added to memory nobody zeroed.
// The tool that finds it on a GPU: compute-sanitizer --tool initcheck.
//
// row_dot: out[n] = sum over f of g[n, f] * x[n, f], one block of 256 threads per row n:
// warp shuffles, then one atomicAdd per warp into out[n] (chapter 04's AtomicPerWarp).
//
// The bug: out is cudaMalloc'ed and never set to zero (in PyTorch: torch.empty where the
// kernel needs torch.zeros), so the atomics add to whatever the allocation held: often
// zeros on a fresh allocation, and then the program even passes. initcheck reports
// every read of global memory that nothing wrote. The fix, compiled with -DFIXED: a
// cudaMemset to zero before the launch.
//
//   nvcc -lineinfo -o uninit_global uninit_global.cu && compute-sanitizer --tool initcheck ./uninit_global
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
  // 2. Block: lane 0 of each warp adds its sum into out[n] (one atomic per warp, no shared
  //    memory: chapter 04's AtomicPerWarp). out[n] must hold 0 before the launch.
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&out[n], sum);
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
#ifdef FIXED
  CHECK(cudaMemset(d_out, 0, N * sizeof(float)));  // the sums start from zero
#endif
  // BUG (without FIXED): d_out holds whatever cudaMalloc left there; the atomics add to it.
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
