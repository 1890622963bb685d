// Chapter 02 under the thread judge: the CPU forward, every dtype, inputs of several chunks.
#include "trilinear.h"
#include "harness_trilinear.h"

int main() {
  course_tsan::each_trilinear_input([](const at::Tensor&, const at::Tensor&) {});
}
