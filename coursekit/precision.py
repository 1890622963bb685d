"""Chapter 03's precision figures (03_validate/README.md, section 2), measured on the CPU.

For each dtype, the relative error ||out - ref|| / ||ref|| (coursekit.testing.rel_error) of

- the chapter's CPU forward (`forward`: computed in at::opmath_type, rounded once), and
- the formula run in the dtype itself, rounding after every operation: u = (x + 1) / 2, each
  corner's weight as a product of three factors, then out = w_0 f_0 + w_1 f_1 + ... one
  elementwise operation at a time, each rounded to the dtype (what a kernel that skips
  opmath_type computes),

against the float64 formula of the same, already rounded inputs (reference.trilinear64). N = 20000
cubes, F = 64 features, features ~ N(0, 1), points uniform in [-1, 1]^3, the largest error over 5
seeds. `python -m coursekit.precision --write` writes results/03_validate_precision.json.
"""
from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import torch

from . import ROOT

OUT = ROOT / "results" / "03_validate_precision.json"
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
N, F, SEEDS = 20000, 64, 5


def in_dtype(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """The formula in the inputs' dtype, one rounded elementwise operation at a time."""
    u, v, w = ((points + 1) / 2).unbind(dim=1)
    out = None
    for k in range(8):
        fx = u if (k >> 2) & 1 else 1 - u
        fy = v if (k >> 1) & 1 else 1 - v
        fz = w if k & 1 else 1 - w
        term = ((fx * fy) * fz)[:, None] * feats[:, k]
        out = term if out is None else out + term
    return out


def measure() -> dict:
    sys.path.insert(0, str(ROOT / "03_validate"))
    from coursekit import build
    from coursekit.testing import rel_error

    import reference

    ext = build.build(ROOT / "03_validate", cuda=False)
    rows = []
    for dtype in DTYPES:
        worst = {"forward": 0.0, "formula in the dtype": 0.0}
        for seed in range(SEEDS):
            torch.manual_seed(seed)
            feats = torch.randn(N, 8, F, dtype=torch.float64).to(dtype)
            points = (torch.rand(N, 3, dtype=torch.float64) * 2 - 1).to(dtype)
            ref = reference.trilinear64(feats, points)
            worst["forward"] = max(worst["forward"], rel_error(ext.forward(feats, points), ref))
            worst["formula in the dtype"] = max(worst["formula in the dtype"], rel_error(in_dtype(feats, points), ref))
        for what, err in worst.items():
            rows.append({"dtype": str(dtype).removeprefix("torch."), "what": what, "rel_error": err})
    return {"script": "coursekit/precision.py", "device": f"CPU ({platform.machine()})", "torch": torch.__version__,
            "N": N, "F": F, "seeds": SEEDS, "measure": "largest relative error over the seeds", "records": rows}


def main(argv: list[str]) -> int:
    doc = measure()
    for r in doc["records"]:
        print(f"{r['dtype']:9s} {r['what']:22s} {r['rel_error']:.2g}")
    if "--write" in argv:
        OUT.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
