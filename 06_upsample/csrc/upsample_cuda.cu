// Chapter 06: the CUDA kernels.
//
// Work decomposition (forward and scatter: one thread per output pixel column
// w and row h; gather: per input pixel):
//
//   threadIdx.x / blockIdx.x  -> w   (the contiguous axis: a warp reads and writes 32 neighbours)
//   threadIdx.y / blockIdx.y  -> h
//   blockIdx.z                -> a group of kPlanes planes (n, c)
//
// A thread computes its taps once (they depend only on h and w) and reuses
// them for the kPlanes planes of its group: less index arithmetic per pixel,
// and several independent loads in flight per thread.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

#include "upsample.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = 65535;  // the limit of gridDim.y and gridDim.z

struct Launch {
  dim3 grid, block;
};

// Threads along W (a multiple of 32, at most 256), the rest of the block along H.
Launch launch_for(int64_t W, int64_t H, int64_t planes, int planes_per_thread) {
  const int tx = static_cast<int>(std::min<int64_t>(kThreads, (W + 31) / 32 * 32));
  const int ty = kThreads / tx;
  const int64_t gx = (W + tx - 1) / tx;
  TORCH_CHECK(gx <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: W = ", W, " is too large for one launch");
  // Grid-stride loops in the kernels cover rows and plane groups beyond 65535 blocks.
  const int64_t gy = std::min<int64_t>((H + ty - 1) / ty, kMaxGrid);
  const int64_t gz = std::min<int64_t>((planes + planes_per_thread - 1) / planes_per_thread, kMaxGrid);
  return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz)), dim3(tx, ty)};
}

// Forward: out[p, h, w] for kPlanes planes p.
template <typename scalar_t, int kPlanes>
__global__ void forward_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t planes,
                               int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out,
                               at::opmath_type<scalar_t> rh, at::opmath_type<scalar_t> rw, Mode mode) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= W_out) {
    return;
  }
  const Taps<opmath_t> xt = source_taps<opmath_t>(w, W_in, rw, mode);
  for (int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; h < H_out;
       h += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const Taps<opmath_t> yt = source_taps<opmath_t>(h, H_in, rh, mode);
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * kPlanes; p0 < planes;
         p0 += static_cast<int64_t>(gridDim.z) * kPlanes) {
#pragma unroll
      for (int k = 0; k < kPlanes; ++k) {
        const int64_t p = p0 + k;
        if (p < planes) {
          // 64-bit offsets: planes * H * W may exceed 2^31.
          out[(p * H_out + h) * W_out + w] =
              static_cast<scalar_t>(bilinear_sample<scalar_t, opmath_t>(x + p * H_in * W_in, W_in, yt, xt));
        }
      }
    }
  }
}

// Backward by scatter (what PyTorch's own kernel does): one thread per
// grad_out element adds its four weighted contributions into grad_in. Several
// threads hit the same grad_in element, so the adds must be atomic; the order
// in which they land varies between runs, and float addition is not
// associative, so the low bits of the result vary too.
// acc_t is float for float16/bfloat16: an atomicAdd on a 16-bit value would
// round after every add (and is slow: it is a 32-bit compare-and-swap loop on
// the word that holds it), so we accumulate in a float buffer and convert once.
template <typename scalar_t, typename acc_t, int kPlanes>
__global__ void scatter_kernel(const scalar_t* __restrict__ grad_out, acc_t* __restrict__ grad_in, int64_t planes,
                               int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out,
                               at::opmath_type<scalar_t> rh, at::opmath_type<scalar_t> rw, Mode mode) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= W_out) {
    return;
  }
  const Taps<opmath_t> xt = source_taps<opmath_t>(w, W_in, rw, mode);
  for (int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; h < H_out;
       h += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const Taps<opmath_t> yt = source_taps<opmath_t>(h, H_in, rh, mode);
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * kPlanes; p0 < planes;
         p0 += static_cast<int64_t>(gridDim.z) * kPlanes) {
#pragma unroll
      for (int k = 0; k < kPlanes; ++k) {
        const int64_t p = p0 + k;
        if (p < planes) {
          const opmath_t g = static_cast<opmath_t>(grad_out[(p * H_out + h) * W_out + w]);
          acc_t* plane = grad_in + p * H_in * W_in;
          const opmath_t top = (opmath_t(1) - yt.l) * g, bottom = yt.l * g;
          atomicAdd(plane + yt.i0 * W_in + xt.i0, static_cast<acc_t>((opmath_t(1) - xt.l) * top));
          atomicAdd(plane + yt.i0 * W_in + xt.i1, static_cast<acc_t>(xt.l * top));
          atomicAdd(plane + yt.i1 * W_in + xt.i0, static_cast<acc_t>((opmath_t(1) - xt.l) * bottom));
          atomicAdd(plane + yt.i1 * W_in + xt.i1, static_cast<acc_t>(xt.l * bottom));
        }
      }
    }
  }
}

// Backward by gather: one thread per grad_in element (for kPlanes planes). It
// finds the output rows and columns that read it (gather_range), and sums
// their gradients times the weights they read it with. One writer per element,
// a fixed order of additions: no atomics, and the same bits on every run.
template <typename scalar_t, int kPlanes>
__global__ void gather_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t planes,
                              int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out,
                              at::opmath_type<scalar_t> rh, at::opmath_type<scalar_t> rw, Mode mode) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= W_in) {
    return;
  }
  int64_t w_begin, w_end;
  gather_range<opmath_t>(w, W_in, W_out, rw, mode, w_begin, w_end);
  for (int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; h < H_in;
       h += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    int64_t h_begin, h_end;
    gather_range<opmath_t>(h, H_in, H_out, rh, mode, h_begin, h_end);
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * kPlanes; p0 < planes;
         p0 += static_cast<int64_t>(gridDim.z) * kPlanes) {
      const int64_t n_planes = planes - p0;  // planes left; the last group may be partial
      opmath_t acc[kPlanes];
#pragma unroll
      for (int k = 0; k < kPlanes; ++k) {
        acc[k] = 0;
      }
      for (int64_t dh = h_begin; dh < h_end; ++dh) {
        const opmath_t wy = tap_weight<opmath_t>(source_taps<opmath_t>(dh, H_in, rh, mode), h);
        opmath_t sum[kPlanes];
#pragma unroll
        for (int k = 0; k < kPlanes; ++k) {
          sum[k] = 0;
        }
        for (int64_t dw = w_begin; dw < w_end; ++dw) {
          const opmath_t wx = tap_weight<opmath_t>(source_taps<opmath_t>(dw, W_in, rw, mode), w);
#pragma unroll
          for (int k = 0; k < kPlanes; ++k) {
            if (k < n_planes) {
              sum[k] += wx * static_cast<opmath_t>(grad_out[((p0 + k) * H_out + dh) * W_out + dw]);
            }
          }
        }
#pragma unroll
        for (int k = 0; k < kPlanes; ++k) {
          acc[k] += wy * sum[k];
        }
      }
#pragma unroll
      for (int k = 0; k < kPlanes; ++k) {
        if (k < n_planes) {
          grad_in[((p0 + k) * H_in + h) * W_in + w] = static_cast<scalar_t>(acc[k]);
        }
      }
    }
  }
}

}  // namespace

void upsample_forward_cuda(const at::Tensor& x, at::Tensor& out, const ResizeGeometry& g) {
  // Launch on the tensor's GPU, whatever device is current.
  const c10::cuda::CUDAGuard guard(x.device());
  constexpr int kPlanes = 4;
  const Launch l = launch_for(g.W_out, g.H_out, g.planes, kPlanes);
  // The current stream: code running us under torch.cuda.stream(s) expects our work on s.
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "upsample_forward_cuda", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    forward_kernel<scalar_t, kPlanes><<<l.grid, l.block, 0, stream>>>(
        x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), g.planes, g.H_in, g.W_in, g.H_out, g.W_out,
        axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h),
        axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w), g.mode);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void upsample_backward_cuda(const at::Tensor& grad_out, at::Tensor& grad_in, const ResizeGeometry& g, bool gather) {
  const c10::cuda::CUDAGuard guard(grad_out.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_out.scalar_type(), "upsample_backward_cuda", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t rh = axis_ratio<opmath_t>(g.H_in, g.H_out, g.mode, g.scale_h);
    const opmath_t rw = axis_ratio<opmath_t>(g.W_in, g.W_out, g.mode, g.scale_w);
    if (gather) {
      constexpr int kPlanes = 8;
      const Launch l = launch_for(g.W_in, g.H_in, g.planes, kPlanes);
      gather_kernel<scalar_t, kPlanes><<<l.grid, l.block, 0, stream>>>(
          grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g.planes, g.H_in, g.W_in,
          g.H_out, g.W_out, rh, rw, g.mode);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    constexpr int kPlanes = 4;
    const Launch l = launch_for(g.W_out, g.H_out, g.planes, kPlanes);
    if constexpr (std::is_same_v<scalar_t, opmath_t>) {
      grad_in.zero_();  // the atomics add into it
      scatter_kernel<scalar_t, scalar_t, kPlanes><<<l.grid, l.block, 0, stream>>>(
          grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g.planes, g.H_in, g.W_in,
          g.H_out, g.W_out, rh, rw, g.mode);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    } else {
      at::Tensor acc = at::zeros(grad_in.sizes(), grad_in.options().dtype(at::kFloat));
      scatter_kernel<scalar_t, float, kPlanes><<<l.grid, l.block, 0, stream>>>(
          grad_out.const_data_ptr<scalar_t>(), acc.mutable_data_ptr<float>(), g.planes, g.H_in, g.W_in, g.H_out,
          g.W_out, rh, rw, g.mode);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      grad_in.copy_(acc);  // one rounding to float16/bfloat16, at the end
    }
  });
}
