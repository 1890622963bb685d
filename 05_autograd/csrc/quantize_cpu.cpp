// Chapter 05: fake quantisation, the entry point and the CPU kernel.
#include "quantize.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

std::tuple<at::Tensor, at::Tensor> fake_quantize_forward(const at::Tensor& x_in, double scale, int64_t zero_point,
                                                         int64_t quant_min, int64_t quant_max) {
  const at::ScalarType dtype = x_in.scalar_type();
  TORCH_CHECK(dtype == at::kDouble || dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16,
              "fake_quantize: x must be float64, float32, float16 or bfloat16, got ", dtype);
  TORCH_CHECK(x_in.is_cpu() || x_in.is_cuda(), "fake_quantize: x must be on the CPU or a CUDA GPU, got ", x_in.device());
  // scale is inverted in float for float inputs: it must be a normal float, so
  // that neither scale nor 1 / scale over- or underflows there.
  TORCH_CHECK(std::isfinite(scale) && scale >= std::numeric_limits<float>::min() &&
                  scale <= std::numeric_limits<float>::max(),
              "fake_quantize: scale must be a positive, finite, normal float number (1.2e-38 to 3.4e38), got ", scale);
  TORCH_CHECK(quant_min <= quant_max, "fake_quantize: quant_min must not exceed quant_max, got quant_min = ",
              quant_min, " and quant_max = ", quant_max);
  // Levels are computed in float for float inputs: every integer up to 2^24 is exact there.
  constexpr int64_t kExact = int64_t(1) << 24;
  TORCH_CHECK(quant_min >= -kExact && quant_max <= kExact,
              "fake_quantize: quant_min and quant_max must lie in [-2^24, 2^24], got [", quant_min, ", ", quant_max, "]");
  TORCH_CHECK(quant_min <= zero_point && zero_point <= quant_max,
              "fake_quantize: zero_point must lie in [quant_min, quant_max] = [", quant_min, ", ", quant_max, "], got ",
              zero_point);
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  at::Tensor mask = at::empty(x.sizes(), x.options().dtype(at::kBool));
  if (x.numel() == 0) {
    return {out, mask};
  }
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    fake_quantize_cuda(x, scale, zero_point, quant_min, quant_max, out, mask);
#else
    TORCH_CHECK(false, "fake_quantize: this extension was built without CUDA, so it cannot take tensors on ",
                x.device(), "; run ./course doctor to see why");
#endif
  } else {
    fake_quantize_cpu(x, scale, zero_point, quant_min, quant_max, out, mask);
  }
  return {out, mask};
}

void fake_quantize_cpu(const at::Tensor& x, double scale, int64_t zero_point, int64_t quant_min, int64_t quant_max,
                       at::Tensor& out, at::Tensor& mask) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "fake_quantize_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const QuantGrid<opmath_t> grid = make_quant_grid<opmath_t>(scale, zero_point, quant_min, quant_max);
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    bool* m = mask.mutable_data_ptr<bool>();
    at::parallel_for(0, x.numel(), 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        bool in_range;
        o[i] = static_cast<scalar_t>(fake_quantize_one<opmath_t>(static_cast<opmath_t>(in[i]), grid, in_range));
        m[i] = in_range;
      }
    });
  });
}
