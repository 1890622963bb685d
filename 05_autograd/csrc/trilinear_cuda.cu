// Chapter 05: the CUDA kernels, forward and backward.
//
// Work decomposition: a block of threads handles a few cubes. threadIdx.x runs
// over the feature axis f, threadIdx.y over cubes n within the block:
//
//   block (tx, ty): tx threads along a row of packs, ty = 256 / tx cubes     grid.x = ceil(N / ty)
//
// Why f on threadIdx.x: the 32 threads of a warp have consecutive threadIdx.x.
// feats[n][k][f] and out[n][f] are contiguous in f, so a warp reading
// feats[n][k][f0 .. f0+31] touches one 128-byte segment: one memory transaction
// ("coalesced"). Put n on threadIdx.x instead and the 32 threads read addresses
// 8*F*4 bytes apart: 32 transactions for the same data. Chapter 03 measures it.
//
// Each thread moves a Pack of VEC features (16 bytes: 4 floats, 8 halves, 2
// doubles) per load and store when F and the addresses allow it, else VEC = 1.
// A row of fewer than 32 packs (F = 32 floats: 8 packs) is a power of two wide,
// so that 32 / tx cubes share a warp instead of most of its lanes idling.
#include "pack.cuh"
#include "trilinear.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

template <typename scalar_t, int VEC>
__global__ void forward_cuda_kernel(const scalar_t* __restrict__ feats, const scalar_t* __restrict__ points,
                                    scalar_t* __restrict__ out, int64_t N, int64_t F) {
  using opmath_t = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t, VEC>;
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
  const int64_t packs = F / VEC;  // the host picks VEC so that it divides F
  // 64-bit offsets: N * 8 * F may exceed 2^31.
  const P* f_n = reinterpret_cast<const P*>(feats + n * 8 * F);
  P* out_n = reinterpret_cast<P*>(out + n * F);
  // A row may have more packs than the block is wide: step over them in strides of blockDim.x.
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    opmath_t acc[VEC] = {};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const P x = f_n[k * packs + p];
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        acc[j] += weight[k] * static_cast<opmath_t>(x.v[j]);
      }
    }
    P y;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      y.v[j] = static_cast<scalar_t>(acc[j]);
    }
    out_n[p] = y;
  }
}

// Threads along a row (forward and backward): the row's packs, rounded up to a
// power of two below 32 (rows of 1 to 16 threads tile a warp: 32 / tx cubes a
// warp) and to whole warps from 32 on, at most 256.
static int row_width(int64_t packs) {
  if (packs >= 32) {
    return static_cast<int>(std::min<int64_t>(256, (packs + 31) / 32 * 32));
  }
  int tx = 1;
  while (tx < packs) {
    tx *= 2;
  }
  return tx;
}

template <typename scalar_t, int VEC>
static void forward_cuda_launch(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out,
                                cudaStream_t stream) {
  const int64_t N = feats.size(0), F = feats.size(2);
  const int tx = row_width(F / VEC);
  const int ty = 256 / tx;
  const int64_t blocks = (N + ty - 1) / ty;
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "trilinear: N = ", N, " is too large for one launch");
  forward_cuda_kernel<scalar_t, VEC><<<static_cast<unsigned>(blocks), dim3(tx, ty), 0, stream>>>(
      feats.const_data_ptr<scalar_t>(), points.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), N, F);
  // A bad launch (too many threads, no kernel image for this GPU) fails
  // silently unless asked; this turns it into a Python exception here.
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void trilinear_forward_cuda(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out) {
  // Launch on the tensors' GPU, not on whatever device is current (cuda:1 inputs
  // while cuda:0 is current would otherwise run on the wrong GPU).
  const c10::cuda::CUDAGuard guard(feats.device());
  // Kernels go on the current stream: PyTorch orders work per stream, and code
  // that runs us under torch.cuda.stream(s) expects our kernel on s.
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "trilinear_forward_cuda", [&] {
    constexpr int kVec = 16 / sizeof(scalar_t);
    // Packs need F to be a multiple of kVec and every row to start on a 16-byte boundary.
    if (feats.size(2) % kVec == 0 && aligned16(feats.const_data_ptr()) && aligned16(out.const_data_ptr())) {
      forward_cuda_launch<scalar_t, kVec>(feats, points, out, stream);
    } else {
      forward_cuda_launch<scalar_t, 1>(feats, points, out, stream);
    }
  });
}

// Backward. Same decomposition as the forward: row threadIdx.y of the block
// owns cube n, its threads step over packs of VEC features, and a row is as
// wide as in the forward (row_width: 1 to 16 threads, or whole warps).
//
// grad_feats[n, k, f] = w_k * grad_out[n, f]: each element has exactly one
// writer, like the forward. grad_points[n, :] is a sum over f of per-f terms,
// computed by all the threads of the row. Letting each thread write its
// partial sum would race (the last writer wins); atomicAdd works but lands the
// additions in an order that changes from run to run, and with it the rounding
// of the float sum. Instead the row reduces in two steps, in a fixed order (so
// the result is the same every run):
//   1. inside each warp, with register shuffles (no memory at all), over the
//      lanes of one row (all 32, or the row's 1 to 16 when a warp holds several);
//   2. across the warps of the row, through shared memory (rows of more than one
//      warp); one thread writes.
// That last step is a template parameter of the kernel (Write), so that a
// variant of the kernel can change it and nothing else (chapter 04 compares
// it with atomicAdd versions, 04_backward/README.md section 5).

// The points-gradient reduction (chapter 04's exercise points-reduction, 04_backward/README.md section 5).
// Every thread of the block calls it, valid or not, with its partial sums
// (gx, gy, gz) over the features it handled; threads of rows past the last cube
// (valid = false) bring zeros. The block is (blockDim.x, blockDim.y) with
// blockDim.x a power of two from 1 to 16 (a warp holds 32 / blockDim.x rows) or a
// multiple of 32 up to 256 (a row is 1 to 8 warps), and blockDim.y = 256 / blockDim.x:
// row threadIdx.y owns cube n. On return, grad_points[3 n + d] = 1/2 * (sum of the
// row's partials for d), written once per valid cube, rounded to scalar_t once.
template <typename scalar_t, typename opmath_t>
__device__ __forceinline__ void reduce_points_grad(opmath_t gx, opmath_t gy, opmath_t gz, bool valid, int64_t n,
                                                   scalar_t* __restrict__ grad_points) {
  // 1. Warp: the shuffles run within segments of `width` lanes, a row's share
  //    of the warp (all 32, or the whole row when it is shorter than a warp);
  //    after the loop, the segment's first lane holds the segment's sum.
  const int width = blockDim.x < 32 ? blockDim.x : 32;
  for (int offset = width / 2; offset > 0; offset /= 2) {
    gx += __shfl_down_sync(0xffffffffu, gx, offset, width);
    gy += __shfl_down_sync(0xffffffffu, gy, offset, width);
    gz += __shfl_down_sync(0xffffffffu, gz, offset, width);
  }
  // A row of a warp or less is one segment: its first thread holds the row's sum.
  opmath_t sum[3] = {gx, gy, gz};
  if (blockDim.x > 32) {  // the same for the whole block: every thread or none meets the barrier
    // 2. Row: lane 0 of each warp leaves its sum in shared memory (at most 8
    //    warps in a 256-thread block); the row's first thread adds them up.
    __shared__ opmath_t partial[8][3];
    const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;
    if (threadIdx.x % 32 == 0) {
      partial[warp][0] = gx;
      partial[warp][1] = gy;
      partial[warp][2] = gz;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const int warps_per_row = blockDim.x / 32;
      for (int d = 0; d < 3; ++d) {
        sum[d] = 0;
        for (int i = warp; i < warp + warps_per_row; ++i) {
          sum[d] += partial[i][d];
        }
      }
    }
  }
  // 3. One store per valid cube, by the row's first thread.
  if (valid && threadIdx.x == 0) {
    // du/dx = 1/2: the chain rule through u = (x + 1) / 2.
    for (int d = 0; d < 3; ++d) {
      grad_points[3 * n + d] = static_cast<scalar_t>(opmath_t(0.5) * sum[d]);
    }
  }
}

// The kernel's last step: the row's partial sums reach grad_points through the
// fixed-order reduction above.
struct RowReduce {
  template <typename scalar_t, typename opmath_t>
  __device__ __forceinline__ static void write(opmath_t gx, opmath_t gy, opmath_t gz, bool valid, int64_t n,
                                               scalar_t* __restrict__ grad_points) {
    reduce_points_grad<scalar_t, opmath_t>(gx, gy, gz, valid, n, grad_points);
  }
};

// 256 threads a block, and at least 4 blocks on an SM for types of 4 bytes or less: the
// compiler keeps each thread within 64 registers, so that 32 warps an SM have loads in
// flight. float64 would spill at 64 and asks for 3 blocks (at most 80 registers).
template <typename scalar_t, int VEC, bool NEED_FEATS, bool NEED_POINTS, typename Write>
__global__ void __launch_bounds__(256, sizeof(scalar_t) <= 4 ? 4 : 3)
    backward_cuda_kernel(const scalar_t* __restrict__ grad_out, const scalar_t* __restrict__ feats,
                         const scalar_t* __restrict__ points, scalar_t* __restrict__ grad_feats,
                         scalar_t* __restrict__ grad_points, int64_t N, int64_t F) {
  using opmath_t = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t, VEC>;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  // No early return: every thread of the block must reach __syncthreads() below.
  const bool valid = n < N;
  opmath_t gx = 0, gy = 0, gz = 0;
  if (valid) {
    const opmath_t u = to_unit<opmath_t>(points[3 * n + 0]);
    const opmath_t v = to_unit<opmath_t>(points[3 * n + 1]);
    const opmath_t w = to_unit<opmath_t>(points[3 * n + 2]);
    opmath_t weight[8], d_du[8], d_dv[8], d_dw[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      weight[k] = corner_weight<opmath_t>(k, u, v, w);
      corner_weight_grad<opmath_t>(k, u, v, w, d_du[k], d_dv[k], d_dw[k]);
    }
    const int64_t packs = F / VEC;  // the host picks VEC so that it divides F
    const P* g_n = reinterpret_cast<const P*>(grad_out + n * F);
    // 64-bit offsets: N * 8 * F may exceed 2^31. Only the points' gradient reads feats (null otherwise).
    const P* f_n = NEED_POINTS ? reinterpret_cast<const P*>(feats + n * 8 * F) : nullptr;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const P g = g_n[p];
      P value[8];  // feats[n, k, the pack's features], read first: all of the pack's loads wait together
      if constexpr (NEED_POINTS) {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          value[k] = f_n[k * packs + p];
        }
      }
      if constexpr (NEED_FEATS) {
        P* gf_n = reinterpret_cast<P*>(grad_feats + n * 8 * F);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          P out;
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            out.v[j] = static_cast<scalar_t>(weight[k] * static_cast<opmath_t>(g.v[j]));
          }
          gf_n[k * packs + p] = out;
        }
      }
      if constexpr (NEED_POINTS) {
        // The pack's share of gx = sum over f of g[f] * sum over k of feats[n, k, f] * dw_k/du,
        // summed corner by corner: dot = sum over the pack of g * feats[n, k, :], one product per
        // feature, then one product per corner and coordinate (not one per feature).
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          opmath_t dot = 0;
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            dot += static_cast<opmath_t>(g.v[j]) * static_cast<opmath_t>(value[k].v[j]);
          }
          gx += dot * d_du[k];
          gy += dot * d_dv[k];
          gz += dot * d_dw[k];
        }
      }
    }
  }
  if constexpr (NEED_POINTS) {
    Write::template write<scalar_t, opmath_t>(gx, gy, gz, valid, n, grad_points);
  }
}

template <typename scalar_t, int VEC, bool NEED_FEATS, bool NEED_POINTS, typename Write>
static void backward_cuda_launch(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                                 at::Tensor& grad_feats, at::Tensor& grad_points, cudaStream_t stream) {
  const int64_t N = grad_out.size(0), F = grad_out.size(1);
  // A row of threads per cube, as wide as the packs of one cube's features
  // (row_width); as many rows as fit in 256 threads.
  const int tx = row_width(F / VEC);
  const int ty = 256 / tx;
  const int64_t blocks = (N + ty - 1) / ty;
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "trilinear_backward: N = ", N,
              " is too large for one launch");
  backward_cuda_kernel<scalar_t, VEC, NEED_FEATS, NEED_POINTS, Write>
      <<<static_cast<unsigned>(blocks), dim3(tx, ty), 0, stream>>>(
          grad_out.const_data_ptr<scalar_t>(), NEED_POINTS ? feats.const_data_ptr<scalar_t>() : nullptr,
          points.const_data_ptr<scalar_t>(), NEED_FEATS ? grad_feats.mutable_data_ptr<scalar_t>() : nullptr,
          NEED_POINTS ? grad_points.mutable_data_ptr<scalar_t>() : nullptr, N, F);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t, int VEC>
static void backward_cuda_flags(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                                at::Tensor& grad_feats, at::Tensor& grad_points, cudaStream_t stream) {
  // The flags become template arguments: a kernel compiled for "grad_feats only"
  // contains no code (and reads no memory) for the points gradient.
  if (grad_feats.defined() && grad_points.defined()) {
    backward_cuda_launch<scalar_t, VEC, true, true, RowReduce>(grad_out, feats, points, grad_feats, grad_points, stream);
  } else if (grad_feats.defined()) {
    backward_cuda_launch<scalar_t, VEC, true, false, RowReduce>(grad_out, feats, points, grad_feats, grad_points, stream);
  } else {
    backward_cuda_launch<scalar_t, VEC, false, true, RowReduce>(grad_out, feats, points, grad_feats, grad_points, stream);
  }
}

// Packs need F to be a multiple of VEC and every row of what the kernel reads
// and writes to start on a 16-byte boundary (fresh allocations do; a tensor
// that is a slice may not). feats is read only for the points' gradient.
template <typename scalar_t>
static bool can_use_packs(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& grad_feats,
                          const at::Tensor& grad_points) {
  constexpr int kVec = 16 / sizeof(scalar_t);
  return grad_out.size(1) % kVec == 0 && aligned16(grad_out.const_data_ptr()) &&
         (!grad_points.defined() || aligned16(feats.const_data_ptr())) &&
         (!grad_feats.defined() || aligned16(grad_feats.const_data_ptr()));
}

void trilinear_backward_cuda(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                             at::Tensor& grad_feats, at::Tensor& grad_points) {
  const c10::cuda::CUDAGuard guard(grad_out.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_out.scalar_type(), "trilinear_backward_cuda", [&] {
    constexpr int kVec = 16 / sizeof(scalar_t);
    if (can_use_packs<scalar_t>(grad_out, feats, grad_feats, grad_points)) {
      backward_cuda_flags<scalar_t, kVec>(grad_out, feats, points, grad_feats, grad_points, stream);
    } else {
      backward_cuda_flags<scalar_t, 1>(grad_out, feats, points, grad_feats, grad_points, stream);
    }
  });
}
