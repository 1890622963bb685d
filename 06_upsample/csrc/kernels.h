#pragma once
// Chapter 06: what the kernels receive, and the header-only stand-ins for what the
// ATen API provided.
//
// The kernels see torch::stable::Tensor (torch/csrc/stable/tensor.h): a handle
// whose every method is a call through a C function of libtorch (the "shim"),
// so nothing about at::Tensor's layout is compiled into this library.
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch_v2.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>
#include <torch/headeronly/util/shim_utils.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "upsample.h"

// at::opmath_type<scalar_t>, which lives in ATen: the type a kernel computes in.
// float for float16/bfloat16 (their arithmetic is done in float), else the type itself.
template <typename scalar_t>
struct OpMath {
  using type = scalar_t;
};
template <>
struct OpMath<torch::headeronly::Half> {
  using type = float;
};
template <>
struct OpMath<torch::headeronly::BFloat16> {
  using type = float;
};
template <typename scalar_t>
using opmath_type = typename OpMath<scalar_t>::type;

// AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, ...) lives in ATen; its
// header-only counterpart is THO_DISPATCH_V2 (torch/headeronly/core/Dispatch_v2.h:
// macros, compiled into this library, nothing looked up in libtorch at run time):
// one switch over the dtypes listed, running the body with `scalar_t` defined:
//
//   THO_DISPATCH_V2(t.scalar_type(), "name", AT_WRAP(([&] {
//     kernel<scalar_t><<<grid, block, 0, stream>>>(...);
//   })), AT_FLOATING_TYPES, ScalarType::Half, ScalarType::BFloat16);
//
// The body is one macro argument: AT_WRAP lets its commas through, and the extra
// parentheses around the lambda keep them inside one argument on the way down
// (without them, the comma of `std::pair<int, float>` or of `<<<grid, block>>>`
// splits the lambda into pieces). A dtype not listed raises "not implemented for".

// A new, uninitialised (N, C, H, W) tensor on like's device, in like's dtype unless told, packed
// NCHW or channels-last (strides (HWC, 1, WC, C)), with the strides at::empty gives that memory
// format. One C function of libtorch, aoti_torch_empty_strided (at::empty_strided): the
// torch::stable::new_empty and empty of torch 2.10 find their aten op by name in the dispatcher
// at every call, which a small tensor's call notices.
inline torch::stable::Tensor new_packed(const torch::stable::Tensor& like, int64_t N, int64_t C, int64_t H,
                                        int64_t W, bool channels_last,
                                        std::optional<torch::headeronly::ScalarType> dtype = std::nullopt) {
  const int64_t sizes[4] = {N, C, H, W};
  int64_t strides[4];
  if (channels_last) {  // c10::get_channels_last_strides_2d
    strides[1] = 1;
    strides[3] = C;
    strides[2] = C * W;
    strides[0] = C * W * H;
  } else {  // contiguous: an axis of size 0 counts as 1
    strides[3] = 1;
    strides[2] = std::max<int64_t>(W, 1);
    strides[1] = strides[2] * std::max<int64_t>(H, 1);
    strides[0] = strides[1] * std::max<int64_t>(C, 1);
  }
  int32_t code = 0, device_type = 0, device_index = 0;
  if (dtype.has_value()) {
    code = torch::stable::detail::to<int32_t>(torch::stable::detail::from(*dtype));
  } else {
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(like.get(), &code));
  }
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(like.get(), &device_type));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(like.get(), &device_index));
  AtenTensorHandle handle = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(4, sizes, strides, code, device_type, device_index, &handle));
  torch::stable::Tensor t(handle);
  // Under the course's tests (CH06_POISON_OUTPUTS=1, set by tests/test_06_upsample.py) every new
  // tensor starts as NaN, so an element that no kernel writes fails a test instead of passing on
  // whatever the memory held. torch.empty does this under torch.utils.deterministic's
  // fill_uninitialized_memory; aoti_torch_empty_strided does not.
  const char* poison = std::getenv("CH06_POISON_OUTPUTS");
  if (poison != nullptr && poison[0] == '1') {
    torch::stable::fill_(t, std::numeric_limits<double>::quiet_NaN());
  }
  return t;
}

void upsample_forward_cpu(const torch::stable::Tensor& x, torch::stable::Tensor& out, const ResizeGeometry& g);
void upsample_backward_cpu(const torch::stable::Tensor& grad_out, torch::stable::Tensor& grad_in,
                           const ResizeGeometry& g);
#ifdef WITH_CUDA
// The CUDA side (dispatch.cu). `kernel`: empty, the table's choice (ladder.h);
// else the name of a kernel of the ladder, which must apply to the call.
void upsample_forward_cuda(const torch::stable::Tensor& x, torch::stable::Tensor& out, const ResizeGeometry& g,
                           std::string_view kernel = {});
// gather: true = gather (deterministic), false = scatter (atomicAdd)
void upsample_backward_cuda(const torch::stable::Tensor& grad_out, torch::stable::Tensor& grad_in,
                            const ResizeGeometry& g, bool gather, std::string_view kernel = {});
// The name of the kernel a call takes (nothing is launched), and the table itself.
std::string upsample_kernel_name_cuda(const torch::stable::Tensor& in, torch::stable::Tensor& out,
                                      const ResizeGeometry& g, bool forward, bool gather);
std::string upsample_kernel_table_cuda();
#endif
