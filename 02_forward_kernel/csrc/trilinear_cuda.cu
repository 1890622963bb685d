// Chapter 02: the CUDA kernel.
//
// Work decomposition: each thread computes output elements out[n, f]. A block
// is a small 2-D grid of threads: threadIdx.x runs over the feature axis f,
// threadIdx.y over a few cubes n; the blocks along grid.x cover all N cubes.
//
// Why f on threadIdx.x: the 32 threads of a warp have consecutive threadIdx.x.
// feats[n][k][f] and out[n][f] are contiguous in f, so a warp reading
// feats[n][k][f0 .. f0+31] touches one 128-byte segment: one memory transaction
// ("coalesced"). Put n on threadIdx.x instead and the 32 threads read addresses
// 8*F*4 bytes apart: 32 transactions for the same data. Chapter 03 measures it.
#include "trilinear.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// feats (N, 8, F), points (N, 3) and out (N, F) are contiguous, as in the CPU kernel.
template <typename scalar_t>
__global__ void forward_cuda_kernel(const scalar_t* __restrict__ feats, const scalar_t* __restrict__ points,
                                    scalar_t* __restrict__ out, int64_t N, int64_t F) {
  // BEGIN SOLUTION cuda-kernel
  // STUB: return;  // writes nothing: out keeps whatever was in its memory
  using opmath_t = at::opmath_type<scalar_t>;
  // Row threadIdx.y of block blockIdx.x takes one cube; 64-bit, as N * 8 * F may exceed 2^31.
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (n >= N) {
    return;  // the last block may have more rows of threads than cubes are left
  }
  // The point is the same for every f: all threads of the row read the same
  // three values, which the hardware serves with one broadcast.
  const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);
  const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);
  const opmath_t w = to_unit<opmath_t>(points[3 * n + 2]);
  opmath_t weight[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    weight[k] = corner_weight<opmath_t>(k, u, v, w);
  }
  const scalar_t* f_n = feats + n * 8 * F;  // 64-bit offsets: N * 8 * F may exceed 2^31
  scalar_t* out_n = out + n * F;
  // F may be larger than the block is wide: step over f in strides of blockDim.x.
  for (int64_t f = threadIdx.x; f < F; f += blockDim.x) {
    opmath_t acc = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      acc += weight[k] * static_cast<opmath_t>(f_n[k * F + f]);
    }
    out_n[f] = static_cast<scalar_t>(acc);
  }
  // END SOLUTION
}

void trilinear_forward_cuda(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out) {
  // Launch on the tensors' GPU, not on whatever device is current (cuda:1 inputs
  // while cuda:0 is current would otherwise run on the wrong GPU).
  const c10::cuda::CUDAGuard guard(feats.device());
  const int64_t N = feats.size(0), F = feats.size(2);
  // BEGIN SOLUTION cuda-kernel
  // STUB: const dim3 block(32, 1);  // a valid launch of one warp, which does nothing yet
  // STUB: const int64_t blocks = 1;
  const int tx = static_cast<int>(std::min<int64_t>(256, (F + 31) / 32 * 32));  // F up to a warp, at most 256
  const int ty = 256 / tx;                                                       // the rest of 256: more cubes
  const dim3 block(tx, ty);
  const int64_t blocks = (N + ty - 1) / ty;  // enough blocks for every cube
  // END SOLUTION
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "trilinear: N = ", N, " is too large for one launch");
  // Kernels go on the current stream: PyTorch orders work per stream, and code
  // that runs us under torch.cuda.stream(s) expects our kernel on s.
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "trilinear_forward_cuda", [&] {
    forward_cuda_kernel<scalar_t><<<static_cast<unsigned>(blocks), block, 0, stream>>>(
        feats.const_data_ptr<scalar_t>(), points.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), N, F);
    // A bad launch (too many threads, no kernel image for this GPU) fails
    // silently unless asked; this turns it into a Python exception here.
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}
