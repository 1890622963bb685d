# Ahead-of-time build of chapter 01:
#     pip install --no-build-isolation ./01_pybind_hello
# then, from any folder:  python -c "import torch, ch01_hello; print(ch01_hello.describe(torch.ones(2)))"
#
# --no-build-isolation matters: without it pip builds in a fresh environment with
# whatever torch it downloads, and the extension would not match the torch you run.
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="ch01-hello",
    version="0.1.0",
    ext_modules=[
        # The first argument is the module name; BuildExtension passes it to the
        # compiler as TORCH_EXTENSION_NAME.
        CppExtension("ch01_hello", ["csrc/hello.cpp", "csrc/binding.cpp"], extra_compile_args=["-O3"]),
    ],
    cmdclass={"build_ext": BuildExtension},
)
