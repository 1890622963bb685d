"""Chapter 06 benchmark: our resize against PyTorch's, forward and backward, in one run.

    python 06_upsample/bench.py                 # GPU if there is one, else CPU
    python 06_upsample/bench.py --device cpu [--threads 2]
    python 06_upsample/bench.py --quick --out /tmp/x.json   # tiny sizes: checks the pipeline

For every case (shape, factor, dtype, memory layout) it times, in the same process:
  forward   ours; F.interpolate; torch.compile(F.interpolate)
  backward  our gather; our scatter (GPU); PyTorch's backward (aten.upsample_bilinear2d_backward,
            atomics on a GPU)
  GPU only  (GPU) our forward and gather again, as replays of a CUDA graph of 10 calls
            (timing.bench_graph): the kernels' time without the host's Python, dispatch and
            launches, which set the pace of the smallest cases
  copy      (GPU) a plain copy of the same bytes, timed as the floor's copy is: how near the
            floor anything gets at the case's size
  training  on the first case, forward + backward through autograd: ours (gather) and
            F.interpolate, also under torch.use_deterministic_algorithms(True)
with the input in the case's layout (NCHW, or channels_last) for every contender.

Writes results/06_upsample_<cuda|cpu>.json (coursekit.timing.save: each row has the median
time, the interquartile range, the bytes a kernel must move at least and the fraction of the
bandwidth floor, measured with a large copy in the same run). Timing is coursekit.timing.bench:
warm-up, synchronisation, torch.utils.benchmark's blocked_autorange, median per call (on the CPU,
the lowest of CPU_TURNS medians, the calls of a case timed in turns).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # coursekit, when run as a script from anywhere

from coursekit import results, timing  # noqa: E402
from coursekit.build import load_python  # noqa: E402

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
NCHW, NHWC = "nchw", "channels_last"
# (N, C, H, W), factor, dtype, layout. The GPU cases: feature maps at x2 and x4, an RGB
# 1080p image (3 channels: few planes, long rows), half precision, a downsampling, channels_last.
CASES = {
    "cuda": [((8, 64, 256, 256), 2, F32, NCHW), ((16, 256, 64, 64), 4, F32, NCHW),
             ((1, 3, 1080, 1920), 2, F32, NCHW), ((8, 64, 256, 256), 2, BF16, NCHW),
             ((8, 64, 256, 256), 2, F16, NCHW), ((8, 64, 256, 256), 0.5, F32, NCHW),
             ((8, 64, 256, 256), 0.5, BF16, NCHW),
             ((8, 64, 256, 256), 2, F32, NHWC), ((8, 64, 256, 256), 2, BF16, NHWC),
             ((1, 3, 1080, 1920), 2, F32, NHWC)],
    "cpu": [((2, 16, 128, 128), 2, F32, NCHW), ((4, 64, 32, 32), 4, F32, NCHW), ((1, 3, 270, 480), 2, F32, NCHW),
            ((2, 16, 128, 128), 2, BF16, NCHW), ((2, 16, 128, 128), 0.5, F32, NCHW),
            ((2, 16, 128, 128), 2, F32, NHWC), ((2, 16, 128, 128), 2, BF16, NHWC),
            ((2, 64, 64, 64), 2, F32, NHWC), ((2, 64, 64, 64), 2, BF16, NHWC),
            ((2, 64, 64, 64), 0.5, F32, NHWC)],
    "quick": [((1, 4, 16, 16), 2, F32, NCHW), ((2, 8, 8, 8), 4, F32, NHWC), ((1, 3, 8, 8), 0.5, BF16, NCHW)],
}
MODES = ("half_pixel", "align_corners", "tf_legacy")  # all three on the first case, half_pixel after
TORCH_ALIGN = {"half_pixel": False, "align_corners": True}  # the modes F.interpolate has
DETERMINISTIC_CASES = 1  # the deterministic comparison (slow for PyTorch): on the first case only
CPU_TURNS = 3  # on the CPU, the calls of a case are timed in this many turns (flush() in run)


def _layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last) if layout == NHWC else t.contiguous()


def run(device: str, quick: bool, compile_peer: bool = True) -> tuple[list[dict], float]:
    load_python(HERE, "upsample")  # registers torch.ops.ch06
    ours_fw, ours_bw = torch.ops.ch06.upsample_bilinear2d, torch.ops.ch06.upsample_bilinear2d_backward
    aten_backward = torch.ops.aten.upsample_bilinear2d_backward
    min_time = 0.05 if quick else 0.3
    bandwidth = timing.copy_bandwidth(device, nbytes=(1 << 22) if quick else None)
    print(f"copy bandwidth on {device}: {bandwidth / 1e9:.0f} GB/s, torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU threads")
    records = []
    cases = CASES["quick" if quick else device]
    for index, (shape, factor, dtype, layout) in enumerate(cases):
        torch.manual_seed(0)
        size = [int(shape[2] * factor), int(shape[3] * factor)]
        x = _layout(torch.randn(shape, device=device, dtype=dtype), layout)
        grad_out = _layout(torch.randn(shape[:2] + tuple(size), device=device, dtype=dtype), layout)
        moved = timing.nbytes(x) + timing.nbytes(grad_out)  # read one, write the other: the least any kernel moves
        common = dict(shape=list(shape), factor=factor, out_shape=list(grad_out.shape),
                      dtype=str(dtype).replace("torch.", ""), layout=layout)

        def emit(name, t, mode, passes):
            row = timing.record(name, t, passes * moved, bandwidth, **common, mode=mode)
            records.append(row)
            print(f"{name:32s} {str(shape):20s} x{factor:<3} {common['dtype']:9s} {layout:13s} {mode:13s} "
                  f"{t.median_ms:8.3f} ms  {row['fraction_of_floor']:5.0%} of floor", flush=True)

        pending = []  # the CPU's calls of one case and mode, timed in turns by flush()

        def add(name, fn, mode, min_run_time=min_time, passes=1, graph=False, now=False):
            if device == "cpu" and not quick and not now:
                assert min_run_time == min_time, "a call timed in turns takes the case's min_run_time"
                pending.append((name, fn, mode, passes))
                return
            t = timing.bench_graph(fn, min_run_time=min_run_time) if graph else \
                timing.bench(fn, device, min_run_time=min_run_time)
            emit(name, t, mode, passes)

        def flush():  # the pending calls in turns (timing.bench_in_turns), all with the same min_run_time
            times = timing.bench_in_turns([fn for _, fn, _, _ in pending], device, CPU_TURNS, min_run_time=min_time)
            for (name, _, mode, passes), t in zip(pending, times):
                emit(name, t, mode, passes)
            pending.clear()

        for mode in MODES if index == 0 else MODES[:1]:
            add("forward ours", lambda: ours_fw(x, size, mode), mode)
            add("backward gather", lambda: ours_bw(grad_out, list(shape[2:]), mode, "gather"), mode)
            if device == "cuda" and mode == "half_pixel":  # the same calls without the host's time
                add("forward ours, GPU only", lambda: ours_fw(x, size, mode), mode, graph=True)
                add("backward gather, GPU only", lambda: ours_bw(grad_out, list(shape[2:]), mode, "gather"), mode,
                    graph=True)
                # What the floor means at this size: a plain copy that moves the same bytes (moved / 2
                # read, moved / 2 written), timed as the floor's 1 GiB copy is (not in a CUDA graph:
                # captured, a copy_ becomes a memcpy node, about 20% slower at 1 GiB on an H100).
                src = torch.rand(moved // 8, device=device)  # float32 values: moved / 2 bytes
                dst = torch.empty_like(src)
                add("copy of the same bytes", lambda: dst.copy_(src), mode)
                del src, dst
            if device == "cuda":  # on the CPU both names run the same gather kernel
                add("backward scatter", lambda: ours_bw(grad_out, list(shape[2:]), mode, "scatter"), mode)
            if mode not in TORCH_ALIGN:
                flush()
                continue
            ac = TORCH_ALIGN[mode]

            def interpolate(t, ac=ac):
                return F.interpolate(t, size=size, mode="bilinear", align_corners=ac)

            add("forward F.interpolate", lambda: interpolate(x), mode)
            if compile_peer:
                torch._dynamo.reset()  # a fresh compile per case (one function, many shapes and dtypes)
                compiled = torch.compile(interpolate, dynamic=False)
                add("forward torch.compile", lambda: compiled(x), mode)
            add("backward F.interpolate", lambda: aten_backward(grad_out, size, list(shape), ac, None, None), mode)
            flush()
            if index < DETERMINISTIC_CASES and mode == "half_pixel":
                # Under use_deterministic_algorithms(True), PyTorch's CUDA backward kernel refuses to
                # run (it adds with atomics); F.interpolate then switches to a decomposition whose
                # backward is an index_put. So this compares forward + backward through autograd
                # (floor: both passes' bytes).
                xg = x.detach().requires_grad_()

                def ours_train():
                    torch.autograd.grad(ours_fw(xg, size, mode), xg, grad_out)

                def torch_train():
                    torch.autograd.grad(interpolate(xg), xg, grad_out)

                add("forward+backward ours (gather)", ours_train, mode, passes=2)
                add("forward+backward F.interpolate", torch_train, mode, passes=2)
                flush()
                torch.use_deterministic_algorithms(True)
                try:  # (one turn each: the global mode is set around them)
                    add("forward+backward F.interpolate deterministic", torch_train, mode, min_run_time=0.1, passes=2,
                        now=True)
                    add("forward+backward ours (gather), deterministic mode", ours_train, mode, passes=2, now=True)
                finally:
                    torch.use_deterministic_algorithms(False)
    return records, bandwidth


CPU_START, CPU_END = "<!-- cpu:start -->", "<!-- cpu:end -->"


def cpu_table(doc: dict) -> str:
    """SPEED.md's CPU table, from results/06_upsample_cpu.json: half_pixel, median ms per call."""
    env = doc["environment"]
    cases: dict[tuple, dict[str, dict]] = {}
    for r in doc["records"]:
        if r["mode"] == "half_pixel":
            key = (tuple(r["shape"]), r["factor"], r["dtype"], r["layout"])
            cases.setdefault(key, {})[r["name"]] = r
    names = ["forward ours", "forward F.interpolate", "forward torch.compile", "backward gather",
             "backward F.interpolate"]
    out = [f"One run, `results/06_upsample_cpu.json`: {env['device_name']}, torch {env['torch']}, "
           f"{env.get('threads', env['cpu_threads'])} threads for every contender, `half_pixel`, median ms per call"
           + (f" (the lowest of {env['turns']} medians, the calls of a case timed in turns)" if env.get("turns", 1) > 1
              else "") + ":", "",
           "| case | forward, ours | `F.interpolate` | `torch.compile` | gather (ours) | PyTorch backward |",
           "|---|---|---|---|---|---|"]
    for (shape, factor, dtype, layout), named in cases.items():
        what = f"{shape} x{factor} {dtype}" + (", channels_last" if layout == "channels_last" else "")
        out.append(f"| {what} | " + " | ".join(f"{named[n]['median_ms']:.3f}" if n in named else "-" for n in names)
                   + " |")
    return "\n".join(out) + "\n"


def write_cpu_table(doc: dict, path: Path = HERE / "SPEED.md") -> None:
    results.write_block(path, CPU_START, CPU_END, cpu_table(doc))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, short timings: checks that it runs")
    parser.add_argument("--no-compile", action="store_true", help="leave out the torch.compile peer (it needs a "
                        "working compiler for Inductor's generated code)")
    parser.add_argument("--out", type=Path, default=None, help="default: results/06_upsample_<device>.json")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for every contender (torch.set_num_threads); default: torch's default")
    parser.add_argument("--readme", action="store_true", help="only regenerate SPEED.md's CPU table from "
                        "results/06_upsample_cpu.json")
    args = parser.parse_args()
    if args.readme:
        write_cpu_table(timing.load(HERE.parent / "results" / "06_upsample_cpu.json"))
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    out = args.out or HERE.parent / "results" / f"06_upsample_{args.device}.json"
    records, bandwidth = run(args.device, args.quick, compile_peer=not args.no_compile)
    path = timing.save(out, records, args.device, extra={"quick": args.quick, "copy_bandwidth_GBps": bandwidth / 1e9,
                                                         "threads": torch.get_num_threads(),
                                                         "turns": CPU_TURNS if args.device == "cpu" and not args.quick else 1})
    print(f"wrote {path}")
    if args.device == "cpu" and not args.quick and args.out is None:
        write_cpu_table(timing.load(path))


if __name__ == "__main__":
    main()
