"""Writes notebooks/06_upsample.ipynb (run: .venv/bin/python notebooks/make_06_upsample.py)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell("""# 06 · Bilinear resize: our kernels against F.interpolate

The numbers come from `06_upsample/bench.py`, saved as JSON in `../results/`: one file from an
H100 (`06_upsample_cuda.json`) and one from a shared 2-core CPU, timed with two threads
(`06_upsample_cpu.json`, `bench.py --device cpu --threads 2`). Every time is
a median from `torch.utils.benchmark` after a warm-up (`coursekit.timing.bench`); each case names
its dtype and memory layout, and every contender gets its input in that layout. The
*floor* is the least a kernel must move (the input read once, the output written once; for the
backward grad_out read, grad_in written) divided by the copy bandwidth measured in the same run.
On the GPU, the `GPU only` rows time our forward and gather again as replays of a CUDA graph of
10 calls (`coursekit.timing.bench_graph`): the kernels without the host's time per call (Python,
dispatch, launches), which sets the pace of the smallest cases. The grey bar, `copy of the same
bytes`, is a plain copy that moves as many bytes as the case, timed as the floor's copy is: at the
smallest sizes even a copy stays short of the floor.
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
    new_code_cell("""COLORS = {"forward ours": "C0", "forward F.interpolate": "C7", "forward torch.compile": "C4",
          "backward gather": "C2", "backward scatter": "C1", "backward F.interpolate": "C3",
          "forward ours, GPU only": "lightsteelblue", "backward gather, GPU only": "lightgreen",
          "copy of the same bytes": "silver"}


def case_of(r):
    return (tuple(r["shape"]), r["factor"], r.get("dtype", "float32"), r.get("layout", "nchw"))


def plot(dev: str):
    \"\"\"One panel per case (shape, factor, dtype, layout): half_pixel, each kernel's time and its
    fraction of the bandwidth floor. The forward+backward rows are in the table below.\"\"\"
    doc = RESULTS[dev]
    rows = [r for r in doc["records"] if r["mode"] == "half_pixel" and r["name"] in COLORS]
    cases = list(dict.fromkeys(case_of(r) for r in rows))
    cols = 3
    nrows = (len(cases) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6.2 * cols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(cases):]:
        ax.axis("off")
    for ax, case in zip(axes.flat, cases):
        mine = [r for r in rows if case_of(r) == case]
        y = range(len(mine))
        ax.barh(y, [r["median_ms"] for r in mine], color=[COLORS[r["name"]] for r in mine])
        ax.axvline(mine[0]["floor_ms"], color="k", ls="--", lw=1, label="bandwidth floor")
        for i, r in enumerate(mine):
            ax.text(r["median_ms"], i, f" {r['median_ms']:.3g} ms ({r['fraction_of_floor']:.0%})", va="center", fontsize=7)
        ax.set_yticks(list(y), [r["name"] for r in mine], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.35 * max(r["median_ms"] for r in mine))
        shape, factor, dtype, layout = case
        ax.set_title(f"{list(shape)} x{factor}, {dtype}, {layout}", fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
    axes.flat[0].legend(fontsize=7, loc="lower right")
    env = doc["environment"]
    fig.suptitle(f"bilinear resize (half_pixel) on {env['device_name']}: median ms, in brackets the fraction of the "
                 f"floor (copy bandwidth {env['copy_bandwidth_GBps']:.0f} GB/s; torch {env['torch']}"
                 f"{'' if dev == 'cuda' else ', ' + str(env.get('threads', '?')) + ' threads'})")
    fig.tight_layout()
    if not QUICK:
        fig.savefig(Path("figures") / f"06_upsample_{dev}.png", dpi=110)
    plt.show()


plot("cuda")"""),
    new_code_cell("""def table(dev: str):
    doc = RESULTS[dev]
    print(doc["environment"]["device_name"])
    for r in doc["records"]:
        print(f"  {str(r['shape']):20s} x{r['factor']:<4} {r.get('dtype', 'float32'):9s} {r.get('layout', 'nchw'):13s} "
              f"{r['mode']:14s} {r['name']:52s} {r['median_ms']:9.3f} ms {r['fraction_of_floor']:5.0%} of floor")


table("cuda")"""),
    new_markdown_cell("""The `forward+backward` rows (first case only) time a training step's two passes through
autograd; their floor counts both passes' bytes. Under `torch.use_deterministic_algorithms(True)`
PyTorch's CUDA backward kernel refuses to run (it adds with atomics), so `F.interpolate`
switches to a decomposition whose backward is an `index_put`: that is the
`forward+backward F.interpolate deterministic` row. Ours runs the same gather kernel in
both modes."""),
    new_code_cell("""plot("cpu")
table("cpu")"""),
]

nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
nbformat.write(nb, Path(__file__).with_name("06_upsample.ipynb"))
