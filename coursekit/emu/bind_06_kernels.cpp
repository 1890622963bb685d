// The GPU-free judge of chapter 06, the kernel side: a launch of the plain gather as the
// chapter's host code makes it (a Call, then launch_gather_plain), on the CPU.
#include <cmath>

#include "plan.cuh"

namespace ch06 {
template <typename scalar_t>
void launch_gather_plain(const Call<scalar_t>& c);
}

void emu06_gather_plain(AtenTensorHandle grad_out, AtenTensorHandle grad_in, int64_t H_in, int64_t W_in, int64_t mode,
                        double scale_h, double scale_w) {
  torch::stable::Tensor in(grad_out), out(grad_in);
  ResizeGeometry g{in.size(0) * in.size(1), H_in, W_in, in.size(2), in.size(3), static_cast<Mode>(mode),
                   std::isnan(scale_h) ? std::nullopt : std::optional<double>(scale_h),
                   std::isnan(scale_w) ? std::nullopt : std::optional<double>(scale_w)};
  g.channels = in.size(1);
  THO_DISPATCH_V2(in.scalar_type(), "emulated gather", AT_WRAP(([&] {
    using T = opmath_type<scalar_t>;
    const ch06::Call<scalar_t> c{in, out, g, axis_ratio<T>(g.H_in, g.H_out, g.mode, g.scale_h),
                                 axis_ratio<T>(g.W_in, g.W_out, g.mode, g.scale_w), ::emu::current_stream()};
    ch06::launch_gather_plain(c);
  })), AT_FLOATING_TYPES, torch::headeronly::ScalarType::Half, torch::headeronly::ScalarType::BFloat16);
}
