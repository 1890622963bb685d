# Ahead-of-time build of chapter 06:
#     pip install --no-build-isolation ./06_upsample
# Builds the CUDA kernels too when torch is a CUDA build, a toolkit is found and a
# GPU is visible (or FORCE_CUDA=1); `./course doctor` tells which.
# Importing the installed module (import torch, ch06_upsample) registers the
# operators torch.ops.ch06.*; upsample.py adds their autograd and fake kernels.
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension

from coursekit.build import setup_extension

setup(
    name="ch06-upsample",
    version="0.1.0",
    ext_modules=[setup_extension(__file__)],
    cmdclass={"build_ext": BuildExtension},
)
