#pragma once
// The GPU-free judge (cuda_emu.h), for CUDA files on the LibTorch stable ABI: their calls of
// torch::stable::new_empty come here (emulate.py renames them and includes this header), so that
// temporaries (the plan's tables, the scatter's accumulators) are guard-paged like the tensors:
// a thread reading a table before its bounds check, past the table's end, is stopped. Defined in
// emu/bind_06_tables.cpp.
#include <torch/csrc/stable/tensor.h>

#include <optional>
#include <vector>

namespace emu {
torch::stable::Tensor stable_new_empty_named(const char* name, const torch::stable::Tensor& like,
                                             std::vector<int64_t> sizes,
                                             std::optional<torch::headeronly::ScalarType> dtype = std::nullopt);
// A temporary not assigned to a name (emulate.py names the others)
inline torch::stable::Tensor stable_new_empty(const torch::stable::Tensor& like, std::vector<int64_t> sizes,
                                              std::optional<torch::headeronly::ScalarType> dtype = std::nullopt) {
  return stable_new_empty_named("a temporary (torch::stable::new_empty)", like, std::move(sizes), dtype);
}
}  // namespace emu
