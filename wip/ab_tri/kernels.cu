// A/B of the trilinear kernels' thread mapping (chapter 05's kernels, three launch policies).
//  0 "warp rows":   VEC = 16 bytes, row = packs rounded up to a warp (today's kernels)
//  1 "narrow packs": VEC narrowed until a row has >= 32 packs, rows warp-wide
//  2 "sub-warp rows": VEC = 16 bytes, row = packs rounded up to a power of two (several cubes a warp)
#include <torch/extension.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

template <typename T> __host__ __device__ inline T corner_weight(int k, T u, T v, T w) {
  const T wx = (k >> 2) & 1 ? u : T(1) - u;
  const T wy = (k >> 1) & 1 ? v : T(1) - v;
  const T wz = k & 1 ? w : T(1) - w;
  return wx * wy * wz;
}
template <typename T> __host__ __device__ inline T to_unit(T x) { return (x + T(1)) * T(0.5); }
template <typename T>
__host__ __device__ inline void corner_weight_grad(int k, T u, T v, T w, T& d_du, T& d_dv, T& d_dw) {
  const T wx = (k >> 2) & 1 ? u : T(1) - u;
  const T wy = (k >> 1) & 1 ? v : T(1) - v;
  const T wz = k & 1 ? w : T(1) - w;
  const T sx = (k >> 2) & 1 ? T(1) : T(-1);
  const T sy = (k >> 1) & 1 ? T(1) : T(-1);
  const T sz = k & 1 ? T(1) : T(-1);
  d_du = sx * wy * wz; d_dv = wx * sy * wz; d_dw = wx * wy * sz;
}
template <typename scalar_t, int VEC> struct alignas(sizeof(scalar_t) * VEC) Pack { scalar_t v[VEC]; };

template <typename scalar_t, int VEC>
__global__ void fwd_kernel(const scalar_t* __restrict__ feats, const scalar_t* __restrict__ points,
                           scalar_t* __restrict__ out, int64_t N, int64_t F) {
  using O = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t, VEC>;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (n >= N) return;
  const O u = to_unit<O>(points[3 * n]), v = to_unit<O>(points[3 * n + 1]), w = to_unit<O>(points[3 * n + 2]);
  O weight[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) weight[k] = corner_weight<O>(k, u, v, w);
  const int64_t packs = F / VEC;
  const P* f_n = reinterpret_cast<const P*>(feats + n * 8 * F);
  P* out_n = reinterpret_cast<P*>(out + n * F);
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    O acc[VEC] = {};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const P x = f_n[k * packs + p];
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[i] += weight[k] * static_cast<O>(x.v[i]);
    }
    P y;
#pragma unroll
    for (int i = 0; i < VEC; ++i) y.v[i] = static_cast<scalar_t>(acc[i]);
    out_n[p] = y;
  }
}

// Row reduction: rows of blockDim.x threads; blockDim.x a power of two (< 32: several rows a warp,
// segmented shuffles) or a multiple of 32 (a row of whole warps, then shared memory).
template <typename scalar_t, typename O>
__device__ __forceinline__ void reduce_row(O gx, O gy, O gz, bool valid, int64_t n, scalar_t* __restrict__ gp) {
  const int width = blockDim.x < 32 ? blockDim.x : 32;
  for (int offset = width / 2; offset > 0; offset /= 2) {
    gx += __shfl_down_sync(0xffffffffu, gx, offset, width);
    gy += __shfl_down_sync(0xffffffffu, gy, offset, width);
    gz += __shfl_down_sync(0xffffffffu, gz, offset, width);
  }
  if (blockDim.x <= 32) {
    if (valid && threadIdx.x == 0) {
      gp[3 * n] = static_cast<scalar_t>(O(0.5) * gx);
      gp[3 * n + 1] = static_cast<scalar_t>(O(0.5) * gy);
      gp[3 * n + 2] = static_cast<scalar_t>(O(0.5) * gz);
    }
    return;
  }
  __shared__ O partial[8][3];
  const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) { partial[warp][0] = gx; partial[warp][1] = gy; partial[warp][2] = gz; }
  __syncthreads();
  if (valid && threadIdx.x == 0) {
    O s[3] = {0, 0, 0};
    for (int i = warp; i < warp + (int)blockDim.x / 32; ++i) for (int d = 0; d < 3; ++d) s[d] += partial[i][d];
    for (int d = 0; d < 3; ++d) gp[3 * n + d] = static_cast<scalar_t>(O(0.5) * s[d]);
  }
}

template <typename scalar_t, int VEC, bool NF, bool NP>
__global__ void bwd_kernel(const scalar_t* __restrict__ grad_out, const scalar_t* __restrict__ feats,
                           const scalar_t* __restrict__ points, scalar_t* __restrict__ grad_feats,
                           scalar_t* __restrict__ grad_points, int64_t N, int64_t F) {
  using O = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t, VEC>;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = n < N;
  O gx = 0, gy = 0, gz = 0;
  if (valid) {
    const O u = to_unit<O>(points[3 * n]), v = to_unit<O>(points[3 * n + 1]), w = to_unit<O>(points[3 * n + 2]);
    O weight[8], d_du[8], d_dv[8], d_dw[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      weight[k] = corner_weight<O>(k, u, v, w);
      corner_weight_grad<O>(k, u, v, w, d_du[k], d_dv[k], d_dw[k]);
    }
    const int64_t packs = F / VEC;
    const P* g_n = reinterpret_cast<const P*>(grad_out + n * F);
    const P* f_n = NP ? reinterpret_cast<const P*>(feats + n * 8 * F) : nullptr;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const P g = g_n[p];
      if constexpr (NF) {
        P* gf_n = reinterpret_cast<P*>(grad_feats + n * 8 * F);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          P o;
#pragma unroll
          for (int j = 0; j < VEC; ++j) o.v[j] = static_cast<scalar_t>(weight[k] * static_cast<O>(g.v[j]));
          gf_n[k * packs + p] = o;
        }
      }
      if constexpr (NP) {
        O sx[VEC] = {}, sy[VEC] = {}, sz[VEC] = {};
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const P value = f_n[k * packs + p];
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            const O x = static_cast<O>(value.v[j]);
            sx[j] += x * d_du[k]; sy[j] += x * d_dv[k]; sz[j] += x * d_dw[k];
          }
        }
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const O gj = static_cast<O>(g.v[j]);
          gx += gj * sx[j]; gy += gj * sy[j]; gz += gj * sz[j];
        }
      }
    }
  }
  if constexpr (NP) reduce_row<scalar_t, O>(gx, gy, gz, valid, n, grad_points);
}

static int pow2_at_least(int64_t x) { int p = 1; while (p < x && p < 256) p *= 2; return p; }

// (VEC, tx) for a policy; full = 16 / sizeof(scalar_t).
static std::pair<int, int> plan(int policy, int64_t F, int full) {
  int vec = policy == 3 ? 1 : full;  // 3: the scalar forward (one feature a thread, rows of whole warps)
  while (vec > 1 && F % vec != 0) vec /= 2;
  if (policy == 1) while (vec > 1 && F / vec < 32) vec /= 2;
  const int64_t packs = F / vec;
  const int tx = policy == 2 ? pow2_at_least(packs) : static_cast<int>(std::min<int64_t>(256, (packs + 31) / 32 * 32));
  return {vec, tx};
}

template <typename F_>
static void with_vec(int vec, F_&& f) {
  switch (vec) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

at::Tensor forward(const at::Tensor& feats, const at::Tensor& points, int64_t policy) {
  const int64_t N = feats.size(0), F = feats.size(2);
  auto out = at::empty({N, F}, feats.options());
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "fwd", [&] {
    auto [vec, tx] = plan(policy, F, 16 / sizeof(scalar_t));
    const int ty = 256 / tx;
    with_vec(vec, [&](auto v) {
      constexpr int V = decltype(v)::value;
      if constexpr (V * sizeof(scalar_t) <= 16)
        fwd_kernel<scalar_t, V><<<(N + ty - 1) / ty, dim3(tx, ty), 0, stream>>>(
            feats.const_data_ptr<scalar_t>(), points.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), N, F);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

std::vector<at::Tensor> backward(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                                 bool need_feats, bool need_points, int64_t policy) {
  const int64_t N = grad_out.size(0), F = grad_out.size(1);
  at::Tensor gf = need_feats ? at::empty_like(feats) : at::Tensor();
  at::Tensor gp = need_points ? at::empty_like(points) : at::Tensor();
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_out.scalar_type(), "bwd", [&] {
    auto [vec, tx] = plan(policy, F, 16 / sizeof(scalar_t));
    const int ty = 256 / tx;
    const dim3 grid((N + ty - 1) / ty), block(tx, ty);
    const scalar_t* g = grad_out.const_data_ptr<scalar_t>();
    const scalar_t* f = feats.const_data_ptr<scalar_t>();
    const scalar_t* p = points.const_data_ptr<scalar_t>();
    scalar_t* gfp = need_feats ? gf.mutable_data_ptr<scalar_t>() : nullptr;
    scalar_t* gpp = need_points ? gp.mutable_data_ptr<scalar_t>() : nullptr;
    with_vec(vec, [&](auto v) {
      constexpr int V = decltype(v)::value;
      if constexpr (V * sizeof(scalar_t) <= 16) {
        if (need_feats && need_points) bwd_kernel<scalar_t, V, true, true><<<grid, block, 0, stream>>>(g, f, p, gfp, gpp, N, F);
        else if (need_feats) bwd_kernel<scalar_t, V, true, false><<<grid, block, 0, stream>>>(g, f, p, gfp, gpp, N, F);
        else bwd_kernel<scalar_t, V, false, true><<<grid, block, 0, stream>>>(g, f, p, gfp, gpp, N, F);
      }
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {gf, gp};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward);
  m.def("backward", &backward);
}
