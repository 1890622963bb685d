# Ahead-of-time build of chapter 05:
#     pip install --no-build-isolation ./05_autograd
# Builds the CUDA kernels too when torch is a CUDA build, a toolkit is found and a
# GPU is visible (or FORCE_CUDA=1); `./course doctor` tells which.
# Importing the installed module registers the operators torch.ops.ch05.*.
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension

from coursekit.build import setup_extension

setup(
    name="ch05-trilinear",
    version="0.1.0",
    ext_modules=[setup_extension(__file__)],
    cmdclass={"build_ext": BuildExtension},
)
