"""Writes notebooks/03_timing.ipynb (run: .venv/bin/python notebooks/make_03_timing.py)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell("""# 03 · Timing the trilinear forward

The numbers come from `03_validate/bench.py`, saved as JSON in `../results/`: one file
from an H100 (`03_validate_cuda.json`) and one from a 2-core CPU (`03_validate_cpu.json`).
Every time is a median from `torch.utils.benchmark` after a warm-up (`coursekit.timing.bench`);
the *floor* is the bytes the op must move (feats + points read, out written) divided by the
copy bandwidth measured in the same run. With `COURSE_QUICK=1` the notebook also runs the
benchmark at tiny sizes on this machine, to show the pipeline works (nothing is saved then)."""),
    new_code_cell("""import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

QUICK = os.environ.get("COURSE_QUICK") == "1"
ROOT = Path.cwd().parent
RESULTS = {dev: json.loads((ROOT / "results" / f"03_validate_{dev}.json").read_text()) for dev in ("cuda", "cpu")}
for dev, doc in RESULTS.items():
    env = doc["environment"]
    print(f"{dev}: {env['device_name']}, torch {env['torch']}, CUDA {env['torch_cuda']}, driver {env.get('driver')}, "
          f"copy bandwidth {env['bandwidth_Bps'] / 1e9:.0f} GB/s")"""),
    new_code_cell("""if QUICK:  # prove the pipeline on this machine: tiny sizes, into a temporary folder
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(ROOT / "03_validate" / "bench.py"), "--quick", "--device", "cpu",
               "--out", f"{tmp}/q.json", "--ch02-out", f"{tmp}/q02.json"]
        subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, text=True)
        quick = json.loads(Path(tmp, "q.json").read_text())
    print(len(quick["records"]), "quick records, e.g.", {k: quick["records"][0][k] for k in ("name", "N", "F", "median_ms")})"""),
    new_code_cell("""STYLE = {"coalesced": "C0", "vectorized": "C2", "naive": "C3", "eager": "C7", "compiled": "C1"}


def plot(dev: str):
    doc = RESULTS[dev]
    rows = [r for r in doc["records"] if r["dtype"] == "float32"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for col, (sweep, other) in enumerate((("N", "F"), ("F", "N"))):
        part = [r for r in rows if r["sweep"] == sweep]
        fixed = part[0][other]
        for name, color in STYLE.items():
            mine = sorted((r for r in part if r["name"] == name), key=lambda r: r[sweep])
            if not mine:
                continue
            xs = [r[sweep] for r in mine]
            axes[0, col].plot(xs, [r["median_ms"] for r in mine], "o-", color=color, label=name)
            axes[1, col].plot(xs, [r["fraction_of_floor"] for r in mine], "o-", color=color, label=name)
        floor = sorted({(r[sweep], r["floor_ms"]) for r in part})
        axes[0, col].plot(*zip(*floor), "k--", label="bandwidth floor")
        axes[1, col].axhline(1.0, color="k", ls="--", lw=1)
        axes[0, col].set(xscale="log", yscale="log", ylabel="median time (ms)", title=f"vs {sweep} ({other} = {fixed})")
        axes[1, col].set(xscale="log", xlabel=sweep, ylabel="floor / time")
        for ax in axes[:, col]:
            ax.set_xscale("log", base=2)
            ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    env = doc["environment"]
    fig.suptitle(f"trilinear forward, float32, on {env['device_name']} "
                 f"(copy bandwidth {env['bandwidth_Bps'] / 1e9:.0f} GB/s; torch {env['torch']})")
    fig.tight_layout()
    if not QUICK:
        fig.savefig(Path("figures") / f"03_timing_{dev}.png", dpi=110)
    plt.show()


plot("cuda")"""),
    new_markdown_cell("""On the GPU the naive mapping (cube index on `threadIdx.x`) stays near 0.3 of the floor at every
size, while the coalesced kernels reach it from N = 8192 on. Below that the picture is not about
DRAM: at N = 1024 a launch's fixed cost dominates, and at N = 2048 to 4096 (`feats` of 16 to 32 MB)
the inputs stay in the H100's 50 MB L2 cache between the benchmark's repeated calls, so the
kernels beat a floor computed from DRAM bandwidth. The eager reference and `torch.compile` pay a
per-call overhead of about 0.1 and 0.05 ms, visible as flat lines at small sizes."""),
    new_code_cell("""plot("cpu")"""),
    new_markdown_cell("""On the CPU the three mappings run the same loop, so their curves differ only by noise (this
CPU was running other work too, on one thread). Small sizes beat the floor because their data
stays in the caches, while the floor is computed from a copy far larger than the caches."""),
    new_code_cell("""def table(dev: str):
    doc = RESULTS[dev]
    print(f"{doc['environment']['device_name']}: one call timed five ways (N=65536, F=256, float32)")
    for m in doc["environment"]["timing_methods"]:
        print(f"  {m['ms']:10.4f} ms  {m['method']}")
    print("dtypes at N=65536, F=256 (median ms, fraction of floor):")
    for r in (r for r in doc["records"] if r["sweep"] == "dtype"):
        print(f"  {r['dtype']:9s} {r['name']:11s} {r['median_ms']:9.4f} ms  {r['fraction_of_floor']:5.0%}")


table("cuda")
table("cpu")"""),
]

nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
nbformat.write(nb, Path(__file__).with_name("03_timing.ipynb"))
