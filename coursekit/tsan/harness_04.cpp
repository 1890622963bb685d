// Chapter 04 under the thread judge: the CPU forward and backward (both gradients, and each
// alone), every dtype, inputs of several chunks.
#include "trilinear.h"
#include "harness_trilinear.h"

int main() {
  course_tsan::each_trilinear_input([](const at::Tensor& feats, const at::Tensor& points) {
    const int64_t N = feats.size(0), F = feats.size(2);
    at::Tensor grad_out = at::randn({N, F}).to(feats.scalar_type());
    for (int need : {3, 1, 2}) {  // both gradients, feats' only, points' only
      at::Tensor grad_feats = need & 1 ? at::empty_like(feats) : at::Tensor();
      at::Tensor grad_points = need & 2 ? at::empty_like(points) : at::Tensor();
      course_tsan::call("trilinear_backward_cpu",
                        [&] { trilinear_backward_cpu(grad_out, feats, points, grad_feats, grad_points); });
    }
  });
}
