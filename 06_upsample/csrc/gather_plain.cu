// Chapter 06: the plain gather, rung 2 of the backward's ladder, and the exercise
// gather-cuda. The faster gathers (gather.cu, gather_exact*.cu) are later rungs
// of the same sum; this one is the version to write first and to read first.
#include "plan.cuh"

namespace ch06 {
namespace {

// grad_in[p, h, w] for every plane p, input row h and input column w (NCHW):
//
//   sum over the grad_out rows dh in [rows.begin[h], rows.end[h])
//     sum over the grad_out columns dw in [cols.begin[w], cols.end[w])
//       wy(dh, h) * wx(dw, w) * grad_out[p, dh, dw]
//
// where wy(dh, h) = plan_weight(rows, dh, h) is the weight with which output row
// dh reads input row h (and wx likewise along W). Sum in T (float for the 2-byte
// types), rows outside and columns inside, the weight of a term (wy * wx) times
// its value, each term added in that order, and round once, at the store. The
// thread that computes a grad_in value is the only one that writes it: no atomics.
// Thread mapping: x along W (a warp reads neighbouring grad_out columns and
// writes neighbouring grad_in values), y along H, z over the planes; the grid may
// be smaller than the tensor along y and z (at most 65535 blocks each).
template <typename scalar_t>
__global__ void gather_plain_kernel(const scalar_t* __restrict__ grad_out, scalar_t* __restrict__ grad_in,
                                    int64_t planes, AxisPlan<opmath_type<scalar_t>> rows,
                                    AxisPlan<opmath_type<scalar_t>> cols) {
  using T = opmath_type<scalar_t>;
  // BEGIN SOLUTION gather-cuda
  // STUB: (void)grad_out; (void)grad_in; (void)planes;  // grad_in stays unwritten until you write it
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= cols.in) {
    return;
  }
  for (int64_t h = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; h < rows.in;
       h += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    for (int64_t p = blockIdx.z; p < planes; p += gridDim.z) {
      const scalar_t* plane = grad_out + p * rows.out * cols.out;
      T acc = 0;
      for (int64_t dh = rows.begin[h]; dh < rows.end[h]; ++dh) {
        const T wy = plan_weight(rows, dh, h);
        for (int64_t dw = cols.begin[w]; dw < cols.end[w]; ++dw) {
          acc += wy * plan_weight(cols, dw, w) * static_cast<T>(plane[dh * cols.out + dw]);
        }
      }
      grad_in[(p * rows.in + h) * cols.in + w] = static_cast<scalar_t>(acc);
    }
  }
  // END SOLUTION
}

}  // namespace

template <typename scalar_t>
void launch_gather_plain(const Call<scalar_t>& c) {
  const ResizeGeometry& g = c.g;
  const auto plan = make_plan(c, true, true);  // both axes
  // BEGIN SOLUTION gather-cuda
  // STUB: const Launch l{dim3(1), dim3(1)};  // one thread: choose the grid and the block
  const Launch l = launch_for(g.W_in, g.H_in, g.planes, 1);
  // END SOLUTION
  gather_plain_kernel<scalar_t><<<l.grid, l.block, 0, c.stream>>>(c.src(), c.dst(), g.planes, plan.rows, plan.cols);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

#define CH06_INSTANTIATE(T) template void launch_gather_plain<T>(const Call<T>&);
CH06_FOR_EACH_TYPE(CH06_INSTANTIATE)

}  // namespace ch06
