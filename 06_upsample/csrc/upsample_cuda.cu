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
// and several independent loads in flight per thread. Index arithmetic is
// 64-bit where it multiplies by a plane count (N * C * H * W may pass 2^31).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <type_traits>

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

// The forward for N consecutive planes at one output pixel. x and out point at
// the first plane's data; the planes are plane_in / plane_out elements apart.
// N is a compile-time constant, so the loop unrolls into N independent groups
// of four loads, which the GPU can all have in flight at once.
template <int N, typename scalar_t, typename T>
__device__ __forceinline__ void forward_planes(const scalar_t* __restrict__ x, int64_t plane_in,
                                               scalar_t* __restrict__ out, int64_t plane_out, int64_t W_in,
                                               const Taps<T>& yt, const Taps<T>& xt) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    out[k * plane_out] = static_cast<scalar_t>(bilinear_sample<scalar_t, T>(x + k * plane_in, W_in, yt, xt));
  }
}

template <typename scalar_t, int kPlanes>
__global__ void forward_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t planes,
                               int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out,
                               at::opmath_type<scalar_t> rh, at::opmath_type<scalar_t> rw, Mode mode) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= W_out) {
    return;
  }
  const int64_t plane_in = H_in * W_in, plane_out = H_out * W_out;  // 64-bit: planes * plane may pass 2^31
  const Taps<opmath_t> xt = source_taps<opmath_t>(w, W_in, rw, mode);
  for (int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; h < H_out;
       h += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const Taps<opmath_t> yt = source_taps<opmath_t>(h, H_in, rh, mode);
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * kPlanes; p0 < planes;
         p0 += static_cast<int64_t>(gridDim.z) * kPlanes) {
      const scalar_t* xp = x + p0 * plane_in;
      scalar_t* op = out + p0 * plane_out + h * W_out + w;
      if (planes - p0 >= kPlanes) {
        // A full group: no per-plane bounds checks, so nothing stops the
        // compiler from issuing all the loads before the first store.
        forward_planes<kPlanes>(xp, plane_in, op, plane_out, W_in, yt, xt);
      } else {
        for (int64_t k = 0; k < planes - p0; ++k) {  // the last, partial group
          forward_planes<1>(xp + k * plane_in, plane_in, op + k * plane_out, plane_out, W_in, yt, xt);
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
// round the running sum to 16 bits after every add, so we accumulate in a
// float buffer and convert once.
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
// sums the gradients of the output pixels that read it, times the weights
// they read it with. One writer per element, a fixed order of additions: no
// atomics, no zeroing pass, and the same bits on every run.
//
// Which outputs read input index i, and with which weights, depends only on
// the axis, not on the plane or on the other axis. So plan_kernel first builds
// two small tables per axis (taps per output index, [begin, end) per input
// index), and the gather kernel only looks them up: no search per thread.
template <typename T>
struct AxisPlan {
  int64_t in, out;
  T ratio;
  int64_t* i0;     // [out] first tap of each output index
  int64_t* i1;     // [out] second tap
  T* l;            // [out] weight of the second tap
  int64_t* begin;  // [in]  first output index that reads each input index
  int64_t* end;    // [in]  one past the last
};

template <typename T>
__global__ void plan_kernel(AxisPlan<T> rows, AxisPlan<T> cols, Mode mode) {
  const AxisPlan<T> a = blockIdx.y == 0 ? rows : cols;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < a.out) {
    const Taps<T> taps = source_taps<T>(t, a.in, a.ratio, mode);
    a.i0[t] = taps.i0;
    a.i1[t] = taps.i1;
    a.l[t] = taps.l;
  }
  if (t < a.in) {
    gather_range<T>(t, a.in, a.out, a.ratio, mode, a.begin[t], a.end[t]);
  }
}

// grad_in[h, w] for N consecutive planes (grad_out and grad_in point at the first).
template <int N, typename scalar_t, typename T>
__device__ __forceinline__ void gather_planes(const scalar_t* __restrict__ grad_out, int64_t plane_out,
                                              scalar_t* __restrict__ grad_in, int64_t plane_in, int64_t h,
                                              int64_t w, const AxisPlan<T>& rows, const AxisPlan<T>& cols) {
  T acc[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    acc[k] = 0;
  }
  const int64_t w_begin = cols.begin[w], w_end = cols.end[w];
  for (int64_t dh = rows.begin[h]; dh < rows.end[h]; ++dh) {
    const T wy = tap_weight<T>(Taps<T>{rows.i0[dh], rows.i1[dh], rows.l[dh]}, h);
    const scalar_t* g_row = grad_out + dh * cols.out;
    for (int64_t dw = w_begin; dw < w_end; ++dw) {
      const T weight = wy * tap_weight<T>(Taps<T>{cols.i0[dw], cols.i1[dw], cols.l[dw]}, w);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        acc[k] += weight * static_cast<T>(g_row[k * plane_out + dw]);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < N; ++k) {
    grad_in[k * plane_in] = static_cast<scalar_t>(acc[k]);
  }
}

template <typename scalar_t, int kPlanes>
__global__ void gather_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in, int64_t planes,
                              AxisPlan<at::opmath_type<scalar_t>> rows, AxisPlan<at::opmath_type<scalar_t>> cols) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= cols.in) {
    return;
  }
  const int64_t plane_in = rows.in * cols.in, plane_out = rows.out * cols.out;
  for (int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; h < rows.in;
       h += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * kPlanes; p0 < planes;
         p0 += static_cast<int64_t>(gridDim.z) * kPlanes) {
      const scalar_t* go = grad_out + p0 * plane_out;
      scalar_t* gi = grad_in + p0 * plane_in + h * cols.in + w;
      if (planes - p0 >= kPlanes) {
        gather_planes<kPlanes>(go, plane_out, gi, plane_in, h, w, rows, cols);
      } else {
        for (int64_t k = 0; k < planes - p0; ++k) {
          gather_planes<1>(go + k * plane_out, plane_out, gi + k * plane_in, plane_in, h, w, rows, cols);
        }
      }
    }
  }
}

}  // namespace

void upsample_forward_cuda(const at::Tensor& x, at::Tensor& out, const ResizeGeometry& g) {
  // Launch on the tensor's GPU, whatever device is current.
  const c10::cuda::CUDAGuard guard(x.device());
  constexpr int kPlanes = 8;
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
      // The plan: 3 values per output index and 2 per input index, per axis.
      const at::Tensor index = at::empty({2 * (g.H_in + g.W_in) + 2 * (g.H_out + g.W_out)},
                                         grad_out.options().dtype(at::kLong));
      const at::Tensor lambda = at::empty({g.H_out + g.W_out},
                                          grad_out.options().dtype(c10::CppTypeToScalarType<opmath_t>::value));
      int64_t* ip = index.mutable_data_ptr<int64_t>();
      opmath_t* lp = lambda.mutable_data_ptr<opmath_t>();
      const AxisPlan<opmath_t> rows{g.H_in, g.H_out, rh, ip, ip + g.H_out, lp,
                                    ip + 2 * g.H_out, ip + 2 * g.H_out + g.H_in};
      ip += 2 * (g.H_out + g.H_in);
      const AxisPlan<opmath_t> cols{g.W_in, g.W_out, rw, ip, ip + g.W_out, lp + g.H_out,
                                    ip + 2 * g.W_out, ip + 2 * g.W_out + g.W_in};
      const int64_t longest = std::max({g.H_in, g.W_in, g.H_out, g.W_out});
      const dim3 plan_grid(static_cast<unsigned>((longest + kThreads - 1) / kThreads), 2);
      plan_kernel<opmath_t><<<plan_grid, kThreads, 0, stream>>>(rows, cols, g.mode);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      constexpr int kPlanes = 8;
      const Launch l = launch_for(g.W_in, g.H_in, g.planes, kPlanes);
      gather_kernel<scalar_t, kPlanes><<<l.grid, l.block, 0, stream>>>(
          grad_out.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(), g.planes, rows, cols);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    constexpr int kPlanes = 4;
    const Launch l = launch_for(g.W_out, g.H_out, g.planes, kPlanes);
    // float and double: the atomics add straight into grad_in. float16 and
    // bfloat16: into a float buffer, converted once at the end.
    using acc_t = std::conditional_t<std::is_same_v<scalar_t, opmath_t>, scalar_t, float>;
    constexpr bool direct = std::is_same_v<acc_t, scalar_t>;
    at::Tensor acc = direct ? grad_in : at::empty(grad_in.sizes(), grad_in.options().dtype(at::kFloat));
    acc.zero_();  // the atomics add into it
    scatter_kernel<scalar_t, acc_t, kPlanes><<<l.grid, l.block, 0, stream>>>(
        grad_out.const_data_ptr<scalar_t>(), acc.mutable_data_ptr<acc_t>(), g.planes, g.H_in, g.W_in, g.H_out,
        g.W_out, rh, rw, g.mode);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (!direct) {
      grad_in.copy_(acc);  // one rounding to float16/bfloat16, at the end
    }
  });
}
