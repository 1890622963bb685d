"""FeatureGrid: a learnable 3D grid of feature vectors, read by trilinear interpolation.

    grid = FeatureGrid(resolution=16, features=8)
    feats = grid(points)          # points (N, 3) in [-1, 1]^3 -> (N, 8 features)

The grid has (R+1)^3 vertices, each holding F learnable numbers; it splits the
cube [-1, 1]^3 into R^3 cells. For each point the module finds its cell, gathers
the 8 vertex features of that cell into (N, 8, F), converts the point to the
cell's local coordinates in [-1, 1], and calls the operator. Gradients reach the
grid through the gather (autograd's index backward adds them up per vertex) and
the points through our backward kernel. This is the building block of
feature-grid scene representations (Instant-NGP-style encoders, plenoxels).

Points are float64, float32, float16 or bfloat16 (of any of these, whatever the
grid's dtype), on the grid's device. A point with a NaN coordinate gives NaN
features, and infinite coordinates give NaN or infinite ones, like any PyTorch
op: refusing them would need a look at the data, a device synchronisation and a
break in a compiled graph. Their gradients are NaN too.
"""

from __future__ import annotations

import math
import numbers
import operator
import sys
from pathlib import Path

import torch
from torch import nn

# The operator route (trilinear_op.py), so that the module compiles with
# torch.compile(fullgraph=True). Its registrations (fake impl, autograd) are
# made once per process: reuse it if it is loaded already (some torch versions
# refuse a second register_fake for the same op).
try:
    from coursekit.build import load_python  # in the course: the trilinear_op.py beside this file
except ImportError:  # installed with pip (see setup.py): trilinear_op is installed beside this module
    import trilinear_op as _op
else:
    _op = sys.modules.get("trilinear_op") or load_python(Path(__file__).parent, "trilinear_op")
trilinear = _op.trilinear

# Corner k of a cell sits at offsets (k>>2 & 1, k>>1 & 1, k & 1) along (x, y, z).
CORNERS = torch.tensor([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)])

DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)  # what the op takes
DEVICE_TYPES = ("cpu", "cuda", "meta")  # the op's kernels; meta: shapes only (its fake implementation)


def cell_lookup(points: torch.Tensor, resolution: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For points (N, 3) in [-1, 1]: the 8 vertex indices of each point's cell, (N, 8) int64, into the
    flattened (R+1)^3 grid (index = (i * (R+1) + j) * (R+1) + k for vertex (i, j, k) along x, y, z),
    and the point's local coordinates in that cell, (N, 3) in [-1, 1], differentiable in the points.
    The arithmetic is float64 for float64 points and float32 otherwise (float16/bfloat16 points are
    converted first), and so are the local coordinates. A point with a NaN coordinate gets NaN local
    coordinates and meaningless indices (FeatureGrid replaces them before it gathers)."""
    R = resolution
    # BEGIN SOLUTION grid-lookup
    # In float16/bfloat16, s up to R would keep only 11 or 8 significant bits: at R = 100,
    # bfloat16 cannot tell 50.3 from 50. Compute in float32 at least.
    p = points if points.dtype in (torch.float64, torch.float32) else points.float()
    s = (p + 1) * (0.5 * R)  # grid units: vertex i sits at s = i, in [0, R]
    # The cell's lower vertex. Clamped so that s = R (a point on the far face)
    # and points slightly outside use the last/first cell and extrapolate.
    # floor is flat: it is taken as a constant (detach), the slope comes from s below.
    cell = s.detach().floor().clamp_(0, R - 1).long()
    local = (s - cell) * 2 - 1  # [0, 1] within the cell -> [-1, 1]; differentiable in points
    vertex = cell[:, None, :] + CORNERS.to(points.device)  # (N, 8, 3)
    index = (vertex[..., 0] * (R + 1) + vertex[..., 1]) * (R + 1) + vertex[..., 2]
    # END SOLUTION
    return index, local


def _count(name: str, value) -> int:
    """resolution and features: whole numbers >= 1 (an int or a NumPy integer; not a float, not a bool)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"FeatureGrid: {name} must be an int, got {type(value).__name__} {value!r}") from None
    if n < 1:
        raise ValueError(f"FeatureGrid: {name} must be >= 1, got {n}")
    return n


class FeatureGrid(nn.Module):
    def __init__(self, resolution: int, features: int, *, init_scale: float = 0.1,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None):
        super().__init__()
        resolution, features = _count("resolution", resolution), _count("features", features)
        if isinstance(init_scale, bool) or not isinstance(init_scale, numbers.Real):
            raise TypeError(f"FeatureGrid: init_scale must be a real number, got {type(init_scale).__name__}")
        if not (math.isfinite(init_scale) and init_scale >= 0):
            raise ValueError(f"FeatureGrid: init_scale (the initial values' standard deviation) must be finite and "
                             f">= 0, got {init_scale}")
        if dtype is not None and dtype not in DTYPES:
            raise TypeError(f"FeatureGrid: dtype must be float64, float32, float16 or bfloat16, got {dtype}")
        self.resolution = resolution
        # Stored flat, (R+1)^3 x F, so a gather is one index_select-like read.
        self.values = nn.Parameter(init_scale * torch.randn((resolution + 1) ** 3, features, device=device, dtype=dtype))
        # Checked on the tensor made: device=None means torch's default device, which may be anything.
        if self.values.device.type not in DEVICE_TYPES:
            raise ValueError(f"FeatureGrid: the grid must be on the CPU or a CUDA GPU (or meta), got {self.values.device}")

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        if points.dim() != 2 or points.shape[1] != 3:
            raise ValueError(f"FeatureGrid: points must have shape (N, 3), got {tuple(points.shape)}")
        if points.dtype not in DTYPES:  # complex points would lose their imaginary part, integers are no coordinates
            raise TypeError(f"FeatureGrid: points must be float64, float32, float16 or bfloat16, got {points.dtype}")
        if self.values.dtype not in DTYPES:  # after a .to(dtype) of the module
            raise TypeError(f"FeatureGrid: the grid's values must be float64, float32, float16 or bfloat16, "
                            f"got {self.values.dtype}")
        if points.device != self.values.device:
            raise ValueError(f"FeatureGrid: points must be on the grid's device, {self.values.device}, got {points.device}")
        index, local = cell_lookup(points, self.resolution)
        # NaN coordinates: their cell index is garbage (NaN converted to an integer), so gather vertex 0
        # instead; their local coordinates are NaN and make the features NaN. Infinite ones are clamped
        # to the first or last cell like any point outside.
        index = index.masked_fill(points.isnan().any(dim=1, keepdim=True), 0)
        feats = self.values[index]  # (N, 8, F)
        # The op takes both in the grid's dtype: only the local coordinates are rounded to it.
        return trilinear(feats, local.to(self.values.dtype))

    def extra_repr(self) -> str:
        return f"resolution={self.resolution}, features={self.values.shape[1]}"
