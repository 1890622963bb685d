"""Chapter 06, installed: bilinear resizing in three coordinate conventions.

    import torch, ch06_upsample
    y = ch06_upsample.upsample_bilinear(x, size=(H, W), mode="tf_legacy")
    y = torch.ops.ch06.upsample_bilinear2d(x, [H, W], "half_pixel")   # the operator itself

Importing the package loads the compiled library _C (the operators' schemas and
kernels, on the LibTorch stable ABI) and then upsample.py (their Python
implementation with the argument checks, fake kernels and autograd).
"""

import torch  # noqa: F401  first: _C needs libtorch loaded

from . import _C  # noqa: F401  registers torch.ops.ch06.* and the kernels
from . import upsample  # noqa: F401  registers the operators' Python parts
from .upsample import BACKWARDS, MODES, WITH_CUDA, output_geometry, upsample_bilinear

with_cuda = WITH_CUDA

__all__ = ["BACKWARDS", "MODES", "WITH_CUDA", "output_geometry", "upsample_bilinear", "with_cuda"]
