# Chapter 01 as a package: copy this folder anywhere, then
#     pip install --no-build-isolation .        (why no isolation: see pyproject.toml)
# Then, from any folder:
#     python -c "import torch, ch01_hello; print(ch01_hello.describe(torch.zeros(2, 3)))"
#
# This chapter has C++ only. From chapter 02 on, setup.py also compiles csrc/*.cu with
# nvcc when CUDA is usable (CUDAExtension instead of CppExtension).
import glob
import os
import subprocess
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

NAME = "ch01_hello"  # the module to import; BuildExtension passes it to the compiler as TORCH_EXTENSION_NAME

# The same flags as the course's own builds (coursekit/build.py).
CXX_FLAGS = ["-O3"]  # torch adds the C++ standard it was built with
LD_FLAGS = []
if sys.platform.startswith("linux"):
    # at::parallel_for expands to an OpenMP loop in our own objects: without -fopenmp
    # it quietly runs on one thread. (Nothing here uses it yet; the later chapters do.)
    CXX_FLAGS.append("-fopenmp")
    LD_FLAGS.append("-fopenmp")


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
    name="ch01-hello",
    version="0.1.0",
    ext_modules=[
        CppExtension(
            NAME,
            sorted(glob.glob("csrc/*.cpp")),  # paths relative to this folder, where pip runs setup.py
            extra_compile_args=CXX_FLAGS,
            extra_link_args=LD_FLAGS + private_libstdcxx_flags(),
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
