"""Chapter 05 demo: fit a FeatureGrid to a smooth 3D function with a few steps of Adam."""

import math
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # the Python layer beside this file; coursekit in the course root
from module import FeatureGrid  # noqa: E402  (builds csrc/ through coursekit in the course, else imports ch05_trilinear)

device = "cuda" if torch.cuda.is_available() and torch.ops.ch05.trilinear.default.has_kernel_for_dispatch_key("CUDA") else "cpu"
torch.manual_seed(0)


def target(p: torch.Tensor) -> torch.Tensor:
    x, y, z = p.unbind(1)
    return (torch.sin(math.pi * x) * torch.cos(math.pi * y) + 0.5 * z * z)[:, None]


grid = FeatureGrid(resolution=8, features=1, device=device)
opt = torch.optim.Adam(grid.parameters(), lr=0.05)
test_points = torch.rand(4096, 3, device=device) * 2 - 1


def test_loss() -> float:
    with torch.no_grad():
        return torch.nn.functional.mse_loss(grid(test_points), target(test_points)).item()


before = test_loss()
for step in range(200):
    p = torch.rand(2048, 3, device=device) * 2 - 1
    loss = torch.nn.functional.mse_loss(grid(p), target(p))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
after = test_loss()
print(f"FeatureGrid(8^3 cells) fit on {device}: test MSE {before:.4f} -> {after:.5f} after 200 Adam steps")
