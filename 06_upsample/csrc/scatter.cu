// Chapter 06: the backward by scatter, rung 1 of the backward's ladder (ladder.h).
//
// What PyTorch's own kernel does: a thread per grad_out value adds its four
// weighted contributions into grad_in. Several threads hit the same grad_in value,
// so the adds must be atomic; the order in which they land varies between runs,
// and float addition is not associative, so the low bits of the result vary too.
// acc_t is float for float16/bfloat16: an atomicAdd on a 16-bit value would round
// the running sum to 16 bits after every add, so the kernels add into a float
// buffer and the host converts it once.
#include "cuda_common.cuh"

namespace ch06 {
namespace {

// The four atomic adds of one grad_out value g, through the taps yt (along H) and
// xt (along W). `row` and `pixel` are grad_in's strides in values: W_in and 1 in
// NCHW, W_in * C and C in channels-last.
template <typename acc_t, typename T>
__device__ __forceinline__ void scatter_taps(acc_t* grad_in, int64_t row, int64_t pixel, const Taps<T>& yt,
                                             const Taps<T>& xt, T g) {
  const T top = (T(1) - yt.l) * g, bottom = yt.l * g;
  atomicAdd(grad_in + yt.i0 * row + xt.i0 * pixel, static_cast<acc_t>((T(1) - xt.l) * top));
  atomicAdd(grad_in + yt.i0 * row + xt.i1 * pixel, static_cast<acc_t>(xt.l * top));
  atomicAdd(grad_in + yt.i1 * row + xt.i0 * pixel, static_cast<acc_t>((T(1) - xt.l) * bottom));
  atomicAdd(grad_in + yt.i1 * row + xt.i1 * pixel, static_cast<acc_t>(xt.l * bottom));
}

// NCHW: x -> an output column w, y -> an output row h, z -> a group of kPlanes planes.
template <typename scalar_t, typename acc_t, int kPlanes>
__global__ void scatter_kernel(const scalar_t* __restrict__ grad_out, acc_t* __restrict__ grad_in, int64_t planes,
                               int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out,
                               opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode) {
  using opmath_t = opmath_type<scalar_t>;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= W_out) {
    return;
  }
  const Taps<opmath_t> xt = source_taps<opmath_t>(w, W_in, rw, mode);
  for (int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; h < H_out;
       h += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const Taps<opmath_t> yt = source_taps<opmath_t>(h, H_in, rh, mode);
    for (int64_t p0 = static_cast<int64_t>(blockIdx.z) * kPlanes; p0 < planes;
         p0 += static_cast<int64_t>(gridDim.z) * kPlanes) {
#pragma unroll
      for (int k = 0; k < kPlanes; ++k) {
        const int64_t p = p0 + k;
        if (p < planes) {
          const opmath_t g = static_cast<opmath_t>(grad_out[(p * H_out + h) * W_out + w]);
          scatter_taps(grad_in + p * H_in * W_in, W_in, 1, yt, xt, g);
        }
      }
    }
  }
}

// Channels-last: a thread per grad_out value of a row of pixels (x: (w, c)), y over rows (n, h).
template <typename scalar_t, typename acc_t>
__global__ void scatter_nhwc_kernel(const scalar_t* __restrict__ grad_out, acc_t* __restrict__ grad_in, int64_t rows,
                                    int64_t C, int64_t H_in, int64_t W_in, int64_t H_out, int64_t W_out,
                                    opmath_type<scalar_t> rh, opmath_type<scalar_t> rw, Mode mode) {
  using opmath_t = opmath_type<scalar_t>;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // (w, c)
  if (t >= W_out * C) {
    return;
  }
  const int64_t w = t / C, c = t - w * C;
  const Taps<opmath_t> xt = source_taps<opmath_t>(w, W_in, rw, mode);
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const int64_t n = row / H_out, h = row - n * H_out;
    const Taps<opmath_t> yt = source_taps<opmath_t>(h, H_in, rh, mode);
    const opmath_t g = static_cast<opmath_t>(grad_out[row * W_out * C + t]);
    scatter_taps(grad_in + n * H_in * W_in * C + c, W_in * C, C, yt, xt, g);
  }
}

}  // namespace

template <typename scalar_t>
void launch_scatter(const Call<scalar_t>& c) {
  using torch::headeronly::ScalarType;
  using opmath_t = opmath_type<scalar_t>;
  const ResizeGeometry& g = c.g;
  constexpr int kPlanes = 4;  // planes per NCHW thread: its taps serve that many values
  // float and double: the atomics add straight into grad_in. float16 and
  // bfloat16: into a float buffer in grad_in's layout, converted once at the end.
  using acc_t = std::conditional_t<std::is_same_v<scalar_t, opmath_t>, scalar_t, float>;
  constexpr bool direct = std::is_same_v<acc_t, scalar_t>;
  const int64_t N = c.out.size(0), C = c.out.size(1);
  torch::stable::Tensor acc =
      direct ? c.out
             : new_packed(c.out, N, C, g.H_in, g.W_in, g.channels_last, ScalarType::Float);
  torch::stable::zero_(acc);  // the atomics add into it (zero_ runs on the current stream)
  if (g.channels_last) {
    const int64_t n_rows = N * g.H_out;
    const Launch l = launch_rows(g.W_out * C, n_rows);
    scatter_nhwc_kernel<scalar_t, acc_t><<<l.grid, l.block, 0, c.stream>>>(
        c.src(), acc.mutable_data_ptr<acc_t>(), n_rows, C, g.H_in, g.W_in, g.H_out, g.W_out, c.rh, c.rw, g.mode);
  } else {
    const Launch l = launch_for(g.W_out, g.H_out, g.planes, kPlanes);
    scatter_kernel<scalar_t, acc_t, kPlanes><<<l.grid, l.block, 0, c.stream>>>(
        c.src(), acc.mutable_data_ptr<acc_t>(), g.planes, g.H_in, g.W_in, g.H_out, g.W_out, c.rh, c.rw, g.mode);
  }
  STD_CUDA_KERNEL_LAUNCH_CHECK();
  if (!direct) {
    torch::stable::copy_(c.out, acc);  // one rounding to float16/bfloat16, at the end
  }
}

#define CH06_INSTANTIATE(T) template void launch_scatter<T>(const Call<T>&);
CH06_FOR_EACH_TYPE(CH06_INSTANTIATE)

}  // namespace ch06
