#pragma once
// The GPU-free judge: c10's CUDA guard and stream, for a CPU build (cuda_emu.h).
#include <c10/core/Device.h>

#include "cuda_emu.h"

namespace c10 {
namespace cuda {
struct CUDAGuard {
  explicit CUDAGuard(c10::Device) {}
  explicit CUDAGuard(c10::DeviceIndex) {}
};
struct OptionalCUDAGuard {
  OptionalCUDAGuard() = default;
  explicit OptionalCUDAGuard(c10::Device) {}
  explicit OptionalCUDAGuard(std::optional<c10::Device>) {}
};
struct CUDAStream {
  cudaStream_t stream() const { return ::emu::current_stream(); }
  operator cudaStream_t() const { return ::emu::current_stream(); }
};
inline CUDAStream getCurrentCUDAStream(c10::DeviceIndex = -1) { return {}; }
}  // namespace cuda
}  // namespace c10
