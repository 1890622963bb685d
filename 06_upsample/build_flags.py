"""The compiler flags this chapter needs on top of the usual ones.

Read by setup.py (the wheel) and by the course's JIT build (coursekit/build.py),
so that both compile the same code. Plain Python, no imports: any Python reads it.

* TORCH_TARGET_VERSION: build against the LibTorch stable ABI of torch 2.10
  (format: major, minor, patch, then five bytes of ABI tag, one byte each:
  0x020a000000000000 is 2.10.0). Every stable API newer than 2.10 is hidden
  by the headers (a compile error, not a crash on an older torch), and the
  library runs on every torch from 2.10 on.
* (Py_LIMITED_API, Python's limited C API of 3.9, is set in binding.cpp, the
  one file that includes Python.h: see there.)
* USE_CUDA (nvcc only): the C shim declares aoti_torch_get_current_cuda_stream,
  the stable way to ask for the current CUDA stream, only when it is defined.
* No OpenMP: the CPU kernels split work with torch::stable::parallel_for, which
  runs torch's own thread pool inside libtorch; nothing of OpenMP is compiled
  into this library.
"""

TORCH_TARGET_VERSION = "0x020a000000000000"  # torch 2.10

CXX_FLAGS = [f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}"]
NVCC_FLAGS = [f"-DTORCH_TARGET_VERSION={TORCH_TARGET_VERSION}", "-DUSE_CUDA"]
OPENMP = False
