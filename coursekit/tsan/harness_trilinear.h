// What the harnesses of the trilinear chapters (02, 04) share: their inputs, each run through the
// CPU forward first. Included after the chapter's trilinear.h, which declares the kernels.
#pragma once
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <utility>

#include "harness.h"

namespace course_tsan {
// For every dtype and two sizes of several chunks (many cubes of few features, fewer of many):
// the forward on (feats, points), then body(feats, points).
template <class Body>
void each_trilinear_input(Body&& body) {
  at::set_num_threads(1);  // torch's own ops on this thread; the kernels' chunks on the judge's threads
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    for (auto [N, F] : {std::pair<int64_t, int64_t>{20000, 4}, {1000, 100}}) {
      at::Tensor feats = at::randn({N, 8, F}).to(dtype);
      at::Tensor points = (at::rand({N, 3}) * 2 - 1).to(dtype);
      at::Tensor out = at::empty({N, F}, feats.options());
      call("trilinear_forward_cpu", [&] { trilinear_forward_cpu(feats, points, out); });
      body(feats, points);
    }
  }
}
}  // namespace course_tsan
