// Chapter 06: the Python module. The operators live in the dispatcher
// (torch.ops.ch06, registered in ops.cpp); this module only has to exist so
// that Python can load the library, which runs those registrations.
#include <torch/extension.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "Chapter 06: bilinear resizing; the operators are torch.ops.ch06.upsample_bilinear2d(_backward)";
#ifdef WITH_CUDA
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif
}
