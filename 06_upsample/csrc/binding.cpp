// Chapter 06: the Python module, without pybind11.
//
// The operators live in the dispatcher (torch.ops.ch06, registered in ops.cpp
// by static initialisers). Python only has to load this shared library, and
// `import` loads a library that defines PyInit_<name>. So the module is the
// smallest one Python's C API can make, written against the limited API
// (Py_LIMITED_API=0x03090000, set by the build): this file compiles to the same
// code for every Python from 3.9 on, which is what lets one abi3 wheel serve
// them all. pybind11 cannot do that; it uses CPython internals.
//
// The version is set here, in the one file that includes Python.h, rather than
// on the command line: torch's BuildExtension adds -DPy_LIMITED_API=<the oldest
// CPython that torch itself supports> (3.10 for torch 2.15) to an extension
// built with py_limited_api=True, and the wheel's tag (cp39-abi3) has to name
// the version this code was compiled for.
#undef Py_LIMITED_API
#define Py_LIMITED_API 0x03090000
#include <Python.h>

// TORCH_EXTENSION_NAME is the module's name, set by the build: ch06_upsample for
// the course's JIT build, _C for the wheel (ch06_upsample._C).
#define CH06_CONCAT2(a, b) a##b
#define CH06_CONCAT(a, b) CH06_CONCAT2(a, b)
#define CH06_STRING2(a) #a
#define CH06_STRING(a) CH06_STRING2(a)

extern "C" PyMODINIT_FUNC CH06_CONCAT(PyInit_, TORCH_EXTENSION_NAME)(void) {
  static PyModuleDef module = {
      PyModuleDef_HEAD_INIT,
      CH06_STRING(TORCH_EXTENSION_NAME),
      "Chapter 06: bilinear resizing; the operators are torch.ops.ch06.*",
      -1,       // no per-module state
      nullptr,  // no functions: everything is in torch.ops.ch06
  };
  PyObject* m = PyModule_Create(&module);
  if (m == nullptr) {
    return nullptr;
  }
#ifdef WITH_CUDA
  const long with_cuda = 1;
#else
  const long with_cuda = 0;
#endif
  if (PyModule_AddIntConstant(m, "with_cuda", with_cuda) != 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
