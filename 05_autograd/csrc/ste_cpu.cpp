// Chapter 05: round (ties to even), the entry point and the CPU kernel.
#include "round.h"
#include "ste.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

at::Tensor round_forward(const at::Tensor& x_in) {
  TORCH_CHECK(at::isFloatingType(x_in.scalar_type()),
              "round: x must be float64, float32, float16 or bfloat16, got ", x_in.scalar_type());
  TORCH_CHECK(x_in.is_cpu() || x_in.is_cuda(), "round: x must be on the CPU or a CUDA GPU, got ", x_in.device());
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) {
    return out;
  }
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    round_cuda(x, out);
#else
    TORCH_CHECK(false, "round: this extension was built without CUDA, so it cannot take tensors on ", x.device(),
                "; run ./course doctor to see why");
#endif
  } else {
    round_cpu(x, out);
  }
  return out;
}

void round_cpu(const at::Tensor& x, at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "round_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        o[i] = static_cast<scalar_t>(round_half_even(static_cast<opmath_t>(in[i])));
      }
    });
  });
}
