"""Writes notebooks/06_upsample.ipynb (run: .venv/bin/python notebooks/make_06_upsample.py)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell("""# 06 · Bilinear resize: our kernels against F.interpolate

The numbers come from `06_upsample/bench.py`, saved as JSON in `../results/`: one file from an
H100 (`06_upsample_cuda.json`) and one from a shared 2-core CPU, timed with one thread
(`06_upsample_cpu.json`, `bench.py --device cpu --threads 1`). Every time is
a median from `torch.utils.benchmark` after a warm-up (`coursekit.timing.bench`), float32. The
*floor* is the least a kernel must move (the input read once, the output written once; for the
backward grad_out read, grad_in written) divided by the copy bandwidth measured in the same run.
With `COURSE_QUICK=1` the notebook also runs the benchmark at tiny sizes on this machine, to show
the pipeline works (nothing is saved then)."""),
    new_code_cell("""import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

QUICK = os.environ.get("COURSE_QUICK") == "1"
ROOT = Path.cwd().parent
RESULTS = {dev: json.loads((ROOT / "results" / f"06_upsample_{dev}.json").read_text()) for dev in ("cuda", "cpu")}
for dev, doc in RESULTS.items():
    env = doc["environment"]
    print(f"{dev}: {env['device_name']}, torch {env['torch']}, CUDA {env['torch_cuda']}, driver {env.get('driver')}, "
          f"copy bandwidth {env['copy_bandwidth_GBps']:.0f} GB/s")"""),
    new_code_cell("""if QUICK:  # prove the pipeline on this machine: tiny sizes, into a temporary folder
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(ROOT / "06_upsample" / "bench.py"), "--quick", "--device", "cpu", "--out", f"{tmp}/q.json"]
        subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, text=True)
        quick = json.loads(Path(tmp, "q.json").read_text())
    print(len(quick["records"]), "quick records, e.g.", {k: quick["records"][0][k] for k in ("name", "mode", "shape", "median_ms")})"""),
    new_code_cell("""COLORS = {"forward ours": "C0", "forward F.interpolate": "C7", "backward gather": "C2",
          "backward scatter": "C1", "backward F.interpolate": "C3"}


def plot(dev: str):
    doc = RESULTS[dev]
    rows = doc["records"]
    cases = sorted({(tuple(r["shape"]), r["factor"]) for r in rows}, key=lambda c: c[0])
    fig, axes = plt.subplots(1, len(cases), figsize=(6.5 * len(cases), 4.8), squeeze=False)
    for ax, (shape, factor) in zip(axes[0], cases):
        mine = [r for r in rows if tuple(r["shape"]) == shape and r["factor"] == factor]
        labels, times, colors, floors = [], [], [], []
        for r in mine:
            labels.append(f"{r['name']}\\n{r['mode']}")
            times.append(r["median_ms"])
            colors.append(COLORS[r["name"]])
            floors.append(r["floor_ms"])
        y = range(len(mine))
        ax.barh(y, times, color=colors)
        ax.axvline(floors[0], color="k", ls="--", lw=1, label="bandwidth floor")
        for i, r in enumerate(mine):
            ax.text(r["median_ms"], i, f" {r['median_ms']:.3g} ms ({r['fraction_of_floor']:.0%})", va="center", fontsize=7)
        ax.set_yticks(list(y), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.3 * max(times))
        ax.set(xlabel="median time (ms); in brackets: fraction of the bandwidth floor",
               title=f"{list(shape)} x{factor} -> {mine[0]['out_shape']}")
        ax.legend(fontsize=8, loc="upper right")
        ax.grid(True, axis="x", alpha=0.3)
    env = doc["environment"]
    fig.suptitle(f"bilinear resize, float32, on {env['device_name']} "
                 f"(copy bandwidth {env['copy_bandwidth_GBps']:.0f} GB/s; torch {env['torch']})")
    fig.tight_layout()
    if not QUICK:
        fig.savefig(Path("figures") / f"06_upsample_{dev}.png", dpi=110)
    plt.show()


plot("cuda")"""),
    new_code_cell("""def table(dev: str):
    doc = RESULTS[dev]
    print(doc["environment"]["device_name"])
    for r in doc["records"]:
        extra = "".join(f"  {k}={r[k]:.2f}x" for k in ("speedup_forward", "speedup_gather", "speedup_scatter") if k in r)
        print(f"  {str(r['shape']):20s} x{r['factor']}  {r['mode']:14s} {r['name']:24s} {r['median_ms']:9.3f} ms "
              f"{r['fraction_of_floor']:5.0%} of floor{extra}")


table("cuda")"""),
    new_markdown_cell("""The speed-ups are printed on the `backward F.interpolate` rows: `speedup_forward` compares the
two forwards, `speedup_gather` and `speedup_scatter` our backward kernels with PyTorch's."""),
    new_code_cell("""plot("cpu")
table("cpu")"""),
]

nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
nbformat.write(nb, Path(__file__).with_name("06_upsample.ipynb"))
