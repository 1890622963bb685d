// Chapter 06: building the gather's plan (plan.cuh says what it holds).
#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

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

// What a plan depends on: the sizes, ratios and mode of the call, and the device and stream it is
// built on and read from.
struct PlanKey {
  int32_t device;
  cudaStream_t stream;
  int64_t H_in, H_out, W_in, W_out;
  double rh, rw;
  Mode mode;
  bool cols;
  bool operator==(const PlanKey& o) const {
    return device == o.device && stream == o.stream && H_in == o.H_in && H_out == o.H_out && W_in == o.W_in &&
           W_out == o.W_out && rh == o.rh && rw == o.rw && mode == o.mode && cols == o.cols;
  }
};

// The last plans built, most recent last. A training loop calls the backward with the same sizes
// again and again, so a repeated call takes its plan from here: no allocation and no plan_kernel,
// which are most of the host's work of a small backward. The key holds the stream: a plan is only
// read on the stream that built it, so it is complete before any kernel reads it, and when it is
// dropped the caching allocator can hand its memory out again in stream order. The cache itself is
// never destroyed: at exit, freeing its tensors would call into a torch that may be gone already.
// Only small plans are kept, up to 1 MiB (a plan takes about 18 bytes per unit of H_in + W_in +
// H_out + W_out, so sizes that add up to about 58,000): their allocation and launch are what weigh
// on a call, and a kept plan holds its GPU memory until 16 others push it out.
constexpr size_t kCachedPlans = 16;
constexpr int64_t kKeptPlanBytes = int64_t(1) << 20;

template <typename T>
struct PlanCache {
  std::mutex mutex;
  std::vector<std::pair<PlanKey, Plan<T>>> entries;
};

template <typename T>
PlanCache<T>& plan_cache() {
  static PlanCache<T>* cache = new PlanCache<T>();
  return *cache;
}

// A CUDA graph being captured on the stream must own the memory it reads at every replay, so its
// plan is built afresh (into the graph's memory) and not kept. A failed query counts as a capture.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
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
  const PlanKey key{c.in.get_device_index(), c.stream, g.H_in, g.H_out, g.W_in, g.W_out,
                    static_cast<double>(c.rh), static_cast<double>(c.rw), g.mode, cols};
  // 3 values per output index and 2 per input index, per axis: the indices in one tensor, the
  // weights in another.
  const int64_t n_index = 2 * (g.H_in + g.W_in) + 2 * (g.H_out + g.W_out), n_lambda = g.H_out + g.W_out;
  const int64_t bytes = n_index * int64_t(sizeof(int64_t)) + n_lambda * int64_t(sizeof(T));
  const bool keep = bytes <= kKeptPlanBytes && !capturing(c.stream);
  PlanCache<T>& cache = plan_cache<T>();
  if (keep) {
    const std::lock_guard<std::mutex> lock(cache.mutex);
    auto& e = cache.entries;
    for (auto hit = e.begin(); hit != e.end(); ++hit) {
      if (hit->first == key) {
        std::rotate(hit, hit + 1, e.end());  // now the most recent
        return e.back().second;
      }
    }
  }
  // Allocated on the input's device and stream-ordered by the caching allocator.
  p.index = torch::stable::new_empty(c.in, {n_index}, ScalarType::Long);
  p.lambda =
      torch::stable::new_empty(c.in, {n_lambda}, std::is_same_v<T, double> ? ScalarType::Double : ScalarType::Float);
  int64_t* ip = p.index->template mutable_data_ptr<int64_t>();
  T* lp = p.lambda->template mutable_data_ptr<T>();
  p.rows = {g.H_in, g.H_out, c.rh, ip, ip + g.H_out, lp, ip + 2 * g.H_out, ip + 2 * g.H_out + g.H_in};
  ip += 2 * (g.H_out + g.H_in);
  p.cols = {g.W_in, g.W_out, c.rw, ip, ip + g.W_out, lp + g.H_out, ip + 2 * g.W_out, ip + 2 * g.W_out + g.W_in};
  const int64_t longest = std::max({g.H_in, g.W_in, g.H_out, g.W_out});
  const dim3 grid(static_cast<unsigned>((longest + kThreads - 1) / kThreads), cols ? 2 : 1);
  plan_kernel<T><<<grid, kThreads, 0, c.stream>>>(p.rows, p.cols, g.mode);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
  if (keep) {
    const std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.entries.size() >= kCachedPlans) {
      cache.entries.erase(cache.entries.begin());  // the least recently used
    }
    cache.entries.emplace_back(key, p);
  }
  return p;
}

template Plan<double> make_plan<double>(const Call<double>&, bool, bool);
template Plan<float> make_plan<float>(const Call<float>&, bool, bool);
template Plan<float> make_plan<torch::headeronly::Half>(const Call<torch::headeronly::Half>&, bool, bool);
template Plan<float> make_plan<torch::headeronly::BFloat16>(const Call<torch::headeronly::BFloat16>&, bool, bool);

}  // namespace ch06
