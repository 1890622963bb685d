# Ahead-of-time build of chapter 03:
#     pip install --no-build-isolation ./03_validate
# Builds the CUDA kernel too when torch is a CUDA build, a toolkit is found and a
# GPU is visible (or FORCE_CUDA=1); `./course doctor` tells which.
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension

from coursekit.build import setup_extension

setup(
    name="ch03-trilinear",
    version="0.1.0",
    ext_modules=[setup_extension(__file__)],
    cmdclass={"build_ext": BuildExtension},
)
