#pragma once
// Chapter 06: what every CUDA file of the chapter shares. Launch geometry, the
// current stream, and the 16-byte loads and stores the faster kernels use.
//
// On the stable ABI (see SHIPPING.md):
//   device guard   torch::stable::accelerator::DeviceGuard (was c10::cuda::CUDAGuard)
//   stream         aoti_torch_get_current_cuda_stream, a C function of libtorch
//                  (was c10::cuda::getCurrentCUDAStream); declared when USE_CUDA
//                  is defined, which the build does for the .cu files
//   launch check   STD_CUDA_KERNEL_LAUNCH_CHECK (was C10_CUDA_KERNEL_LAUNCH_CHECK)
//   temporaries    torch::stable::new_empty / new_zeros, i.e. aten ops called
//                  through the dispatcher's C interface, on the caching allocator
#include <cuda_runtime.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/shim_utils.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "kernels.h"
#include "ladder.h"

namespace ch06 {

constexpr int kThreads = 256;       // threads per block, every kernel
constexpr int64_t kMaxGrid = 65535;  // the limit of gridDim.y and gridDim.z

struct Launch {
  dim3 grid, block;
};

// Threads along W (a multiple of 32, at most max_tx), the rest of the block along H.
// W and H count what one thread handles along each axis (pixels, or groups of them).
// Grid-stride loops in the kernels cover rows and plane groups beyond 65535 blocks.
inline Launch launch_for(int64_t W, int64_t H, int64_t planes, int planes_per_thread, int max_tx = kThreads) {
  const int tx = static_cast<int>(std::min<int64_t>(max_tx, (W + 31) / 32 * 32));
  const int ty = kThreads / tx;
  const int64_t gx = (W + tx - 1) / tx;
  STD_TORCH_CHECK(gx <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: W = ", W,
                  " is too large for one launch");
  const int64_t gy = std::min<int64_t>((H + ty - 1) / ty, kMaxGrid);
  const int64_t gz = std::min<int64_t>((planes + planes_per_thread - 1) / planes_per_thread, kMaxGrid);
  return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz)), dim3(tx, ty)};
}

// The threads a launch needs to keep every SM busy: 1024 per SM, half of what one holds. A
// kernel that would start fewer gives each thread less work (fewer rows, planes or channels) and
// starts more: a small tensor has few outputs, and threads that each walk down many of them in
// turn leave most of the GPU idle.
// 0 when the count cannot be read: launches then keep their usual work per thread.
inline int64_t threads_to_fill(int32_t device) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();  // not left behind for the launch check to report
    return 0;
  }
  return static_cast<int64_t>(sms) * 1024;
}

// Rows per thread for a kernel whose threads walk down up to `most` rows: halved, down to 1,
// while a launch of threads(rows) threads would leave SMs idle.
template <typename Threads>
int rows_to_fill(int most, int32_t device, const Threads& threads) {
  const int64_t fill = threads_to_fill(device);
  int rows = most;
  while (rows > 1 && threads(rows) < fill) {
    rows /= 2;
  }
  return rows;
}

// The gathers' work per thread, `per` values (planes or channels) in `rows` rows: kept while
// threads(per, rows) threads fill the GPU; else a row a thread, then fewer values
// (fewer(per) is the next smaller count, 1 the last) until they do.
template <typename Threads, typename Fewer>
void gather_work_to_fill(int32_t device, int& per, int& rows, const Threads& threads, const Fewer& fewer) {
  const int64_t fill = threads_to_fill(device);
  if (threads(per, rows) >= fill) {
    return;
  }
  rows = 1;
  while (per > 1 && threads(per, 1) < fill) {
    per = fewer(per);
  }
}

// The channels-last kernels' grid: x along a row of `row_length` values, y over `rows` rows.
inline Launch launch_rows(int64_t row_length, int64_t rows) {
  const int64_t gx = (row_length + kThreads - 1) / kThreads;
  STD_TORCH_CHECK(gx <= std::numeric_limits<int32_t>::max(), "upsample_bilinear2d: a row of ", row_length,
                  " values is too long for one launch");
  return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(std::min<int64_t>(rows, kMaxGrid))), dim3(kThreads)};
}

// The current CUDA stream of `device`: code running us under torch.cuda.stream(s)
// expects our work on s, and kernels on the legacy default stream would race with it.
inline cudaStream_t current_stream(int32_t device) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device, &stream));
  return static_cast<cudaStream_t>(stream);
}

inline bool aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// One launch: the input (x, or grad_out) and the output (out, or grad_in), both
// contiguous in the layout g names, the geometry, the two axis ratios in the
// compute type, and the stream. Every launcher of the ladder takes one.
template <typename scalar_t>
struct Call {
  using T = opmath_type<scalar_t>;
  const torch::stable::Tensor& in;
  torch::stable::Tensor& out;
  const ResizeGeometry& g;
  T rh, rw;
  cudaStream_t stream;
  const scalar_t* src() const { return in.const_data_ptr<scalar_t>(); }
  scalar_t* dst() const { return out.mutable_data_ptr<scalar_t>(); }
};

// Explicit instantiations of a launcher for the four dtypes: M(scalar_t) once each.
#define CH06_FOR_EACH_TYPE(M) M(double) M(float) M(torch::headeronly::Half) M(torch::headeronly::BFloat16)

// kV values make one 16-byte load or store: 2 doubles, 4 floats, 8 halves or bfloat16s.
template <typename scalar_t>
constexpr int kV = 16 / static_cast<int>(sizeof(scalar_t));

// A Pack is aligned to its size when that is a power of two up to 16 bytes (one
// vector load or store); larger packs (the RGB forward's 48 bytes) to 16.
constexpr size_t pack_align(size_t bytes) {
  return bytes >= 16 ? 16 : bytes;
}

template <typename scalar_t, int V>
struct alignas(pack_align(sizeof(scalar_t) * V)) Pack {
  scalar_t v[V];
};

// V values as one 16-byte load through the read-only path. p is 16-byte aligned.
template <typename scalar_t, int V>
__device__ __forceinline__ Pack<scalar_t, V> load_pack(const scalar_t* __restrict__ p) {
  Pack<scalar_t, V> r;
  static_assert(sizeof(r) == 16, "a Pack is 16 bytes");
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  memcpy(&r, &raw, sizeof(r));
  return r;
}

// N values (8 bytes) as one load. p is 8-byte aligned.
template <typename scalar_t, int N>
__device__ __forceinline__ void load8(const scalar_t* __restrict__ p, scalar_t* dst) {
  static_assert(N * sizeof(scalar_t) == 8, "8 bytes");
  const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
  memcpy(dst, &raw, 8);
}

// Store n <= V outputs at dst, which sits on a boundary of `unit` values (a
// power of two up to V; V: a pack boundary). A whole pack goes out in stores
// of `unit` values, the widest the boundary allows, marked streaming
// (st.global.cs, evict first): the output is not read again by the kernel, and
// letting it leave L2 first keeps the input rows that neighbouring threads
// still read. Rows of a width that is not a multiple of V start off a pack
// boundary, yet a width of 4 mod 8 still takes 8-byte stores, and an even one
// 4-byte stores, a quarter or half the store instructions of V scalar ones.
// A pack cut short at a row's end (n < V), or a row start on no 4-byte boundary,
// stores value by value: unrolled over V with a test j < n, as a loop bounded by n
// would index r at run time and put it in local memory.
template <typename scalar_t, int V>
__device__ __forceinline__ void store_outputs(scalar_t* dst, const Pack<scalar_t, V>& r, int n, int unit) {
  constexpr int kBytes = sizeof(r);
  static_assert(kBytes == 16 || kBytes == 8, "Pack is 8 or 16 bytes");
  const int unit_bytes = unit * static_cast<int>(sizeof(scalar_t));
  if (n < V || unit_bytes < 4) {  // a pack cut short, or a row start on no 4-byte boundary
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (j < n) {
        dst[j] = r.v[j];
      }
    }
  } else if (unit == V) {
    if constexpr (kBytes == 16) {
      __stcs(reinterpret_cast<float4*>(dst), reinterpret_cast<const float4&>(r));
    } else {
      __stcs(reinterpret_cast<float2*>(dst), reinterpret_cast<const float2&>(r));
    }
  } else if (kBytes == 16 && unit_bytes == 8) {  // a 16-byte pack as two halves
    const float2* src = reinterpret_cast<const float2*>(&r);
    __stcs(reinterpret_cast<float2*>(dst), src[0]);
    __stcs(reinterpret_cast<float2*>(dst) + 1, src[1]);
  } else {  // 4-byte words
    unsigned int words[kBytes / 4];
    memcpy(words, &r, kBytes);
#pragma unroll
    for (int k = 0; k < kBytes / 4; ++k) {
      __stcs(reinterpret_cast<unsigned int*>(dst) + k, words[k]);
    }
  }
}

// The values a row's stores may write at once: the largest power of two up to V
// that divides the row's width (every row then starts on a boundary of it), or 1
// when the tensor itself does not start on a pack boundary.
template <int V>
inline int store_unit(int64_t width, bool pack_aligned) {
  int unit = V;
  while (unit > 1 && (!pack_aligned || width % unit != 0)) {
    unit /= 2;
  }
  return unit;
}

// One streaming scalar store (float16 and bfloat16 go through their bits).
template <typename scalar_t>
__device__ __forceinline__ void store_streaming(scalar_t* p, scalar_t v) {
  if constexpr (sizeof(scalar_t) == 2) {
    unsigned short bits;
    memcpy(&bits, &v, sizeof(bits));
    __stcs(reinterpret_cast<unsigned short*>(p), bits);
  } else {
    __stcs(p, v);
  }
}

// N sums in T, each rounded once to scalar_t, written as 16-byte streaming stores
// (one per kV values, or one of N < kV values). dst sits on a 16-byte boundary.
template <typename scalar_t, int N, typename T>
__device__ __forceinline__ void store_rounded_pack(scalar_t* dst, const T (&acc)[N]) {
  constexpr int P = N < kV<scalar_t> ? N : kV<scalar_t>;  // values per store
  static_assert(N % P == 0, "whole stores");
#pragma unroll
  for (int s = 0; s < N; s += P) {
    Pack<scalar_t, P> r;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      r.v[k] = static_cast<scalar_t>(acc[s + k]);
    }
    store_outputs<scalar_t, P>(dst + s, r, P, P);
  }
}

// The exact spans hold in float only while out < 2^22 (the source coordinates stay exact).
constexpr int64_t kExactLimit = int64_t(1) << 22;

template <typename T>
inline Span exact_span(const ResizeGeometry& g, int64_t in, int64_t out, T ratio) {
  if (g.mode == Mode::HalfPixel && ratio == T(0.5) && out == 2 * in && out < kExactLimit) {
    return Span::Double;
  }
  if (g.mode != Mode::AlignCorners && ratio == T(2) && in == 2 * out && in < kExactLimit) {
    return Span::Halve;
  }
  return Span::Taps;
}

}  // namespace ch06
