// Chapter 05: fake quantisation, the CUDA kernel. One thread per element, in a
// grid-stride loop so that any size fits a bounded grid.
#include "quantize.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

template <typename scalar_t>
__global__ void fake_quantize_cuda_kernel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out,
                                          bool* __restrict__ mask, QuantGrid<at::opmath_type<scalar_t>> grid,
                                          int64_t numel) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    bool in_range;
    out[i] = static_cast<scalar_t>(fake_quantize_one<opmath_t>(static_cast<opmath_t>(in[i]), grid, in_range));
    mask[i] = in_range;
  }
}

void fake_quantize_cuda(const at::Tensor& x, double scale, int64_t zero_point, int64_t quant_min, int64_t quant_max,
                        at::Tensor& out, at::Tensor& mask) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t numel = x.numel();
  const int threads = 256;
  // Enough blocks to fill the GPU several times over; the loop covers the rest.
  const int64_t blocks = std::min<int64_t>((numel + threads - 1) / threads, 65535);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "fake_quantize_cuda", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const QuantGrid<opmath_t> grid = make_quant_grid<opmath_t>(scale, zero_point, quant_min, quant_max);
    fake_quantize_cuda_kernel<scalar_t><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
        x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), mask.mutable_data_ptr<bool>(), grid, numel);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}
