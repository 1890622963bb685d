# Chapter 06, built ahead of time (see pyproject.toml for the pip commands).
#
# It imports nothing from the course: this folder is a package you can lift out.
# What makes the wheel portable:
#   * the C++/CUDA code uses only the LibTorch stable ABI, targeting torch 2.10
#     (build_flags.py: -DTORCH_TARGET_VERSION), so the library calls libtorch only
#     through its C shim and loads in every torch from 2.10 on;
#   * the Python module (csrc/binding.cpp) uses only CPython's limited API of 3.9,
#     so py_limited_api=True and the bdist_wheel option below tag the wheel
#     cp39-abi3: one file for every CPython from 3.9 on;
#   * the CUDA code is compiled for TORCH_CUDA_ARCH_LIST, with PTX for newer GPUs.
#
# The CUDA kernels are built when FORCE_CUDA=1, or when torch is a CUDA build and
# a GPU is visible. The toolkit: CUDA_HOME if set, else /usr/local/cuda if it has
# nvcc (an nvcc on PATH can be a wrapper outside the toolkit, which misleads
# torch's own guess).
import os
import runpy
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "ch06_upsample"
if "CUDA_HOME" not in os.environ and os.path.isfile("/usr/local/cuda/bin/nvcc"):
    os.environ["CUDA_HOME"] = "/usr/local/cuda"

import torch  # noqa: E402  (after CUDA_HOME: cpp_extension reads it on import)
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension  # noqa: E402

flags = runpy.run_path(os.path.join(HERE, "build_flags.py"))
force = os.environ.get("FORCE_CUDA", "0") == "1"
cuda = torch.version.cuda is not None and CUDA_HOME is not None and (force or torch.cuda.is_available())
if force and not cuda:
    raise SystemExit(f"FORCE_CUDA=1, but torch {torch.__version__} is a CPU-only build or no CUDA toolkit was found")
if cuda and not torch.cuda.is_available() and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0+PTX"  # no GPU to ask: Hopper, and PTX for anything newer
print(f"[ch06] building the {'CPU and CUDA' if cuda else 'CPU'} kernels"
      + (f" for TORCH_CUDA_ARCH_LIST={os.environ.get('TORCH_CUDA_ARCH_LIST', '(the visible GPU)')}" if cuda else ""))


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


defines = ["-DWITH_CUDA"] if cuda else []
sources = sorted(os.path.join("csrc", f) for f in os.listdir(os.path.join(HERE, "csrc")) if f.endswith(".cpp"))
if cuda:
    sources += sorted(os.path.join("csrc", f) for f in os.listdir(os.path.join(HERE, "csrc")) if f.endswith(".cu"))
extension = (CUDAExtension if cuda else CppExtension)(
    name=f"{PACKAGE}._C",
    sources=sources,
    include_dirs=[os.path.join(HERE, "csrc")],
    extra_compile_args={"cxx": ["-O3", *defines, *flags["CXX_FLAGS"]],
                        "nvcc": ["-O3", "-lineinfo", *defines, *flags["NVCC_FLAGS"]]},
    extra_link_args=private_libstdcxx_flags(),
    py_limited_api=True,
)


class BuildPy(build_py):
    """Puts the chapter's Python layer, upsample.py, into the package (ch06_upsample/upsample.py)."""

    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, "upsample.py"), os.path.join(self.build_lib, PACKAGE, "upsample.py"))


setup(
    packages=[PACKAGE],
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExtension, "build_py": BuildPy},
    options={"bdist_wheel": {"py_limited_api": "cp39"}},
)
