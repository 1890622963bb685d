"""Chapter 03's precision figures (03_validate/README.md, section 2), measured on the CPU.

For each dtype, the relative error ||out - ref|| / ||ref|| (coursekit.testing.rel_error) of

- the chapter's CPU forward (`forward`: computed in at::opmath_type, rounded once), and
- the formula run in the dtype itself, rounding after every operation: u = (x + 1) / 2, each
  corner's weight as a product of three factors, then out = w_0 f_0 + w_1 f_1 + ... one
  elementwise operation at a time, each rounded to the dtype (what a kernel that skips
  opmath_type computes),

against the float64 formula of the same, already rounded inputs (reference.trilinear64). N = 20000
cubes, F = 64 features, features ~ N(0, 1), points uniform in [-1, 1]^3, the largest error over 5
seeds. Also (APPENDIX_cpu_results.md, "Rounding once, element by element"): the float64 answer
rounded to each dtype; at N = 2000, F = 32 in float16, the share of outputs more than one ulp from
the float64 answer (coursekit.testing.assert_rounded's rule) for the formula in float16 throughout,
only the weights in float16, only the weight x feature products rounded to float16, the kernel and
the reference; and in float32, on the first inputs, the error of plausible mistakes.
`python -m coursekit.precision --write` writes results/03_validate_precision.json.
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


def weights(points: torch.Tensor, offsets=lambda k: ((k >> 2) & 1, (k >> 1) & 1, k & 1), u_of=lambda x: (x + 1) / 2):
    """(N, 8) corner weights in the points' dtype, one rounded operation at a time."""
    u, v, w = u_of(points).unbind(dim=1)
    cols = []
    for k in range(8):
        bx, by, bz = offsets(k)
        cols.append(((u if bx else 1 - u) * (v if by else 1 - v)) * (w if bz else 1 - w))
    return torch.stack(cols, dim=1)


def summed(ws: torch.Tensor, feats: torch.Tensor, corners=range(8), product_dtype=None) -> torch.Tensor:
    """sum over k of ws[:, k] * feats[:, k], in ws' dtype, products optionally rounded to product_dtype."""
    out = torch.zeros(feats.shape[0], feats.shape[2], dtype=ws.dtype)
    for k in corners:
        term = ws[:, k, None] * feats[:, k].to(ws.dtype)
        if product_dtype is not None:
            term = term.to(product_dtype).to(ws.dtype)
        out = out + term
    return out


def off_by_more_than_one_ulp(out: torch.Tensor, ref: torch.Tensor) -> float:
    """The share of elements farther than one ulp of out.dtype from ref (assert_rounded's rule)."""
    from coursekit.testing import ulp_of

    ref = ref.double()
    tiny = ref.abs().max().item() * 2.0**-6
    allowed = ulp_of(ref.abs().clamp(min=tiny), out.dtype)
    return ((out.double() - ref).abs() > allowed).double().mean().item()


def tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 values rounded to TF32 (10 explicit significand bits), to nearest even."""
    bits = t.float().view(torch.int32)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF
    return rounded.view(torch.float32)


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
    # the float64 answer rounded to each dtype (seed 0, the first inputs)
    torch.manual_seed(0)
    feats64 = torch.randn(N, 8, F, dtype=torch.float64)
    points64 = torch.rand(N, 3, dtype=torch.float64) * 2 - 1
    for dtype in DTYPES[1:]:
        f, p = feats64.to(dtype), points64.to(dtype)
        ref = reference.trilinear64(f, p)
        rows.append({"dtype": str(dtype).removeprefix("torch."), "what": "float64 answer rounded",
                     "rel_error": rel_error(ref.to(dtype), ref)})
    # float32 mistakes on the same inputs
    f, p = feats64.float(), points64.float()
    ref = reference.trilinear64(f, p)
    mistakes = {
        "y and z swapped": summed(weights(p[:, [0, 2, 1]]), f),
        "a corner left out": summed(weights(p), f, corners=range(7)),
        "x where u belongs": summed(weights(p, u_of=lambda x: x), f),
        "inputs rounded to TF32": summed(weights(tf32(p).double()), tf32(f).double()),
    }
    for what, out in mistakes.items():
        rows.append({"dtype": "float32", "what": what, "rel_error": rel_error(out, ref)})
    # float16 at N = 2000, F = 32: outputs more than one ulp from the float64 answer
    torch.manual_seed(0)
    f = torch.randn(2000, 8, 32, dtype=torch.float64).half()
    p = (torch.rand(2000, 3, dtype=torch.float64) * 2 - 1).half()
    ref = reference.trilinear64(f, p)
    ways = {
        "formula in float16 throughout": in_dtype(f, p),
        "only the weights in float16": summed(weights(p).float(), f).half(),
        "only the weight x feature products in float16": summed(weights(p.float()), f, product_dtype=torch.float16).half(),
        "the kernel (forward)": ext.forward(f, p),
        "the reference (reference.trilinear)": reference.trilinear(f, p),
    }
    for what, out in ways.items():
        rows.append({"dtype": "float16", "N": 2000, "F": 32, "what": what,
                     "more_than_one_ulp": off_by_more_than_one_ulp(out, ref)})
    return {"script": "coursekit/precision.py", "device": f"CPU ({platform.machine()})", "torch": torch.__version__,
            "N": N, "F": F, "seeds": SEEDS, "measure": "largest relative error over the seeds", "records": rows}


def main(argv: list[str]) -> int:
    doc = measure()
    for r in doc["records"]:
        value = f"rel_error {r['rel_error']:.2g}" if "rel_error" in r else f"more than one ulp: {r['more_than_one_ulp']:.0%}"
        print(f"{r['dtype']:9s} {r['what']:46s} {value}")
    if "--write" in argv:
        OUT.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
