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
"""

from __future__ import annotations

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


def cell_lookup(points: torch.Tensor, resolution: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For points (N, 3) in [-1, 1]: the 8 vertex indices of each point's cell, (N, 8) int64, into the
    flattened (R+1)^3 grid (index = (i * (R+1) + j) * (R+1) + k for vertex (i, j, k) along x, y, z),
    and the point's local coordinates in that cell, (N, 3) in [-1, 1], differentiable in the points.
    The arithmetic is float64 for float64 points and float32 otherwise (float16/bfloat16 points are
    converted first), and so are the local coordinates."""
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


class FeatureGrid(nn.Module):
    def __init__(self, resolution: int, features: int, *, init_scale: float = 0.1,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None):
        super().__init__()
        if resolution < 1 or features < 1:
            raise ValueError(f"FeatureGrid: resolution and features must be >= 1, got {resolution}, {features}")
        self.resolution = resolution
        # Stored flat, (R+1)^3 x F, so a gather is one index_select-like read.
        self.values = nn.Parameter(init_scale * torch.randn((resolution + 1) ** 3, features, device=device, dtype=dtype))

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        if points.dim() != 2 or points.shape[1] != 3:
            raise ValueError(f"FeatureGrid: points must have shape (N, 3), got {tuple(points.shape)}")
        index, local = cell_lookup(points, self.resolution)
        feats = self.values[index]  # (N, 8, F)
        # The op takes both in the grid's dtype: only the local coordinates are rounded to it.
        return trilinear(feats, local.to(self.values.dtype))

    def extra_repr(self) -> str:
        return f"resolution={self.resolution}, features={self.values.shape[1]}"
