# Chapter 05 as a package: copy this folder anywhere, then
#     pip install --no-build-isolation .        (why no isolation: see pyproject.toml)
# Then, from any folder: `import torch, ch05_trilinear` registers torch.ops.ch05.*, and
# `from trilinear_op import trilinear` gives the operator with its gradient.
#
# The CUDA kernels are compiled when torch is a CUDA build, a CUDA toolkit is found
# (CUDA_HOME) and a GPU is visible. On a machine without a GPU, FORCE_CUDA=1 compiles
# them anyway; TORCH_CUDA_ARCH_LIST="9.0" names the GPU architectures to compile for.
import glob
import os
import subprocess
import sys

import torch
from setuptools import setup

# torch takes the CUDA toolkit from CUDA_HOME, else from the nvcc on PATH, which can be a
# wrapper script outside the toolkit; /usr/local/cuda is then the better guess.
if "CUDA_HOME" not in os.environ and os.path.isfile("/usr/local/cuda/bin/nvcc"):
    os.environ["CUDA_HOME"] = "/usr/local/cuda"
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension  # reads CUDA_HOME

NAME = "ch05_trilinear"  # the module to import; the compiler sees it as TORCH_EXTENSION_NAME
PY_MODULES = ["trilinear_function", "trilinear_op", "trilinear_triton", "ste", "module"]  # the Python layer, installed beside the extension

# The same flags as the course's own builds (coursekit/build.py).
CXX_FLAGS = ["-O3"]  # torch adds the C++ standard it was built with
NVCC_FLAGS = ["-O3", "-lineinfo"]  # -lineinfo: profilers map time to source lines
LD_FLAGS = []
if sys.platform.startswith("linux"):
    # at::parallel_for expands to an OpenMP loop in our own objects: without -fopenmp
    # it quietly runs on one thread.
    CXX_FLAGS.append("-fopenmp")
    LD_FLAGS.append("-fopenmp")

use_cuda = bool(torch.version.cuda and CUDA_HOME and (torch.cuda.is_available() or os.environ.get("FORCE_CUDA") == "1"))
sources = sorted(glob.glob("csrc/*.cpp"))  # bindings, input checks, CPU kernels
if use_cuda:
    sources += sorted(glob.glob("csrc/*.cu"))
defines = ["-DWITH_CUDA"] if use_cuda else []  # the C++ side calls the CUDA kernels only then
Extension = CUDAExtension if use_cuda else CppExtension


def private_libstdcxx_flags():
    """One C++ standard library per process. A compiler that has only a static libstdc++ (no
    libstdc++.so) copies part of it into the extension, where it mixes with the libstdc++ torch
    loaded and crashes at the first std::ostringstream: keep that copy private to the extension."""
    try:
        found = subprocess.run([os.environ.get("CXX") or "c++", "-print-file-name=libstdc++.so"],
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return []
    static_only = found == "libstdc++.so"  # the bare name: this compiler has no libstdc++.so
    return ["-static-libstdc++", "-Wl,--exclude-libs,ALL", "-Wl,-Bsymbolic"] if static_only and sys.platform.startswith("linux") else []


setup(
    name="ch05-trilinear",
    version="0.1.0",
    py_modules=PY_MODULES,
    ext_modules=[
        Extension(
            NAME,
            sources,
            extra_compile_args={"cxx": CXX_FLAGS + defines, "nvcc": NVCC_FLAGS + defines},
            extra_link_args=LD_FLAGS + private_libstdcxx_flags(),
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
