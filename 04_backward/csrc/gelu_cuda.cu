// Chapter 04 warm-up: GELU CUDA kernels. Elementwise: one thread per element,
// in a grid-stride loop (a fixed number of blocks walks over any size).
#include "gelu.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

template <typename scalar_t>
__global__ void gelu_forward_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t numel) {
  using opmath_t = at::opmath_type<scalar_t>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<scalar_t>(gelu_value<opmath_t>(static_cast<opmath_t>(x[i])));
  }
}

template <typename scalar_t>
__global__ void gelu_backward_kernel(const scalar_t* __restrict__ grad_out, const scalar_t* __restrict__ x,
                                     scalar_t* __restrict__ grad_in, int64_t numel) {
  using opmath_t = at::opmath_type<scalar_t>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    grad_in[i] = static_cast<scalar_t>(static_cast<opmath_t>(grad_out[i]) *
                                       gelu_derivative<opmath_t>(static_cast<opmath_t>(x[i])));
  }
}

// Enough blocks to fill the GPU several times over, no more.
static unsigned grid_for(int64_t numel, int threads) {
  const int64_t wanted = (numel + threads - 1) / threads;
  return static_cast<unsigned>(std::min<int64_t>(wanted, 132 * 32));
}

void gelu_forward_cuda(const at::Tensor& x, at::Tensor& out) {
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu_forward_cuda", [&] {
    gelu_forward_kernel<scalar_t><<<grid_for(x.numel(), 256), 256, 0, stream>>>(
        x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

void gelu_backward_cuda(const at::Tensor& grad_out, const at::Tensor& x, at::Tensor& grad_in) {
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu_backward_cuda", [&] {
    gelu_backward_kernel<scalar_t><<<grid_for(x.numel(), 256), 256, 0, stream>>>(
        grad_out.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), grad_in.mutable_data_ptr<scalar_t>(),
        x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}
