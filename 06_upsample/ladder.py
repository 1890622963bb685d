"""Chapter 06's kernel ladder: every CUDA kernel version, validated and timed in one run.

    python 06_upsample/ladder.py                 # a GPU: validate + time, write results/06_upsample_ladder.json
    python 06_upsample/ladder.py --readme        # regenerate the tables (README.md, SPEED.md) and
                                                 # notebooks/figures/06_ladder.png from that file
    python 06_upsample/ladder.py --quick --out /tmp/l.json   # small sizes: checks the pipeline
    python 06_upsample/ladder.py --emulated      # no GPU: every rung validated on the CPU, through
                                                 # the GPU-free judge (coursekit/emulate.py)

Each rung is a kernel of the dispatch table (csrc/dispatch.cu), run by name through
torch.ops.ch06._upsample_bilinear2d_rung / _backward_rung on every case it applies to, checked
against a float64 reference (PyTorch's own op in float64, or for tf_legacy the chapter's CPU
kernel in float64), and timed two ways with coursekit.timing: per call through the op, as a
program calls it (bench), and as replays of a CUDA graph of 10 calls (bench_graph, "GPU only":
the kernels without the host's share). PyTorch's own kernels are timed the same two ways in the
same run (F.interpolate forward, aten's backward), and a copy of the same bytes gives the floor.
A graph-replay time is only ever compared with a graph-replay time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from coursekit import results, timing  # noqa: E402
from coursekit.build import load_python  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
NCHW, NHWC = "nchw", "channels_last"
# The rungs in the lesson's order (each must be a row of csrc/dispatch.cu's table).
FORWARD = ["forward_naive", "forward_rows", "forward_halve", "forward_double",
           "forward_nhwc", "forward_nhwc_packs", "forward_nhwc_rgb_x2"]
BACKWARD = ["scatter", "gather_plain", "gather_planes", "gather_column_packs", "gather_x2", "gather_x4",
            "gather_halve", "scatter_nhwc", "gather_nhwc", "gather_nhwc_rgb_x2", "gather_nhwc_x2",
            "gather_nhwc_x2_tile"]
# (label, input shape (N, C, H, W), output (H, W), dtype, layout); half_pixel throughout.
CASES = [
    ("x2 f32", (8, 64, 256, 256), (512, 512), F32, NCHW),
    ("x2 bf16", (8, 64, 256, 256), (512, 512), BF16, NCHW),
    ("x4 f32", (16, 256, 64, 64), (256, 256), F32, NCHW),
    ("x0.5 f32", (8, 64, 256, 256), (128, 128), F32, NCHW),
    ("x1.5 f32", (8, 64, 256, 256), (384, 384), F32, NCHW),
    ("x2 f32 CL", (8, 64, 256, 256), (512, 512), F32, NHWC),
    ("x2 bf16 CL", (8, 64, 256, 256), (512, 512), BF16, NHWC),
    ("RGB 1080p x2 f32 CL", (1, 3, 1080, 1920), (2160, 3840), F32, NHWC),
]
QUICK = [(label, (1, shape[1], 16, 16), (o[0] * 16 // shape[2], o[1] * 16 // shape[3]), dt, lay)
         for label, shape, o, dt, lay in CASES]
# A sanity bound on the largest error relative to the largest value: the kernels compute the source
# coordinates in float (as the spec says), the float64 reference in double. The tests hold every
# rung to the exact reference (tests/test_06_upsample.py, test_every_rung_cuda).
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 4e-3}
START, END = "<!-- ladder:start -->", "<!-- ladder:end -->"


def make(shape, dtype, layout) -> torch.Tensor:
    t = torch.randn(shape, device="cuda", dtype=dtype)
    return t.contiguous(memory_format=torch.channels_last) if layout == NHWC else t


def rel_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    return ((got.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def run(quick: bool) -> tuple[list[dict], float]:
    up = load_python(HERE, "upsample")  # builds the chapter (CUDA included) and registers torch.ops.ch06
    assert up.WITH_CUDA, "the ladder needs the chapter built with its CUDA kernels"
    table = torch.ops.ch06._upsample_bilinear2d_kernel_table(torch.empty(0)).splitlines()
    names = [line.split("|")[0] for line in table]
    assert sorted(names) == sorted(FORWARD + BACKWARD), f"the table's kernels changed: {names}"
    bandwidth = timing.copy_bandwidth("cuda")
    runtime = 0.05 if quick else 0.3
    records = []
    for label, shape, out_hw, dtype, layout in (QUICK if quick else CASES):
        x = make(shape, dtype, layout)
        g = make(shape[:2] + out_hw, dtype, layout)
        moved = timing.nbytes(x) + timing.nbytes(g)  # read one, write the other, either direction
        base = dict(case=label, shape=list(shape), out_hw=list(out_hw), dtype=str(dtype).split(".")[-1],
                    layout=layout, mode="half_pixel")
        ref_fw = F.interpolate(x.double(), size=out_hw, mode="bilinear", align_corners=False)
        ref_bw = torch.ops.aten.upsample_bilinear2d_backward(g.double(), list(out_hw), list(shape), False)
        copy_src, copy_dst = torch.empty(moved // 2, dtype=torch.uint8, device="cuda"), None
        copy_dst = torch.empty_like(copy_src)
        contenders = [("forward", "PyTorch", lambda: F.interpolate(x, size=out_hw, mode="bilinear")),
                      ("backward", "PyTorch",
                       lambda: torch.ops.aten.upsample_bilinear2d_backward(g, list(out_hw), list(shape), False)),
                      ("copy", "copy", lambda: copy_dst.copy_(copy_src))]
        for direction, rungs in (("forward", FORWARD), ("backward", BACKWARD)):
            for name in rungs:
                if direction == "forward":
                    fn = (lambda n=name: torch.ops.ch06._upsample_bilinear2d_rung(x, list(out_hw), "half_pixel", n))
                else:
                    fn = (lambda n=name: torch.ops.ch06._upsample_bilinear2d_backward_rung(
                        g, list(shape[2:]), "half_pixel", n))
                try:
                    got = fn()
                except RuntimeError as e:
                    if "does not apply" in str(e):
                        continue
                    raise
                err = rel_error(got, ref_fw if direction == "forward" else ref_bw)
                assert err <= TOLERANCE[dtype], f"{name} on {label}: relative error {err:.3g}"
                contenders.append((direction, name, fn, err))
        for direction, name, fn, *err in contenders:
            for how, measure in (("call", lambda: timing.bench(fn, "cuda", min_run_time=runtime)),
                                 ("graph", lambda: timing.bench_graph(fn, min_run_time=runtime))):
                t = measure()
                row = timing.record(name, t, moved, bandwidth, direction=direction, timed=how, **base)
                if err:
                    row["max_rel_error"] = err[0]
                records.append(row)
                print(f"{label:>20} {direction:>8} {name:>22} {how:>5} {t.median_ms:9.4f} ms "
                      f"{row['fraction_of_floor']:6.1%}", flush=True)
    return records, bandwidth


# The lesson's table shows three cases; SPEED.md shows them all.
README_CASES = ["x2 f32", "x1.5 f32", "x2 f32 CL"]


def table(doc: dict, cases: list[str] | None = None) -> str:
    """The ladder tables: graph-replay times (GPU only) in ms and the fraction of the copy floor."""
    env, rows = doc["environment"], doc["records"]
    cases = cases or list(dict.fromkeys(r["case"] for r in rows))
    graph = {(r["case"], r["direction"], r["name"]): r for r in rows if r["timed"] == "graph"}
    first = {c: next(r for r in rows if r["case"] == c) for c in cases}
    out = [f"`06_upsample/ladder.py` on an {env['device_name']} (torch {env['torch']}), half_pixel: the GPU time "
           "of one call (replays of a CUDA graph of 10 calls) in ms, and the fraction of the copy floor; "
           "`-`: the rung does not apply. PyTorch's kernel, timed the same way in the same run, is the last row. "
           + "; ".join(f"{c}: {first[c]['shape']} -> {first[c]['out_hw']}" for c in cases) + ".", ""]
    for direction, rungs in (("forward", FORWARD), ("backward", BACKWARD)):
        out.append(f"| {direction} | " + " | ".join(cases) + " |")
        out.append("|---" * (len(cases) + 1) + "|")
        for name in rungs + ["PyTorch"]:
            cells = [graph.get((c, direction, name)) for c in cases]
            if all(r is None for r in cells):
                continue
            out.append(f"| `{name}` | " + " | ".join(
                "-" if r is None else f"{r['median_ms']:.4f} ({r['fraction_of_floor']:.0%})" for r in cells) + " |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def write_block(path: Path, text: str) -> None:
    results.write_block(path, START, END, text)


def plot(doc: dict, path: Path) -> None:
    """One bar per rung: the fraction of the copy floor it reaches, on the x2 and x1.5 float32 cases."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graph = {(r["case"], r["direction"], r["name"]): r for r in doc["records"] if r["timed"] == "graph"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (direction, rungs) in zip(axes, (("forward", FORWARD[:4]), ("backward", BACKWARD[:7]))):
        names = [n for n in rungs + ["PyTorch"] if any((c, direction, n) in graph for c in ("x2 f32", "x1.5 f32"))]
        for k, case in enumerate(("x2 f32", "x1.5 f32")):
            ys = [graph.get((case, direction, n), {}).get("fraction_of_floor", 0) for n in names]
            ax.barh([i + 0.4 * k for i in range(len(names))], ys, height=0.4, label=case)
        ax.set_yticks([i + 0.2 for i in range(len(names))], names)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("fraction of the copy floor (GPU time, higher is better)")
        ax.set_title(f"{direction}, NCHW float32 (no bar: the rung does not apply to that case)", fontsize=9)
        ax.legend(loc="lower right")
    fig.suptitle(f"Chapter 06's kernel ladder on an {doc['environment']['device_name']} (06_upsample/ladder.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_outputs(doc: dict) -> None:
    write_block(HERE / "README.md", table(doc, README_CASES))
    write_block(HERE / "SPEED.md", table(doc))
    plot(doc, HERE.parent / "notebooks" / "figures" / "06_ladder.png")


def check_emulated() -> int:
    """Without a GPU: every rung through the GPU-free judge (coursekit/emulate.py), validated only."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from coursekit import emulate
    import test_06_upsample as t06  # the reference and the cases of the tests

    module = emulate.build("06-ladder")
    modes = {"align_corners": 0, "half_pixel": 1, "tf_legacy": 2}
    failures = 0
    for line in module.kernel_table().splitlines():
        name, direction = line.split("|")[:2]
        ran = bad = 0
        for shape, size in t06.RUNG_CASES:
            for layout in (torch.contiguous_format, torch.channels_last):
                for dtype in (torch.float32, torch.bfloat16):
                    forward = direction == "forward"
                    x = torch.randn(shape if forward else shape[:2] + size, dtype=dtype).contiguous(memory_format=layout)
                    target = size if forward else shape[2:]
                    try:
                        got = module.run(x, list(target), modes["half_pixel"], forward,
                                         "scatter" if name.startswith("scatter") else "gather", name, False, 1)
                    except RuntimeError as e:
                        if "does not apply" in str(e):
                            continue
                        raise
                    ref = t06.ref_forward(x, size, "half_pixel") if forward else t06.ref_backward(x, shape[2:], "half_pixel")
                    err = rel_error(got, ref)
                    bad += err > TOLERANCE[dtype]
                    ran += 1
        failures += bad + (ran == 0)
        print(f"{direction:>8} {name:>22}: {ran} cases, {bad} off the reference (emulated on the CPU)")
    return 1 if failures else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: checks the pipeline, not the speed")
    parser.add_argument("--out", type=Path, default=HERE.parent / "results" / "06_upsample_ladder.json")
    parser.add_argument("--readme", action="store_true",
                        help="only regenerate the tables (README.md, SPEED.md) and the plot from --out")
    parser.add_argument("--emulated", action="store_true",
                        help="no GPU: validate every rung on the CPU through the GPU-free judge (no timings)")
    args = parser.parse_args()
    if args.emulated:
        sys.exit(check_emulated())
    if not args.readme:
        if not torch.cuda.is_available():
            sys.exit("the ladder's rungs are CUDA kernels: run it on a GPU (the tests validate them there too)")
        records, bandwidth = run(args.quick)
        timing.save(args.out, records, "cuda", extra={"quick": args.quick, "copy_bandwidth_GBps": bandwidth / 1e9,
                                                      "script": "06_upsample/ladder.py"})
        print(f"wrote {args.out}")
    if args.readme or not args.quick:
        write_outputs(timing.load(args.out))


if __name__ == "__main__":
    main()
