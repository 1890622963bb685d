"""Chapter 05 benchmark: what each route costs, forward + backward.

    python 05_autograd/bench.py            # full sizes, writes results/05_autograd_<cuda|cpu>.json
    python 05_autograd/bench.py --quick    # tiny sizes (checks the pipeline)

Rows, each timing out = f(feats, points) and both gradients by torch.autograd.grad:
  function        autograd.Function around the pybind11 kernels (route 1)
  op              the torch.library operator (route 2), eager
  op_compiled     route 2 inside torch.compile(fullgraph=True)   (CUDA only)
  reference       the same formula in plain PyTorch ops, eager
  reference_compiled  that formula compiled by inductor            (CUDA only)
On the CPU the compiled rows are left out: inductor compiles C++ there, which
takes long on a small machine and is not what this chapter measures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: coursekit is in the course root
from coursekit import ROOT, timing
from coursekit.build import build, describe, load_python

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check that everything runs")
    parser.add_argument("--out", type=Path, default=None, help="the JSON file to write")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when built for it and visible)")
    args = parser.parse_args()

    ext = build(HERE)
    device = args.device or ("cuda" if describe(ext) == "CPU+CUDA" and torch.cuda.is_available() else "cpu")
    function = load_python(HERE, "trilinear_function").trilinear
    op = load_python(HERE, "trilinear_op").trilinear
    reference = load_python(HERE, "reference").trilinear
    routes = {"function": function, "op": op, "reference": reference}
    if device == "cuda":
        routes["op_compiled"] = torch.compile(op, fullgraph=True)
        routes["reference_compiled"] = torch.compile(reference, fullgraph=True)

    if args.quick:
        sizes = [(64, 8), (256, 16)]
    elif device == "cuda":
        sizes = [(1024, 8), (262144, 32)]
    else:
        sizes = [(1024, 8), (32768, 32)]
    min_run_time = 0.05 if args.quick else 0.5

    records = []
    for N, F in sizes:
        torch.manual_seed(0)
        feats = torch.randn(N, 8, F, device=device, requires_grad=True)
        points = (torch.rand(N, 3, device=device) * 2 - 1).requires_grad_()
        grad_out = torch.randn(N, F, device=device)
        for name, f in routes.items():
            def step(f=f):
                return torch.autograd.grad(f(feats, points), (feats, points), grad_out)

            t = timing.bench(step, device, min_run_time=min_run_time)
            records.append(timing.record(name, t, N=N, F=F, dtype="float32"))
            print(f"{device} N={N:7d} F={F:3d} {name:20s} {t.median_ms * 1e3:9.1f} us (forward + backward)")

    out = args.out or ROOT / "results" / f"05_autograd_{device}.json"
    timing.save(out, records, device, {"what": "forward + backward (torch.autograd.grad), float32"})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
