// Chapter 06: building the gather's plan (plan.cuh says what it holds).
#include "plan.cuh"

namespace ch06 {
namespace {

// blockIdx.y 0 builds the rows' plan, 1 the columns'; a thread per index.
template <typename T>
__global__ void plan_kernel(AxisPlan<T> rows, AxisPlan<T> cols, Mode mode) {
  const AxisPlan<T> a = blockIdx.y == 0 ? rows : cols;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < a.out) {
    const Taps<T> taps = source_taps<T>(t, a.in, a.ratio, mode);
    a.i0[t] = taps.i0;
    a.i1[t] = taps.i1;
    a.l[t] = taps.l;
  }
  if (t < a.in) {
    gather_range<T>(t, a.in, a.out, a.ratio, mode, a.begin[t], a.end[t]);
  }
}

}  // namespace

template <typename scalar_t>
Plan<opmath_type<scalar_t>> make_plan(const Call<scalar_t>& c, bool build, bool cols) {
  using T = opmath_type<scalar_t>;
  using torch::headeronly::ScalarType;
  const ResizeGeometry& g = c.g;
  Plan<T> p;
  p.rows = {g.H_in, g.H_out, c.rh, nullptr, nullptr, nullptr, nullptr, nullptr};
  p.cols = {g.W_in, g.W_out, c.rw, nullptr, nullptr, nullptr, nullptr, nullptr};
  if (!build) {
    return p;
  }
  // 3 values per output index and 2 per input index, per axis. Allocated on the
  // input's device and stream-ordered by the caching allocator.
  p.index = torch::stable::new_empty(c.in, {2 * (g.H_in + g.W_in) + 2 * (g.H_out + g.W_out)}, ScalarType::Long);
  p.lambda = torch::stable::new_empty(c.in, {g.H_out + g.W_out},
                                      std::is_same_v<T, double> ? ScalarType::Double : ScalarType::Float);
  int64_t* ip = p.index->template mutable_data_ptr<int64_t>();
  T* lp = p.lambda->template mutable_data_ptr<T>();
  p.rows = {g.H_in, g.H_out, c.rh, ip, ip + g.H_out, lp, ip + 2 * g.H_out, ip + 2 * g.H_out + g.H_in};
  ip += 2 * (g.H_out + g.H_in);
  p.cols = {g.W_in, g.W_out, c.rw, ip, ip + g.W_out, lp + g.H_out, ip + 2 * g.W_out, ip + 2 * g.W_out + g.W_in};
  const int64_t longest = std::max({g.H_in, g.W_in, g.H_out, g.W_out});
  const dim3 grid(static_cast<unsigned>((longest + kThreads - 1) / kThreads), cols ? 2 : 1);
  plan_kernel<T><<<grid, kThreads, 0, c.stream>>>(p.rows, p.cols, g.mode);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
  return p;
}

template Plan<double> make_plan<double>(const Call<double>&, bool, bool);
template Plan<float> make_plan<float>(const Call<float>&, bool, bool);
template Plan<float> make_plan<torch::headeronly::Half>(const Call<torch::headeronly::Half>&, bool, bool);
template Plan<float> make_plan<torch::headeronly::BFloat16>(const Call<torch::headeronly::BFloat16>&, bool, bool);

}  // namespace ch06
