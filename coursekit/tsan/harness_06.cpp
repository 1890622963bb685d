// Chapter 06 under the thread judge: the kernel operators' C++ functions (ops.cpp), forward and
// backward, on shapes that reach each CPU path (rows wider and narrower than 32 values, up- and
// downscales, both layouts), every dtype, sizes of several chunks.
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "kernels.h"

using torch::stable::Tensor;
using torch::headeronly::MemoryFormat;
using torch::headeronly::ScalarType;

Tensor upsample_forward_kernel(const Tensor& x, std::vector<int64_t> size, std::string mode,
                               std::optional<double> scale_h, std::optional<double> scale_w);
Tensor upsample_backward_kernel(const Tensor& grad_out, std::vector<int64_t> input_size, std::string mode,
                                std::string method, std::optional<double> scale_h, std::optional<double> scale_w);

static Tensor random(std::vector<int64_t> shape, ScalarType dtype, bool channels_last) {
  Tensor t = torch::stable::empty(shape, ScalarType::Float, std::nullopt, torch::stable::Device(torch::headeronly::DeviceType::CPU),
                                  std::nullopt, channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  float* p = t.mutable_data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  return dtype == ScalarType::Float ? t : torch::stable::to(t, dtype);
}

int main() {
  struct Case {
    int64_t N, C, H_in, W_in, H_out, W_out;
    bool channels_last;
  };
  const Case cases[] = {
      {2, 3, 40, 200, 80, 410, false},   // upscale, rows of 200
      {2, 3, 150, 200, 37, 53, false},   // downscale
      {4, 8, 60, 20, 120, 40, false},    // rows narrower than 32 values
      {2, 16, 30, 40, 60, 90, true},     // channels-last
      {2, 16, 90, 60, 30, 20, true},     // channels-last downscale
  };
  for (ScalarType dtype : {ScalarType::Float, ScalarType::Double, ScalarType::Half, ScalarType::BFloat16}) {
    for (const Case& c : cases) {
      for (const char* mode : {"half_pixel", "align_corners"}) {
        Tensor x = random({c.N, c.C, c.H_in, c.W_in}, dtype, c.channels_last);
        course_tsan::call("upsample forward", [&] { upsample_forward_kernel(x, {c.H_out, c.W_out}, mode, {}, {}); });
        Tensor grad_out = random({c.N, c.C, c.H_out, c.W_out}, dtype, c.channels_last);
        course_tsan::call("upsample backward",
                          [&] { upsample_backward_kernel(grad_out, {c.H_in, c.W_in}, mode, "gather", {}, {}); });
      }
    }
  }
}
