// The GPU-free judge of chapter 06: the temporaries its CUDA files make with
// torch::stable::new_empty (the plan's tables, the scatter's float accumulators) live in
// guard-paged memory too (emulate.py renames the calls to this one), so that a thread reading
// a table before its bounds check, past the table's end, is stopped like one reading a tensor.
#include <torch/csrc/inductor/aoti_torch/utils.h>
#include "cuda_emu_stable.h"

#include "bind_common.h"

namespace emu {
torch::stable::Tensor stable_new_empty_named(const char* name, const torch::stable::Tensor& like,
                                             std::vector<int64_t> sizes,
                                             std::optional<torch::headeronly::ScalarType> dtype) {
  // on the CPU, as every tensor of the judge; the dtype given, else like's
  const auto type = static_cast<at::ScalarType>(dtype.value_or(like.scalar_type()));
  at::Tensor t = guarded_empty(sizes, at::TensorOptions().dtype(type), true, name);
  return torch::stable::Tensor(torch::aot_inductor::new_tensor_handle(std::move(t)));
}
}  // namespace emu
