"""Chapter 01 demo: build the extension just in time and call it."""

import sys
from pathlib import Path

import torch  # first: the extension links against libtorch, which importing torch loads

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # `python 01_pybind_hello/demo.py` from anywhere: coursekit is in the course root
try:
    from coursekit.build import build
except ImportError:  # this folder copied out of the course and installed with pip (see setup.py)
    import ch01_hello as ext
else:
    ext = build(HERE)  # JIT: torch.utils.cpp_extension.load under the hood
print("module file:", ext.__file__)

x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
y = ext.echo(x)
print("echo returns the same tensor:", y.data_ptr() == x.data_ptr())
print("describe:", ext.describe(x))
print("scale(x, 0.5):", ext.scale(x, 0.5).tolist())
print(f"{ext.describe(ext.scale(x, factor=2.0))}; echo shares memory: {y.data_ptr() == x.data_ptr()}")
