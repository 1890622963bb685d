#pragma once
// 16-byte memory accesses for the CUDA kernels.
//
// A warp that loads one float per thread asks for 128 bytes per instruction; one
// that loads a Pack<float, 4> per thread asks for 512. Fewer, wider requests keep
// more bytes in flight per thread, which is what a memory-bound kernel needs to
// get near the bandwidth of the memory, most of all for 2-byte types.
#include <cstdint>

// VEC elements that the hardware loads or stores as one access. The address
// must be a multiple of sizeof(Pack): check with aligned16() before launching.
template <typename scalar_t, int VEC>
struct alignas(sizeof(scalar_t) * VEC) Pack {
  scalar_t v[VEC];
};

inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}
