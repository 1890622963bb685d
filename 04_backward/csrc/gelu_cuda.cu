// Chapter 04 warm-up: GELU CUDA kernels. Elementwise work needs no cleverness in
// the arithmetic; its speed is the speed of the memory traffic. Two habits get
// it close to the copy bandwidth:
//   - enough threads, each with several loads in flight: a block per 1024
//     packs (kUnroll per thread, their loads issued before any result is
//     computed), and a grid-stride loop so that no size is too large;
//   - 16-byte loads and stores: each thread moves a "pack" of 4 floats, 8 halves
//     or 2 doubles per instruction instead of one element, so fewer, wider
//     memory transactions carry the same bytes (it matters most for 2-byte types).
#include "gelu.h"
#include "pack.cuh"

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>
#include <limits>

template <typename scalar_t>
struct GeluForward {
  __device__ scalar_t operator()(scalar_t x, scalar_t /*unused*/) const {
    using opmath_t = at::opmath_type<scalar_t>;
    return static_cast<scalar_t>(gelu_value<opmath_t>(static_cast<opmath_t>(x)));
  }
};

template <typename scalar_t>
struct GeluBackward {
  // The chain rule: dL/dx = dL/dgelu * gelu'(x).
  __device__ scalar_t operator()(scalar_t x, scalar_t grad) const {
    using opmath_t = at::opmath_type<scalar_t>;
    return static_cast<scalar_t>(static_cast<opmath_t>(grad) * gelu_derivative<opmath_t>(static_cast<opmath_t>(x)));
  }
};

// out[i] = op(x[i], grad[i]); grad may be null (the forward has no second input).
// Each step of a thread's loop handles kUnroll packs, a stride apart: all their
// loads are issued before the first result is computed, so kUnroll 16-byte
// loads per thread are in flight at once instead of one.
constexpr int kUnroll = 4;

template <typename scalar_t, int VEC, typename Op>
__global__ void elementwise_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ grad,
                                   scalar_t* __restrict__ out, int64_t numel, Op op) {
  using P = Pack<scalar_t, VEC>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packs = numel / VEC;
  for (int64_t i0 = first; i0 < packs; i0 += kUnroll * stride) {
    P xv[kUnroll], gv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = i0 + u * stride;
      if (i < packs) {
        xv[u] = reinterpret_cast<const P*>(x)[i];
        gv[u] = grad ? reinterpret_cast<const P*>(grad)[i] : xv[u];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = i0 + u * stride;
      if (i < packs) {
        P ov;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          ov.v[j] = op(xv[u].v[j], gv[u].v[j]);
        }
        reinterpret_cast<P*>(out)[i] = ov;
      }
    }
  }
  // The last numel % VEC elements, one at a time.
  for (int64_t i = packs * VEC + first; i < numel; i += stride) {
    out[i] = op(x[i], grad ? grad[i] : x[i]);
  }
}

template <typename scalar_t, typename Op>
static void launch_elementwise(const scalar_t* x, const scalar_t* grad, scalar_t* out, int64_t numel, Op op) {
  constexpr int kVec = 16 / sizeof(scalar_t);
  constexpr int kThreads = 256;
  // Blocks enough for every pack (kUnroll per thread), up to the grid's limit;
  // the loop in the kernel covers anything beyond it. A fixed grid of 8 blocks
  // per SM, each thread looping over many packs, measured 10% slower (H100,
  // float32 forward 0.203 vs 0.183 ms): see the README.
  const bool vectorize = aligned16(x) && aligned16(out) && (grad == nullptr || aligned16(grad));
  const int vec = vectorize ? kVec : 1;
  const int64_t wanted = (numel / vec + kThreads * kUnroll - 1) / (kThreads * kUnroll);
  const unsigned blocks =
      static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(wanted, std::numeric_limits<int32_t>::max())));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (vectorize) {
    elementwise_kernel<scalar_t, kVec><<<blocks, kThreads, 0, stream>>>(x, grad, out, numel, op);
  } else {
    elementwise_kernel<scalar_t, 1><<<blocks, kThreads, 0, stream>>>(x, grad, out, numel, op);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void gelu_forward_cuda(const at::Tensor& x, at::Tensor& out) {
  const c10::cuda::CUDAGuard guard(x.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu_forward_cuda", [&] {
    launch_elementwise<scalar_t>(x.const_data_ptr<scalar_t>(), nullptr, out.mutable_data_ptr<scalar_t>(), x.numel(),
                                 GeluForward<scalar_t>());
  });
}

void gelu_backward_cuda(const at::Tensor& grad_out, const at::Tensor& x, at::Tensor& grad_in) {
  const c10::cuda::CUDAGuard guard(x.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu_backward_cuda", [&] {
    launch_elementwise<scalar_t>(x.const_data_ptr<scalar_t>(), grad_out.const_data_ptr<scalar_t>(),
                                 grad_in.mutable_data_ptr<scalar_t>(), x.numel(), GeluBackward<scalar_t>());
  });
}
