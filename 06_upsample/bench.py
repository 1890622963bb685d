"""Chapter 06 benchmark: our resize against F.interpolate, forward and backward.

    python 06_upsample/bench.py                 # GPU if there is one, else CPU
    python 06_upsample/bench.py --device cpu [--threads 1]
    python 06_upsample/bench.py --quick --out /tmp/x.json   # tiny sizes: checks the pipeline

Writes results/06_upsample_<cuda|cpu>.json (coursekit.timing.save: each row has
the median time, the interquartile range, the bytes a kernel must move at least
and the fraction of the bandwidth floor, measured with a large copy in the same
run). Timing is coursekit.timing.bench: warm-up, synchronisation,
torch.utils.benchmark's blocked_autorange, median per call.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # coursekit, when run as a script from anywhere

from coursekit import timing  # noqa: E402
from coursekit.build import load_python  # noqa: E402

# (N, C, H, W), integer factor. The GPU shapes are the ones the README quotes.
SHAPES = {
    "cuda": [((8, 64, 256, 256), 2), ((16, 256, 64, 64), 4)],
    "cpu": [((2, 16, 128, 128), 2), ((4, 64, 32, 32), 4)],
    "quick": [((1, 4, 16, 16), 2), ((2, 8, 8, 8), 4)],
}
TORCH_ALIGN = {"half_pixel": False, "align_corners": True}  # modes F.interpolate has


def run(device: str, quick: bool) -> tuple[list[dict], float]:
    up = load_python(HERE, "upsample")
    aten_backward = torch.ops.aten.upsample_bilinear2d_backward
    min_time = 0.05 if quick else 0.5
    bandwidth = timing.copy_bandwidth(device, nbytes=(1 << 22) if quick else None)
    print(f"copy bandwidth on {device}: {bandwidth / 1e9:.0f} GB/s")
    records = []
    for shape, factor in SHAPES["quick" if quick else device]:
        torch.manual_seed(0)
        x = torch.randn(shape, device=device)
        size = (shape[2] * factor, shape[3] * factor)
        grad_out = torch.randn(shape[:2] + size, device=device)
        out_bytes = timing.nbytes(grad_out)  # output of the forward = grad_out of the backward
        moved = timing.nbytes(x) + out_bytes  # read one, write the other: the least any kernel moves
        common = dict(shape=list(shape), factor=factor, out_shape=list(grad_out.shape), dtype="float32")

        def add(name, fn, **fields):
            t = timing.bench(fn, device, min_run_time=min_time)
            row = timing.record(name, t, moved, bandwidth, **common, **fields)
            records.append(row)
            print(f"{name:28s} {str(shape):20s} x{factor} {fields.get('mode', ''):14s} "
                  f"{t.median_ms:8.3f} ms  {row['fraction_of_floor']:5.2f} of floor")
            return t

        for mode in ("half_pixel", "align_corners", "tf_legacy"):
            ours = add("forward ours", lambda: torch.ops.ch06.upsample_bilinear2d(x, list(size), mode), mode=mode)
            gather = add("backward gather", lambda: torch.ops.ch06.upsample_bilinear2d_backward(
                grad_out, list(shape[2:]), mode, "gather"), mode=mode)
            scatter = None
            if device == "cuda":  # on the CPU both names run the same gather kernel
                scatter = add("backward scatter", lambda: torch.ops.ch06.upsample_bilinear2d_backward(
                    grad_out, list(shape[2:]), mode, "scatter"), mode=mode)
            if mode in TORCH_ALIGN:
                ac = TORCH_ALIGN[mode]
                ref_f = add("forward F.interpolate", lambda: torch.nn.functional.interpolate(
                    x, size=size, mode="bilinear", align_corners=ac), mode=mode)
                ref_b = add("backward F.interpolate", lambda: aten_backward(
                    grad_out, list(size), list(shape), ac, None, None), mode=mode)
                records[-1]["speedup_gather"] = ref_b.median_ms / gather.median_ms
                records[-1]["speedup_forward"] = ref_f.median_ms / ours.median_ms
                if scatter is not None:
                    records[-1]["speedup_scatter"] = ref_b.median_ms / scatter.median_ms
                print(f"  speed-up vs PyTorch: forward {ref_f.median_ms / ours.median_ms:.2f}x, "
                      f"backward gather {ref_b.median_ms / gather.median_ms:.2f}x")
    return records, bandwidth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, short timings: checks that it runs")
    parser.add_argument("--out", type=Path, default=None, help="default: results/06_upsample_<device>.json")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for both sides (torch.set_num_threads); default: torch's default")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = args.out or HERE.parent / "results" / f"06_upsample_{args.device}.json"
    records, bandwidth = run(args.device, args.quick)
    path = timing.save(out, records, args.device, extra={"quick": args.quick, "copy_bandwidth_GBps": bandwidth / 1e9})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
