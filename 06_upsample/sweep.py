"""Chapter 06 from the user's side: the calls a user makes, over shapes drawn at random.

    python 06_upsample/sweep.py                  # a GPU: writes results/06_upsample_sweep_cuda.json
    python 06_upsample/sweep.py --device cpu     # the CPU, 2 threads: results/06_upsample_sweep_cpu.json
    python 06_upsample/sweep.py --quick --out /tmp/s.json   # a few small cases: checks the pipeline
    python 06_upsample/sweep.py --resume         # go on with a run that was cut short (its file's cases kept)
    python 06_upsample/sweep.py --readme         # regenerate the summaries (README.md, SPEED.md)
    python 06_upsample/sweep.py --device cpu --host-only   # the host section alone: results/06_upsample_host_cpu.json

bench.py and ladder.py time the kernel ops on chosen cases. This script times what a user calls,
in the same process as PyTorch's own calls:

  host      a tiny case (a 64-byte input: only the host's work counts), a small one (64 KiB,
            where the host's work sets the pace) at x2 and at a ratio whose backward reads a plan,
            and, on a GPU, two large ones: the kernel op,
            PyTorch's kernel op called the same way (through torch.ops), the registered operator
            (torch.ops.ch06.upsample_bilinear2d and its torch.library autograd formula) and the
            public function upsample_bilinear, against F.interpolate and F.interpolate's kernels
            under a Python autograd.Function (the floor of a Python formula); forward, backward
            through torch.autograd.grad, and a forward + backward step; with torch.profiler's count
            of the kernels each step launches.
  sweep     CASES cases drawn with a fixed seed: ratio in [1/8, 8] (both axes, integer or not,
            equal or not), N, C, an input + output size from 64 KiB to 512 MiB (64 MiB on the CPU), NCHW or
            channels_last, float32 / bfloat16 / float16, half_pixel or align_corners (the two modes
            F.interpolate has). Per case: the forward (upsample_bilinear against F.interpolate and
            torch.compile(F.interpolate), compiled for that case), the backward through
            torch.autograd.grad (against F.interpolate's, whose CUDA backward adds with atomics),
            and a forward + backward step; the bandwidth floor of the bytes a pass must move.

Before anything is timed, the torch.compile peers are compiled in --compile-workers processes at
once, which fills inductor's caches on disk: the timed process then loads each case's compiled code
(the same code) instead of compiling 48 cases one after the other, and makes inductor's choice of
launch configuration itself, on an idle GPU.

Every time is coursekit.timing.bench: calls as a program makes them (host included), the median
of blocked_autorange. The summary is the distribution of our speed-up over each peer, worst case
first.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from coursekit import results, timing  # noqa: E402
from coursekit.build import load_python  # noqa: E402

CASES = 48
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CHANNELS = [1, 2, 3, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256]
ROUND_RATIOS = [2, 4, 8, 1 / 2, 1 / 4, 1 / 8, 3, 1.5]
START, END = "<!-- sweep:start -->", "<!-- sweep:end -->"
CPU_START, CPU_END = "<!-- sweep-cpu:start -->", "<!-- sweep-cpu:end -->"  # SPEED.md's CPU sweep
LARGE = 64 << 20  # input + output bytes from which the floor is the goal
PEERS = [  # (metric, ours, peer, how the summary names the peer)
    ("forward", "forward ours", "forward F.interpolate", "`F.interpolate`"),
    ("forward", "forward ours", "forward torch.compile", "`torch.compile(F.interpolate)`"),
    ("backward", "backward ours (autograd)", "backward F.interpolate (autograd)", "`F.interpolate`'s backward"),
    ("forward + backward", "step ours", "step F.interpolate", "`F.interpolate`"),
]


def draw_cases(n: int, seed: int = 0, max_bytes: int = 512 << 20) -> list[dict]:
    """Shapes a user might resize, drawn with a fixed seed."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rh = rng.choice(ROUND_RATIOS) if rng.random() < 0.35 else math.exp(rng.uniform(math.log(1 / 8), math.log(8)))
        rw = rh if rng.random() < 0.7 else math.exp(rng.uniform(math.log(1 / 8), math.log(8)))
        dtype = rng.choice(list(DTYPES))
        c, batch = rng.choice(CHANNELS), rng.choice([1, 1, 2, 4, 8, 16])
        total = math.exp(rng.uniform(math.log(64 << 10), math.log(max_bytes)))  # input + output bytes
        plane = total / (DTYPES[dtype].itemsize * batch * c * (1 + rh * rw))  # H_in * W_in
        aspect = rng.choice([1, 1, 4 / 3, 16 / 9, 3 / 4])
        h = max(2, round(math.sqrt(plane / aspect)))
        w = max(2, round(plane / h))
        out.append(dict(shape=[batch, c, h, w], size=[max(1, round(h * rh)), max(1, round(w * rw))], dtype=dtype,
                        layout=rng.choice(["nchw", "channels_last"]), mode=rng.choice(["half_pixel", "align_corners"])))
    return out


def _make(shape, dtype, layout, device, requires_grad=False):
    t = torch.randn(shape, dtype=dtype, device=device)
    if layout == "channels_last":
        t = t.contiguous(memory_format=torch.channels_last)
    return t.requires_grad_(requires_grad)


def _kernels(fn, device) -> tuple[int | None, float | None]:
    """(how many kernels, memsets and copies one call of fn runs on the GPU, their total time in ms),
    from torch.profiler; (None, None) on the CPU."""
    from torch.profiler import ProfilerActivity, profile
    if device != "cuda":
        return None, None
    fn()
    timing.sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        timing.sync(device)
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(gpu), sum(e.device_time for e in gpu) / 1e3


HOST_CASES = [  # (shape, size, dtype): a tiny case (only the host's work counts), a small case, where the
    ((1, 1, 4, 4), [8, 8], torch.float32),  # host sets the pace, at x2 and at a ratio with no closed form
    ((1, 16, 32, 32), [64, 64], torch.float32),  # (whose gather reads a plan), and two large ones
    ((1, 16, 32, 32), [45, 45], torch.float32),
    ((8, 64, 256, 256), [512, 512], torch.float32),
    ((8, 64, 256, 256), [512, 512], torch.bfloat16),
]


def host_cases(device: str, quick: bool) -> list:
    return HOST_CASES[:1] if quick else HOST_CASES[:3] if device == "cpu" else HOST_CASES


class _PythonFormula(torch.autograd.Function):
    """F.interpolate's own kernels under an autograd formula written in Python: what any Python
    autograd.Function costs on top of PyTorch's C++ formula, the floor of upsample_bilinear's host path
    (the stable ABI has no C++ autograd)."""

    @staticmethod
    def forward(ctx, x, size):
        ctx.input_size = list(x.shape)
        return torch.ops.aten.upsample_bilinear2d(x, size, False)

    @staticmethod
    def backward(ctx, grad):
        return torch.ops.aten.upsample_bilinear2d_backward(grad, list(grad.shape[2:]), ctx.input_size, False), None


def host_calls(up, device: str, shape, size, dtype) -> list[tuple[str, str, object]]:
    """[(step, path, fn)] for one host case; the tensors live as long as the closures."""
    ops, mode = torch.ops.ch06, "half_pixel"
    x = _make(shape, dtype, "nchw", device)
    xg = x.clone().requires_grad_(True)
    g = torch.randn(shape[:2] + tuple(size), device=device, dtype=dtype)
    y_op = ops.upsample_bilinear2d(xg, size, mode, None, None, "gather")
    y_fn = up.upsample_bilinear(xg, size, mode=mode)
    y_ref = F.interpolate(xg, size=size, mode="bilinear", align_corners=False)
    y_py = _PythonFormula.apply(xg, size)
    return [
        ("forward", "kernel op", lambda: ops._upsample_bilinear2d_kernel(x, size, mode, None, None)),
        ("forward", "PyTorch's kernel op", lambda: torch.ops.aten.upsample_bilinear2d(x, size, False)),
        ("forward", "operator", lambda: ops.upsample_bilinear2d(x, size, mode, None, None, "gather")),
        ("forward", "upsample_bilinear", lambda: up.upsample_bilinear(x, size, mode=mode)),
        ("forward", "F.interpolate", lambda: F.interpolate(x, size=size, mode="bilinear", align_corners=False)),
        ("backward", "kernel op", lambda: ops._upsample_bilinear2d_backward_kernel(g, list(shape[2:]), mode, "gather",
                                                                                  None, None)),
        ("backward", "PyTorch's kernel op",
         lambda: torch.ops.aten.upsample_bilinear2d_backward(g, size, list(shape), False)),
        ("backward", "operator", lambda: torch.autograd.grad(y_op, xg, g, retain_graph=True)),
        ("backward", "upsample_bilinear", lambda: torch.autograd.grad(y_fn, xg, g, retain_graph=True)),
        ("backward", "F.interpolate", lambda: torch.autograd.grad(y_ref, xg, g, retain_graph=True)),
        ("backward", "Python formula", lambda: torch.autograd.grad(y_py, xg, g, retain_graph=True)),
        ("forward + backward", "operator",
         lambda: torch.autograd.grad(ops.upsample_bilinear2d(xg, size, mode, None, None, "gather"), xg, g)),
        ("forward + backward", "upsample_bilinear",
         lambda: torch.autograd.grad(up.upsample_bilinear(xg, size, mode=mode), xg, g)),
        ("forward + backward", "F.interpolate",
         lambda: torch.autograd.grad(F.interpolate(xg, size=size, mode="bilinear", align_corners=False), xg, g)),
        ("forward + backward", "Python formula", lambda: torch.autograd.grad(_PythonFormula.apply(xg, size), xg, g)),
    ]


def host(up, device: str, min_time: float, quick: bool) -> list[dict]:
    records = []
    for shape, size, dtype in host_cases(device, quick):
        name_of_dtype = str(dtype).replace("torch.", "")
        calls = host_calls(up, device, shape, size, dtype)
        # in turns, as the sweep's cases, for the same time in all
        times = timing.bench_in_turns([fn for _, _, fn in calls], device, TURNS, min_run_time=5 * min_time / TURNS)
        for (step, path, _), t in zip(calls, times):
            records.append(timing.record(f"host {step}, {path}", t, section="host", step=step, path=path,
                                         shape=list(shape), size=size, dtype=name_of_dtype, turns=TURNS))
            print(f"host {str(shape):18s} {name_of_dtype:8s} {step:20s} {path:20s} {t.median_ms * 1e3:9.1f} us",
                  flush=True)
    return records


def _interp(case: dict):
    """F.interpolate as the case calls it (the function torch.compile compiles)."""
    size, ac = case["size"], case["mode"] == "align_corners"

    def interp(t):
        return F.interpolate(t, size=size, mode="bilinear", align_corners=ac)

    return interp


def _compile_cases(device: str, cases: list[dict]) -> None:
    """Compiles the peer of each case, so that inductor's caches on disk hold it (warm_compile). The
    choice among a kernel's launch configurations, which inductor makes by timing them at the first
    call, is not kept: the timed process makes it again, on a GPU that nothing else is using."""
    torch._inductor.config.autotune_local_cache = False
    for case in cases:
        torch._dynamo.reset()
        torch.compile(_interp(case), dynamic=False)(_make(case["shape"], DTYPES[case["dtype"]], case["layout"], device))
    timing.sync(device)


def warm_compile(device: str, cases: list[dict], workers: int) -> None:
    """torch.compile(F.interpolate) of every case, in `workers` processes at once, before anything is
    timed. The timed process then finds each case's compiled code in inductor's caches on disk
    (a cache hit is the same code, so no timing changes) instead of compiling the cases one after
    the other, which takes most of a run's time."""
    import multiprocessing

    if workers <= 1 or not cases:
        return
    parts = [cases[k::workers] for k in range(workers)]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.starmap(_compile_cases, [(device, part) for part in parts if part])


def case_calls(up, device: str, case: dict, seed: int, compile_peer: bool = False) -> tuple[dict, dict]:
    """({record name: fn} for one sweep case, its fields); the tensors live as long as the closures."""
    torch.manual_seed(seed)
    dtype, size, mode = DTYPES[case["dtype"]], case["size"], case["mode"]
    x = _make(case["shape"], dtype, case["layout"], device)
    xg = x.detach().clone().requires_grad_(True)
    g = _make(case["shape"][:2] + size, dtype, case["layout"], device)
    interp = _interp(case)
    y, y_ref = up.upsample_bilinear(xg, size, mode=mode), interp(xg)
    calls = {"forward ours": lambda: up.upsample_bilinear(x, size, mode=mode),
             "forward F.interpolate": lambda: interp(x)}
    if compile_peer:
        torch._dynamo.reset()
        compiled = torch.compile(interp, dynamic=False)
        calls["forward torch.compile"] = lambda: compiled(x)
    calls |= {"backward ours (autograd)": lambda: torch.autograd.grad(y, xg, g, retain_graph=True),
              "backward F.interpolate (autograd)": lambda: torch.autograd.grad(y_ref, xg, g, retain_graph=True),
              "step ours": lambda: torch.autograd.grad(up.upsample_bilinear(xg, size, mode=mode), xg, g),
              "step F.interpolate": lambda: torch.autograd.grad(interp(xg), xg, g)}
    return calls, dict(out_shape=list(g.shape), bytes_in_out=timing.nbytes(x, g))


TURNS = 3


def sweep(up, device: str, cases: list[dict], min_time: float, bandwidth: float, compile_peer: bool,
          checkpoint=lambda records: None, records: list[dict] | None = None) -> list[dict]:
    """records: the cases a cut run measured (--resume); their cases are not timed again."""
    records = list(records or [])
    done = {r["case"] for r in records}
    for index, case in enumerate(cases):
        if index in done:
            continue
        calls, fields = case_calls(up, device, case, index, compile_peer)
        common = dict(section="sweep", case=index, **case, **fields)
        # In turns: every call of the case is timed TURNS times, one after the other, and keeps its
        # lowest median (timing.bench_in_turns).
        best = dict(zip(calls, timing.bench_in_turns(list(calls.values()), device, TURNS, min_run_time=min_time / 2)))
        for name, t in best.items():
            records.append(timing.record(name, t, fields["bytes_in_out"], bandwidth, turns=TURNS, **common))
        mine = {r["name"]: r for r in records if r.get("case") == index}
        print(f"[{index:2d}] {case['shape']} -> {case['size']} {case['dtype']:8s} {case['layout']:13s} "
              f"{case['mode']:13s} {fields['bytes_in_out'] / 2**20:8.2f} MiB  fw {mine['forward ours']['median_ms']:.4f}"
              f" ms (F {mine['forward F.interpolate']['median_ms']:.4f})  bw "
              f"{mine['backward ours (autograd)']['median_ms']:.4f} (F "
              f"{mine['backward F.interpolate (autograd)']['median_ms']:.4f})", flush=True)
        del calls
        checkpoint(records)  # a long run that is cut short keeps what it measured
    return records


PROFILED = ("forward ours", "forward F.interpolate", "backward ours (autograd)", "backward F.interpolate (autograd)")


def profile_all(up, device: str, cases: list[dict], quick: bool, records: list[dict]) -> None:
    """The GPU's share of a call (kernels and their time, torch.profiler), once every timing is taken:
    a profiler that has run can leave the launches of the calls timed after it slower."""
    if device != "cuda":
        return
    host_rows = {(tuple(r["shape"]), tuple(r["size"]), r["dtype"], r["step"], r["path"]): r
                 for r in records if r.get("section") == "host"}
    for shape, size, dtype in host_cases(device, quick):
        for step, path, fn in host_calls(up, device, shape, size, dtype):
            row = host_rows.get((tuple(shape), tuple(size), str(dtype).replace("torch.", ""), step, path))
            if row is not None:
                row["kernels"], row["gpu_ms"] = _kernels(fn, device)
    by = {(r["case"], r["name"]): r for r in records if r.get("section") == "sweep"}
    for index, case in enumerate(cases):
        calls, _ = case_calls(up, device, case, index)
        for name in PROFILED:
            by[index, name]["kernels"], by[index, name]["gpu_ms"] = _kernels(calls[name], device)
        del calls


def describe(r: dict) -> str:
    return (f"{r['shape']} -> {r['size']}, {r['dtype']}, {'NCHW' if r['layout'] == 'nchw' else 'channels_last'}, "
            f"{r['mode']}")


def summary(doc: dict, short: bool = False) -> str:
    """The distribution of our speed-up over each peer (worst first), the floor on large cases and the
    host's share; short: the distribution only (the lesson's table)."""
    env, rows = doc["environment"], doc["records"]
    by = {(r["case"], r["name"]): r for r in rows if r.get("section") == "sweep"}
    cases = sorted({r["case"] for r in rows if r.get("section") == "sweep"})
    where = f"{env['device_name']}, torch {env['torch']}"
    article = "a" if where.startswith("CPU") else "an"
    turns = next((r["turns"] for r in rows if r.get("section") == "sweep" and "turns" in r), None)
    how = f": the lowest of {turns} medians, the contenders of a case timed in turns" if turns else ""
    out = [f"`06_upsample/sweep.py` on {article} {where}: {len(cases)} cases drawn with a fixed seed (ratios 1/8 to 8 "
           f"on each axis, 64 KiB to {env.get('max_bytes_MiB', 512)} MiB of input + output, NCHW and channels_last, "
           "float32, bfloat16, float16, "
           "half_pixel and align_corners); every time is a call as a program makes it (host included, "
           f"`coursekit.timing.bench`, median{how}), ours through `upsample_bilinear` and `torch.autograd.grad`. "
           "Speed-up = peer's time / ours (above 1: we are faster).", "",
           "| ours against | worst | 10th percentile | median | best | cases ahead |", "|---|---|---|---|---|---|"]
    worst_lines = []
    for metric, ours, peer, label in PEERS:
        ups = sorted((by[c, peer]["median_ms"] / by[c, ours]["median_ms"], c) for c in cases if (c, peer) in by)
        if not ups:
            continue
        vals = [u for u, _ in ups]
        p10 = vals[max(0, math.ceil(0.1 * len(vals)) - 1)]
        out.append(f"| {metric}: {label} | {vals[0]:.2f}x | {p10:.2f}x | {vals[len(vals) // 2]:.2f}x | "
                   f"{vals[-1]:.2f}x | {sum(v >= 1 for v in vals)} of {len(vals)} |")
        u, c = ups[0]
        worst_lines.append(f"- worst {metric} against {label}: {u:.2f}x on {describe(by[c, ours])} "
                           f"({by[c, ours]['median_ms']:.4f} ms against {by[c, peer]['median_ms']:.4f} ms)")
        u, c = ups[-1]
        worst_lines.append(f"  best: {u:.2f}x on {describe(by[c, ours])} "
                           f"({by[c, ours]['median_ms']:.4f} ms against {by[c, peer]['median_ms']:.4f} ms)")
    if short:
        return "\n".join(out) + "\n\nThe worst and best cases, the floor and the host's share: [SPEED.md](SPEED.md).\n"
    out += ["", *worst_lines]
    for metric, ours, peer in (("forward", "forward ours", "forward F.interpolate"),
                               ("backward", "backward ours (autograd)", "backward F.interpolate (autograd)")):
        behind = [c for c in cases if by[c, ours]["median_ms"] > by[c, peer]["median_ms"]]
        known = [c for c in behind if by[c, ours].get("gpu_ms") is not None and by[c, peer].get("gpu_ms") is not None]
        if known:
            host_bound = [c for c in known if by[c, ours]["gpu_ms"] <= by[c, peer]["gpu_ms"]]
            out.append(f"- {metric}, the {len(behind)} cases behind `F.interpolate`: in {len(host_bound)} our kernels "
                       f"take less GPU time than PyTorch's (torch.profiler), so the host's share decides; in "
                       f"{len(known) - len(host_bound)} our kernels take more")
    large = [c for c in cases if by[c, "forward ours"]["bytes_in_out"] >= LARGE]
    if large:
        out.append("")
        for name in ("forward ours", "backward ours (autograd)"):
            fr = sorted((by[c, name]["fraction_of_floor"], c) for c in large)
            out.append(f"- {name}, the {len(large)} cases of 64 MiB or more: {fr[0][0]:.0%} to {fr[-1][0]:.0%} of "
                       f"the copy floor (median {fr[len(fr) // 2][0]:.0%}); lowest on {describe(by[fr[0][1], name])}")
    return "\n".join(out + host_table(rows)) + "\n"


HOST_PATHS = ("kernel op", "PyTorch's kernel op", "operator", "upsample_bilinear", "F.interpolate", "Python formula")


def host_table(rows: list[dict]) -> list[str]:
    """The host section's table (lines), its columns those the records have."""
    host_rows = [r for r in rows if r.get("section") == "host"]
    if not host_rows:
        return []
    paths = [p for p in HOST_PATHS if any(r["path"] == p for r in host_rows)]
    heads = {"upsample_bilinear": "`upsample_bilinear`", "F.interpolate": "`F.interpolate`"}
    profiled = any(r.get("gpu_ms") is not None for r in host_rows)
    on_gpu = any(r.get("kernels") for r in host_rows)
    turns = next((r["turns"] for r in host_rows if "turns" in r), None)
    how = f"median: the lowest of {turns} medians, the calls of a case timed in turns" if turns else "median"
    out = ["", f"The host's share: one call of each step, host included (`bench`, {how})" + (
           "; in brackets the kernels it runs on the GPU" + (
               " and their time (torch.profiler, one call, profiled after every timing)." if profiled else
               " (torch.profiler, one call, profiled right after its timing).") if on_gpu else ".")
           + (" *PyTorch's kernel op*: `torch.ops.aten.upsample_bilinear2d` and its backward, PyTorch's own "
              "kernels called the way Python calls every custom op, through `torch.ops` (`F.interpolate` "
              "reaches the same kernel through a binding of its own)." if "PyTorch's kernel op" in paths else "")
           + " The operator's autograd is torch.library's "
           "(`register_autograd`); `upsample_bilinear` takes the eager path (`_Resize`). *Python formula*: "
           "`F.interpolate`'s own kernels under an `autograd.Function` written in Python, the floor of any "
           "autograd formula in Python (the stable ABI has no C++ autograd).", "",
           "| case | step | " + " | ".join(heads.get(p, p) for p in paths) + " |",
           "|---|---|" + "---|" * len(paths)]
    for key in dict.fromkeys((tuple(r["shape"]), tuple(r["size"]), r["dtype"]) for r in host_rows):
        for step in ("forward", "backward", "forward + backward"):
            cells = {r["path"]: r for r in host_rows
                     if (tuple(r["shape"]), tuple(r["size"]), r["dtype"]) == key and r["step"] == step}

            def cell(p):
                if p not in cells:
                    return "-"
                k, gpu = cells[p].get("kernels"), cells[p].get("gpu_ms")
                return f"{cells[p]['median_ms'] * 1e3:.1f} µs" + (
                    "" if k is None else f" ({k})" if gpu is None else f" ({k}: {gpu * 1e3:.1f} µs)")
            out.append(f"| {list(key[0])} -> {list(key[1])} {key[2]} | {step} | "
                       + " | ".join(cell(p) for p in paths) + " |")
    return out


def write_block(path: Path, text: str, cpu: bool = False) -> None:
    results.write_block(path, CPU_START if cpu else START, CPU_END if cpu else END, text)


def host_only(args) -> None:
    """The host section alone (a CPU run says what the Python side and torch.ops cost, without a GPU)."""
    out = args.out or HERE.parent / "results" / f"06_upsample_host_{args.device}.json"
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    up = load_python(HERE, "upsample")
    records = host(up, args.device, 0.02 if args.quick else 0.1, args.quick)
    profile_all(up, args.device, [], args.quick, records)
    timing.save(out, records, args.device, extra={"quick": args.quick, "script": "06_upsample/sweep.py --host-only"})
    print("\n".join(host_table(records)))
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (CPU runs only)")
    parser.add_argument("--quick", action="store_true", help="a few small cases: checks the pipeline, not the speed")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (it compiles once per case)")
    parser.add_argument("--compile-workers", type=int, default=8,
                        help="processes that compile the torch.compile peers before the timings (1: none)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--readme", action="store_true", help="only regenerate the summaries from --out")
    parser.add_argument("--host-only", action="store_true",
                        help="only the host section, into results/06_upsample_host_DEVICE.json (or --out)")
    parser.add_argument("--resume", action="store_true",
                        help="go on with a run that was cut short: keep --out's host rows and finished cases")
    args = parser.parse_args()
    if args.host_only:
        return host_only(args)
    out = args.out or HERE.parent / "results" / f"06_upsample_sweep_{'cuda' if args.readme else args.device}.json"
    if not args.readme:
        if args.device == "cpu":
            torch.set_num_threads(args.threads)
        up = load_python(HERE, "upsample")
        bandwidth = timing.copy_bandwidth(args.device, nbytes=(1 << 22) if args.quick else None)
        min_time = 0.02 if args.quick else 0.1
        max_bytes = (1 << 20) if args.quick else (512 << 20) if args.device == "cuda" else (64 << 20)
        cases = draw_cases(4 if args.quick else CASES, max_bytes=max_bytes)
        extra = {"quick": args.quick, "copy_bandwidth_GBps": bandwidth / 1e9, "script": "06_upsample/sweep.py",
                 "cases": len(cases), "max_bytes_MiB": max_bytes >> 20}
        kept = timing.load(out)["records"] if args.resume and out.is_file() else []
        first = [r for r in kept if r.get("section") == "host"] or host(up, args.device, min_time, args.quick)
        done = [r for r in kept if r.get("section") == "sweep"]
        finished = {r["case"] for r in done}  # cases measured by an earlier, cut-short run: not timed again
        extra["resumed"] = len(finished)
        if not args.no_compile:
            warm_compile(args.device, [c for k, c in enumerate(cases) if k not in finished], args.compile_workers)
        records = first + sweep(up, args.device, cases, min_time, bandwidth, compile_peer=not args.no_compile,
                                checkpoint=lambda rs: timing.save(out, first + rs, args.device, extra=extra),
                                records=done)
        timing.save(out, records, args.device, extra=extra)
        profile_all(up, args.device, cases, args.quick, records)
        timing.save(out, records, args.device, extra=extra)
        print(f"wrote {out}")
    doc = timing.load(out)
    print(summary(doc))
    if args.readme or (not args.quick and args.device == "cuda"):
        write_block(HERE / "SPEED.md", summary(doc))
        write_block(HERE / "README.md", summary(doc, short=True))
    cpu_file = HERE.parent / "results" / "06_upsample_sweep_cpu.json"
    if (args.readme and cpu_file.is_file()) or (not args.quick and args.device == "cpu" and args.out is None):
        write_block(HERE / "SPEED.md", summary(timing.load(cpu_file)), cpu=True)


if __name__ == "__main__":
    main()
