// Chapter 06: which kernel a call takes. The table below is the whole rule: the
// host walks it in order and launches the first row that applies (ladder.h says
// what each kernel is; each launcher sits in its kernel's file).
#include <string>

#include "cuda_common.cuh"

namespace ch06 {
namespace {

struct Row {
  KernelInfo info;
  bool ladder_only;  // never picked; runs only when asked for by name
};

// V = kV (values per 16 bytes); "aligned" = 16-byte aligned data; x2 / x0.5 / x4 =
// the ratio along that axis is exactly 0.5 / 2 / 0.25 in the compute type.
constexpr Row kTable[] = {
    {{Kernel::ForwardNhwcRgbX2, "forward_nhwc_rgb_x2", "forward",
      "channels-last, C = 3, half_pixel, x2 along W, W_in % (V/2) = 0, x 8-byte aligned, out aligned; "
      "not float64"}, false},
    {{Kernel::ForwardNhwcPacks, "forward_nhwc_packs", "forward", "channels-last, C % V = 0, x and out aligned"},
     false},
    {{Kernel::ForwardNhwc, "forward_nhwc", "forward", "channels-last"}, false},
    {{Kernel::ForwardHalve, "forward_halve", "forward",
      "NCHW, not align_corners, x0.5 along W, W_out % V = 0, x aligned"}, false},
    {{Kernel::ForwardDouble, "forward_double", "forward",
      "NCHW, half_pixel, x2 along W, W_in % (V/2) = 0, x 8-byte aligned"}, false},
    {{Kernel::ForwardRows, "forward_rows", "forward", "NCHW"}, false},
    {{Kernel::ForwardNaive, "forward_naive", "forward", "NCHW (ladder only)"}, true},
    {{Kernel::Scatter, "scatter", "backward", "method scatter, NCHW"}, false},
    {{Kernel::ScatterNhwc, "scatter_nhwc", "backward", "method scatter, channels-last"}, false},
    {{Kernel::GatherNhwcX2Tile, "gather_nhwc_x2_tile", "backward",
      "channels-last, half_pixel, x2 along W and H, C % V = 0, both aligned; not float64"}, false},
    {{Kernel::GatherNhwcX2, "gather_nhwc_x2", "backward",
      "channels-last, half_pixel, x2 along W, C % V = 0, both aligned; not float64"}, false},
    {{Kernel::GatherNhwcRgbX2, "gather_nhwc_rgb_x2", "backward",
      "channels-last, half_pixel, x2 along W, C = 3, W_in % V = 0, both aligned; not float64"}, false},
    {{Kernel::GatherNhwc, "gather_nhwc", "backward", "channels-last"}, false},
    {{Kernel::GatherX2, "gather_x2", "backward",
      "NCHW, half_pixel, x2 along W, W_in % V = 0, both aligned; not float64"}, false},
    {{Kernel::GatherX4, "gather_x4", "backward",
      "NCHW, half_pixel, x4 along W, W_in % V = 0, both aligned; not float64"}, false},
    {{Kernel::GatherHalve, "gather_halve", "backward",
      "NCHW, not align_corners, x0.5 along W, W_in % V = 0, both aligned; not float64"}, false},
    {{Kernel::GatherColumnPacks, "gather_column_packs", "backward",
      "NCHW, float32, 2 / ratio_w > 6 (an upsampling by more than 3), W_out % 4 = 0, grad_out aligned"}, false},
    {{Kernel::GatherPlanes, "gather_planes", "backward", "NCHW"}, false},
    {{Kernel::GatherPlain, "gather_plain", "backward", "NCHW (ladder only; the exercise)"}, true},
};

// Does row k's condition hold for this call? (The table's `when`, in code.)
template <typename scalar_t>
bool applies(Kernel k, const Call<scalar_t>& c, bool gather) {
  using T = opmath_type<scalar_t>;
  constexpr int V = kV<scalar_t>;
  constexpr bool f64 = std::is_same_v<scalar_t, double>;
  const ResizeGeometry& g = c.g;
  const void* in = c.in.const_data_ptr();
  const void* out = c.out.const_data_ptr();
  const bool cl = g.channels_last, both = aligned(in, 16) && aligned(out, 16);
  const bool x2_w = exact_span<T>(g, g.W_in, g.W_out, c.rw) == Span::Double;
  const bool x2_h = exact_span<T>(g, g.H_in, g.H_out, c.rh) == Span::Double;
  const bool half_w = exact_span<T>(g, g.W_in, g.W_out, c.rw) == Span::Halve;
  switch (k) {
    case Kernel::ForwardNaive:
    case Kernel::ForwardRows:
      return !cl;
    case Kernel::ForwardHalve:  // (x0.5 exact while 2 W_out < 2^23)
      return !cl && g.mode != Mode::AlignCorners && c.rw == T(2) && g.W_in == 2 * g.W_out && g.W_out % V == 0 &&
             g.W_out < kExactLimit && aligned(in, 16);
    case Kernel::ForwardDouble:
      return !cl && x2_w && g.W_in % (V / 2) == 0 && aligned(in, 8);
    case Kernel::ForwardNhwc:
      return cl;
    case Kernel::ForwardNhwcPacks:
      return cl && g.channels % V == 0 && aligned(in, 16) && aligned(out, 16);
    case Kernel::ForwardNhwcRgbX2:
      return !f64 && cl && g.channels == 3 && x2_w && g.W_in % (V / 2) == 0 && aligned(in, 8) && aligned(out, 16);
    case Kernel::Scatter:
      return !gather && !cl;
    case Kernel::ScatterNhwc:
      return !gather && cl;
    default:
      break;
  }
  if (!gather) {
    return false;
  }
  switch (k) {
    case Kernel::GatherPlain:
    case Kernel::GatherPlanes:
      return !cl;
    case Kernel::GatherColumnPacks:
      return std::is_same_v<scalar_t, float> && !cl && 2.0 / static_cast<double>(c.rw) > 6 && g.W_out % 4 == 0 &&
             aligned(in, 16);
    case Kernel::GatherX2:
      return !f64 && !cl && both && g.W_in % V == 0 && x2_w;
    case Kernel::GatherX4:
      return !f64 && !cl && both && g.W_in % V == 0 && g.mode == Mode::HalfPixel && c.rw == T(0.25) &&
             g.W_out == 4 * g.W_in && g.W_out < kExactLimit;
    case Kernel::GatherHalve:
      return !f64 && !cl && both && g.W_in % V == 0 && half_w;
    case Kernel::GatherNhwc:
      return cl;
    case Kernel::GatherNhwcX2Tile:
      return !f64 && cl && both && x2_w && g.channels % V == 0 && x2_h;
    case Kernel::GatherNhwcX2:
      return !f64 && cl && both && x2_w && g.channels % V == 0;
    case Kernel::GatherNhwcRgbX2:
      return !f64 && cl && both && x2_w && g.channels == 3 && g.W_in % V == 0;
    default:
      return false;
  }
}

template <typename scalar_t>
Kernel choose(const Call<scalar_t>& c, bool forward, bool gather) {
  for (const Row& row : kTable) {
    if (!row.ladder_only && (std::string_view(row.info.direction) == "forward") == forward &&
        applies(row.info.id, c, gather)) {
      return row.info.id;
    }
  }
  STD_TORCH_CHECK(false, "upsample_bilinear2d: no kernel applies (a bug: the table's last rows cover every call)");
  return Kernel::Count;
}

template <typename scalar_t>
void launch(Kernel k, const Call<scalar_t>& c) {
  switch (k) {
    case Kernel::ForwardNaive: return launch_forward_naive(c);
    case Kernel::ForwardRows: return launch_forward_rows(c, Span::Taps);
    case Kernel::ForwardHalve: return launch_forward_rows(c, Span::Halve);
    case Kernel::ForwardDouble: return launch_forward_rows(c, Span::Double);
    case Kernel::ForwardNhwc: return launch_forward_nhwc(c, false);
    case Kernel::ForwardNhwcPacks: return launch_forward_nhwc(c, true);
    case Kernel::ForwardNhwcRgbX2: return launch_forward_nhwc_rgb_x2(c);
    case Kernel::Scatter:
    case Kernel::ScatterNhwc: return launch_scatter(c);
    case Kernel::GatherPlain: return launch_gather_plain(c);
    case Kernel::GatherPlanes: return launch_gather_planes(c, false);
    case Kernel::GatherColumnPacks: return launch_gather_planes(c, true);
    case Kernel::GatherX2:
    case Kernel::GatherX4:
    case Kernel::GatherHalve:
    case Kernel::GatherNhwcRgbX2: return launch_gather_exact(c, k);
    case Kernel::GatherNhwc: return launch_gather_nhwc(c);
    case Kernel::GatherNhwcX2: return launch_gather_nhwc_x2(c, false);
    case Kernel::GatherNhwcX2Tile: return launch_gather_nhwc_x2(c, true);
    default: STD_TORCH_CHECK(false, "upsample_bilinear2d: unknown kernel");
  }
}

// Picks (or checks the forced choice of) a kernel for in -> out and runs `then`
// with it inside the dtype dispatch; launch = false only names it.
template <typename F>
void with_kernel(const torch::stable::Tensor& in, torch::stable::Tensor& out, const ResizeGeometry& g, bool forward,
                 bool gather, std::string_view forced, F&& then) {
  const torch::stable::accelerator::DeviceGuard guard(in.get_device_index());  // the tensor's GPU
  const cudaStream_t stream = current_stream(in.get_device_index());
  THO_DISPATCH_V2(in.scalar_type(), "upsample_bilinear2d (CUDA)", AT_WRAP(([&] {
    using T = opmath_type<scalar_t>;
    const Call<scalar_t> c{in, out, g, axis_ratio<T>(g.H_in, g.H_out, g.mode, g.scale_h),
                           axis_ratio<T>(g.W_in, g.W_out, g.mode, g.scale_w), stream};
    Kernel k;
    if (forced.empty()) {
      k = choose(c, forward, gather);
    } else {
      const std::optional<Kernel> named = kernel_by_name(forced);
      STD_TORCH_CHECK(named.has_value(), "upsample_bilinear2d: no kernel named \"", std::string(forced), "\"");
      const KernelInfo& info = kernel_info(*named);
      STD_TORCH_CHECK((std::string_view(info.direction) == "forward") == forward, "upsample_bilinear2d: ",
                      info.name, " is a ", info.direction, " kernel");
      const bool as_gather = *named != Kernel::Scatter && *named != Kernel::ScatterNhwc;
      STD_TORCH_CHECK(applies(*named, c, as_gather), "upsample_bilinear2d: ", info.name,
                      " does not apply to this call; it needs: ", info.when);
      k = *named;
    }
    then(k, c);
  })), AT_FLOATING_TYPES, torch::headeronly::ScalarType::Half, torch::headeronly::ScalarType::BFloat16);
}

}  // namespace

const KernelInfo& kernel_info(Kernel k) {
  for (const Row& row : kTable) {
    if (row.info.id == k) return row.info;
  }
  STD_TORCH_CHECK(false, "upsample_bilinear2d: a kernel missing from the table");
  return kTable[0].info;
}

std::optional<Kernel> kernel_by_name(std::string_view name) {
  for (const Row& row : kTable) {
    if (name == row.info.name) return row.info.id;
  }
  return std::nullopt;
}

}  // namespace ch06

void upsample_forward_cuda(const torch::stable::Tensor& x, torch::stable::Tensor& out, const ResizeGeometry& g,
                           std::string_view kernel) {
  ch06::with_kernel(x, out, g, true, false, kernel, [](ch06::Kernel k, const auto& c) { ch06::launch(k, c); });
}

void upsample_backward_cuda(const torch::stable::Tensor& grad_out, torch::stable::Tensor& grad_in,
                            const ResizeGeometry& g, bool gather, std::string_view kernel) {
  ch06::with_kernel(grad_out, grad_in, g, false, gather, kernel,
                    [](ch06::Kernel k, const auto& c) { ch06::launch(k, c); });
}

std::string upsample_kernel_name_cuda(const torch::stable::Tensor& in, torch::stable::Tensor& out,
                                      const ResizeGeometry& g, bool forward, bool gather) {
  std::string name;
  ch06::with_kernel(in, out, g, forward, gather, {},
                    [&](ch06::Kernel k, const auto&) { name = ch06::kernel_info(k).name; });
  return name;
}

std::string upsample_kernel_table_cuda() {
  std::string s;
  for (const ch06::Row& row : ch06::kTable) {
    s += std::string(row.info.name) + "|" + row.info.direction + "|" + (row.ladder_only ? "ladder" : "auto") + "|" +
         row.info.when + "\n";
  }
  return s;
}
