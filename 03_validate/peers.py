"""The trilinear forward against its strongest plain-PyTorch peers, in one run.

    python 03_validate/peers.py            # a GPU: writes results/03_validate_peers_cuda.json

Two formulations of the same formula, each eager and under torch.compile (a fresh static-shape
compile per shape), against chapter 02's kernel and chapter 03's coalesced and vectorized ones:
  reference   reference.py: the (N, 8) corner weights, then one weighted sum over the corners
  per-corner  out += (a * b * c)[:, None] * feats[:, k] over the 8 corners: no (N, 8, F)
              temporary, and compiled it is one fused kernel, the strongest peer we know of
Each timed through coursekit.timing.bench (the call as a program makes it: host included) at
chapter 02's target point and two more shapes, in float32 and bfloat16; the floor is the
bytes of feats, points and out at the copy bandwidth measured in the same run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from coursekit import ROOT, timing  # noqa: E402
from coursekit.build import build, load_python  # noqa: E402

HERE = Path(__file__).resolve().parent
SHAPES = [(65536, 256, torch.float32), (2**20, 32, torch.float32), (2**18, 64, torch.bfloat16)]


def per_corner(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """The per-corner formulation: the same formula, summed corner by corner."""
    compute = torch.promote_types(feats.dtype, torch.float32)
    u, v, w = ((points.to(compute) + 1) / 2).unbind(1)
    out = torch.zeros(feats.shape[0], feats.shape[2], device=feats.device, dtype=compute)
    for k in range(8):
        a = u if (k >> 2) & 1 else 1 - u
        b = v if (k >> 1) & 1 else 1 - v
        c = w if k & 1 else 1 - w
        out = out + (a * b * c)[:, None] * feats[:, k].to(compute)
    return out.to(feats.dtype)


def main() -> None:
    assert torch.cuda.is_available(), "peers.py times the GPU"
    ext, ext02 = build(HERE), build(ROOT / "02_forward_kernel")
    reference = load_python(HERE, "reference")
    bw = timing.copy_bandwidth("cuda")
    records = []
    for N, F, dtype in SHAPES:
        feats = torch.randn(N, 8, F, device="cuda", dtype=dtype)
        points = (torch.rand(N, 3, device="cuda") * 2 - 1).to(dtype)
        expected = reference.trilinear(feats.double(), points.double())
        contenders = {"chapter02": ext02.forward, "coalesced": ext.forward, "vectorized": ext.forward_vectorized,
                      "reference eager": reference.trilinear, "per-corner eager": per_corner}
        torch._dynamo.reset()
        contenders["reference compiled"] = torch.compile(reference.trilinear, dynamic=False)
        contenders["per-corner compiled"] = torch.compile(per_corner, dynamic=False)
        for name, fn in contenders.items():
            out = fn(feats, points)
            err = ((out.double() - expected).abs().max() / expected.abs().max()).item()
            assert err < 1e-2, f"{name}: relative error {err:.3g}"
            t = timing.bench(lambda: fn(feats, points), "cuda", min_run_time=0.5)
            moved = timing.nbytes(feats, points, out)
            records.append(timing.record(name, t, moved, bw, N=N, F=F, dtype=str(dtype).split(".")[-1],
                                         max_rel_error=err))
            print(f"N={N:8d} F={F:4d} {str(dtype):15s} {name:20s} {t.median_ms:8.4f} ms "
                  f"{records[-1]['fraction_of_floor']:6.1%}", flush=True)
    path = timing.save(ROOT / "results" / "03_validate_peers_cuda.json", records, "cuda",
                       extra={"copy_bandwidth_GBps": bw / 1e9, "script": "03_validate/peers.py"})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
