"""A/B of chapter 04's trilinear backward kernel against other copies of the chapter.

    git worktree add /tmp/old HEAD~1                       # (or any copy of the repository)
    python 04_backward/ab.py run /tmp/old old.json         # one process per copy: each builds its own
    python 04_backward/ab.py run . new.json
    python 04_backward/ab.py compare old=old.json new=new.json [--json out.json]

`run` builds the chapter 04 found under the given repository root, times the backward (both
gradients, and the points' gradient alone) on the short-row shapes of bench.py and on
N = 65536, F = 256, each as the median of torch.utils.benchmark runs (coursekit.timing.bench,
0.3 s a case, allocation included, as bench.py times them), against the bandwidth floor of a copy
timed in the same process. It also keeps a few sums of the gradients, to show that the copies
compute the same thing. `compare` puts copies side by side; NAME=A.json+B.json takes the better
of two runs of one copy.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from coursekit import timing  # noqa: E402
from coursekit.build import build  # noqa: E402

CASES = [(1 << 18, 16, torch.float32), (1 << 18, 32, torch.float32), (1 << 20, 32, torch.float32),
         (1 << 18, 32, torch.bfloat16), (1 << 18, 64, torch.bfloat16), (1 << 18, 64, torch.float16),
         (1 << 20, 32, torch.bfloat16), (65536, 256, torch.float32), (65536, 256, torch.bfloat16),
         (65536, 256, torch.float64)]


def inputs(N: int, F: int, dtype: torch.dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    grad_out = torch.randn(N, F, device="cuda", dtype=dtype, generator=g)
    feats = torch.randn(N, 8, F, device="cuda", dtype=dtype, generator=g)
    points = (torch.rand(N, 3, device="cuda", generator=g) * 2 - 1).to(dtype)
    return grad_out, feats, points


def run(root: Path, out: Path) -> None:
    ext = build(root / "04_backward")
    bw = timing.copy_bandwidth("cuda")
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "bw": bw, "times": {}, "check": {}}
    for N, F, dtype in CASES:
        go, fe, pt = inputs(N, F, dtype)
        gf, gp = ext.backward(go, fe, pt, True, True)
        res["check"][f"N={N} F={F} {dtype}"] = [gf.double().sum().item(), gp.double().abs().sum().item(),
                                                gp.double().sum().item()]
        for name, flags, moved in (("both", (True, True), (go, fe, pt, gf, gp)),
                                   ("points", (False, True), (go, fe, pt, gp))):
            t = timing.bench(lambda: ext.backward(go, fe, pt, *flags), "cuda", 0.3)
            frac = timing.floor_ms(timing.nbytes(*moved), bw) / t.median_ms
            res["times"][f"{name} N={N} F={F} {str(dtype)[6:]}"] = [t.median_ms, frac]
    out.write_text(json.dumps(res, indent=1))
    print(f"wrote {out}")


def compare(sides: list[str], out: str | None) -> None:
    runs = {}
    for side in sides:
        name, files = side.split("=", 1)
        runs[name] = [json.loads(Path(f).read_text()) for f in files.split("+")]
    names = list(runs)
    first = runs[names[0]][0]
    rows = []
    for case in first["times"]:
        row = {"case": case}
        for name in names:
            ms, frac = min((r["times"][case] for r in runs[name]), key=lambda t: t[0])
            row[name] = {"ms": round(ms, 5), "of_floor": round(frac, 4)}
        rows.append(row)
        print(f"{case:32s} " + "  ".join(f"{n} {row[n]['ms']:.4f} ms ({row[n]['of_floor']:.1%})" for n in names))
    if out:
        doc = {"script": "04_backward/ab.py", "device": first["device"], "torch": first.get("torch"),
               "timing": "median of torch.utils.benchmark runs (coursekit.timing.bench, 0.3 s), allocation "
                         "included; the better of the runs given for a copy",
               "runs": {n: len(r) for n, r in runs.items()}, "times": rows,
               "check": {case: {n: runs[n][0]["check"][case] for n in names} for case in first["check"]}}
        Path(out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("root", type=Path)
    r.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("sides", nargs="+", help="NAME=run.json, or NAME=a.json+b.json for two runs of one copy")
    c.add_argument("--json")
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.root.resolve(), args.out)
    else:
        compare(args.sides, args.json)


if __name__ == "__main__":
    main()
