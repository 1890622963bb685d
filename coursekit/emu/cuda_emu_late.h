#pragma once
// The GPU-free judge (cuda_emu.h): what the host side of a CUDA file asks of the CUDA
// runtime and of PyTorch's CUDA layer, answered on the CPU. Included after a file's own
// includes (coursekit/emulate.py puts it there).
#include "cuda_emu.h"

#if __has_include(<torch/csrc/inductor/aoti_torch/c/shim.h>) && defined(AOTI_TORCH_SUCCESS)
// the stable ABI's current stream (declared by the shim only for CUDA builds)
inline AOTITorchError aoti_torch_get_current_cuda_stream(int32_t, void** stream) {
  *stream = nullptr;
  return AOTI_TORCH_SUCCESS;
}
#endif

#undef STD_CUDA_KERNEL_LAUNCH_CHECK
#define STD_CUDA_KERNEL_LAUNCH_CHECK() ((void)0)
#undef C10_CUDA_KERNEL_LAUNCH_CHECK
#define C10_CUDA_KERNEL_LAUNCH_CHECK() ((void)0)
#undef C10_CUDA_CHECK
#define C10_CUDA_CHECK(expr) ((void)(expr))
