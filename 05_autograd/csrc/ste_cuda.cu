// Chapter 05: round (ties to even), the CUDA kernel. One thread per element,
// in a grid-stride loop so that any size fits a bounded grid.
#include "round.h"
#include "ste.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

template <typename scalar_t>
__global__ void round_cuda_kernel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, int64_t numel) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    out[i] = static_cast<scalar_t>(round_half_even(static_cast<opmath_t>(in[i])));
  }
}

void round_cuda(const at::Tensor& x, at::Tensor& out) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t numel = x.numel();
  const int threads = 256;
  // Enough blocks to fill the GPU several times over; the loop covers the rest.
  const int64_t blocks = std::min<int64_t>((numel + threads - 1) / threads, 65535);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "round_cuda", [&] {
    round_cuda_kernel<scalar_t><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
        x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), numel);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}
