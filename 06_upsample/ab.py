"""A/B of chapter 06's CUDA kernels against another copy of the chapter: same bits? same speed?

    git worktree add /tmp/old HEAD~1                          # (or any copy of the repository)
    python 06_upsample/ab.py run /tmp/old/06_upsample a.pt    # in one process per copy: both
    python 06_upsample/ab.py run 06_upsample b.pt             # register torch.ops.ch06
    python 06_upsample/ab.py compare a.pt b.pt [--json out.json]
    python 06_upsample/ab.py times b.pt b_times.json          # the times alone, to keep or send back
    python 06_upsample/ab.py compare old.json:b b_times.json  # times against a side of an earlier compare

`run` builds the chapter found at the given folder, calls the public ops (forward, and the
gather and scatter backward) on a fixed set of cases that reaches every automatic row of the
dispatch table (every layout, ratio class, dtype and mode), saves the outputs, and times the
benchmark's headline cases, four of sweep.py's (widths off a pack boundary) and sweep.py's cases of
64 MiB or more (in their own modes) as CUDA-graph replays (coursekit.timing.bench_graph). `compare`
says, case by case, whether the gather's and the forward's outputs are bit for bit the same
(the scatter's low bits vary from run to run by design: it is compared with a tolerance) and
the ratio of the times.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from coursekit import timing  # noqa: E402
from coursekit.build import load_python  # noqa: E402

MODES = ("half_pixel", "align_corners", "tf_legacy")
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
# (input shape, output size): exact x2 / x4 / x0.5, other ratios, RGB, odd and packed channel counts,
# widths of 4 and 2 mod 8 (rows that start off a pack boundary)
BITS = [((2, 16, 24, 32), (48, 64)), ((2, 8, 16, 16), (64, 64)), ((2, 16, 32, 32), (16, 16)),
        ((2, 16, 24, 32), (36, 48)), ((1, 3, 24, 32), (48, 64)), ((2, 5, 13, 17), (29, 23)),
        ((2, 16, 24, 32), (37, 64)), ((1, 64, 17, 18), (34, 36)), ((1, 8, 12, 16), (18, 64)),
        ((1, 3, 1, 8), (2, 16)), ((2, 7, 9, 11), (4, 5)), ((2, 3, 11, 13), (21, 26))]
TIMED = [((8, 64, 256, 256), (512, 512), torch.float32, False), ((16, 256, 64, 64), (256, 256), torch.float32, False),
         ((1, 3, 1080, 1920), (2160, 3840), torch.float32, False), ((8, 64, 256, 256), (512, 512), torch.bfloat16, False),
         ((8, 64, 256, 256), (128, 128), torch.float32, False), ((8, 64, 256, 256), (384, 384), torch.float32, False),
         ((8, 64, 256, 256), (512, 512), torch.float32, True), ((8, 64, 256, 256), (512, 512), torch.bfloat16, True),
         ((1, 3, 1080, 1920), (2160, 3840), torch.float32, True),
         # widths that are not a multiple of a pack (rows start off a 16-byte boundary), from sweep.py's cases
         ((1, 2, 2477, 2477), (4196, 4196), torch.float16, False), ((8, 4, 2627, 2626), (1202, 1202), torch.bfloat16, False),
         ((4, 2, 1452, 2582), (726, 1034), torch.float32, False), ((8, 2, 848, 849), (2544, 2547), torch.float32, True)]


def timed_cases() -> list[tuple]:
    """TIMED in half_pixel, then sweep.py's cases of 64 MiB or more (profile_large.py's), each in its mode."""
    from profile_large import large_cases

    cases = [(*case, "half_pixel") for case in TIMED]
    for _, case in large_cases():
        item = (tuple(case["shape"]), tuple(case["size"]), getattr(torch, case["dtype"]),
                case["layout"] == "channels_last", case["mode"])
        if item not in cases:
            cases.append(item)
    return cases


def run(chapter: Path, out: Path) -> None:
    load_python(chapter, "upsample")
    fw, bw = torch.ops.ch06._upsample_bilinear2d_kernel, torch.ops.ch06._upsample_bilinear2d_backward_kernel
    gen = torch.Generator(device="cuda").manual_seed(0)
    outputs = {}
    for shape, size in BITS:
        for dtype in DTYPES:
            for cl in (False, True):
                fmt = torch.channels_last if cl else torch.contiguous_format
                x = torch.randn(shape, device="cuda", generator=gen).to(dtype).contiguous(memory_format=fmt)
                g = torch.randn(shape[:2] + size, device="cuda", generator=gen).to(dtype).contiguous(memory_format=fmt)
                for mode in MODES:
                    key = f"{list(shape)}->{list(size)} {str(dtype)[6:]} {'CL' if cl else 'NCHW'} {mode}"
                    outputs[key + " forward"] = fw(x, list(size), mode).cpu()
                    outputs[key + " gather"] = bw(g, list(shape[2:]), mode, "gather").cpu()
                    outputs[key + " scatter"] = bw(g, list(shape[2:]), mode, "scatter").cpu()
    times = {}
    for shape, size, dtype, cl, mode in timed_cases():
        fmt = torch.channels_last if cl else torch.contiguous_format
        x = torch.randn(shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        g = torch.randn(shape[:2] + size, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        key = f"{list(shape)}->{list(size)} {str(dtype)[6:]} {'CL' if cl else 'NCHW'}" + (
            "" if mode == "half_pixel" else f" {mode}")
        times[key + " forward"] = timing.bench_graph(lambda: fw(x, list(size), mode)).median_ms
        times[key + " gather"] = timing.bench_graph(lambda: bw(g, list(shape[2:]), mode, "gather")).median_ms
        del x, g
    torch.save({"outputs": outputs, "times": times, "device": torch.cuda.get_device_name()}, out)
    print(f"wrote {out}: {len(outputs)} outputs, {len(times)} timings")


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits as integers (NaN == NaN when the bits are the same)."""
    ints = {8: torch.int64, 4: torch.int32, 2: torch.int16}[t.element_size()]
    return t.contiguous().view(ints)


def load(spec: str) -> dict:
    """A run to compare: a `run` file (.pt: outputs and times), its times alone (.json written by
    `times`), or one side of an earlier comparison (`compare.json:a` or `compare.json:b`), whose
    outputs are gone: then only the times are compared."""
    path, _, side = spec.partition(":") if spec.endswith((":a", ":b")) else (spec, "", "")
    if path.endswith(".pt"):
        return torch.load(path)
    doc = json.loads(Path(path).read_text())
    if side:
        return {"device": doc["device"], "outputs": {}, "times": {r["case"]: r[f"{side}_ms"] for r in doc["times"]}}
    if not isinstance(doc["times"], dict):
        sys.exit(f"{path} is a comparison: name its side, {path}:a or {path}:b")
    return {"device": doc["device"], "outputs": {}, "times": doc["times"]}


def times(run_path: Path, json_out: Path) -> int:
    """The device and times of a `run` file, as a small JSON file (the outputs left out)."""
    doc = torch.load(run_path)
    json_out.write_text(json.dumps({"device": doc["device"], "times": doc["times"]}, indent=1) + "\n")
    return 0


def compare(a_spec: str, b_spec: str, json_out: Path | None) -> int:
    a, b = load(a_spec), load(b_spec)
    if a["device"] != b["device"]:
        print(f"note: run on different devices: {a['device']} and {b['device']}")
    both = bool(a["outputs"]) and bool(b["outputs"])
    if not both:
        print("outputs: not compared (one side has its times only)")
    differ, close = [], 0
    for key, x in a["outputs"].items() if both else ():
        y = b["outputs"][key]
        if key.endswith("scatter"):
            ok = torch.allclose(x.double(), y.double(), rtol=1e-2, atol=1e-2, equal_nan=True)
            close += ok
            if not ok:
                differ.append(key)
        elif not torch.equal(bits(x), bits(y)):
            differ.append(key)
    if both:
        print(f"outputs: {len(a['outputs']) - len(differ)} of {len(a['outputs'])} the same "
              f"(forward and gather bit for bit, scatter within rounding)")
    for key in differ:
        print(f"  DIFFER {key}")
    rows = []
    for key, t in a["times"].items():
        if key not in b["times"]:
            continue
        u = b["times"][key]
        rows.append({"case": key, "a_ms": t, "b_ms": u, "b_over_a": u / t})
        print(f"  {key:>48}  {t:.4f} -> {u:.4f} ms  ({u / t:.3f}x)")
    if json_out:
        json_out.write_text(json.dumps({"device": a["device"], "a": a_spec, "b": b_spec, "differ": differ,
                                        "times": rows}, indent=1) + "\n")
    return 1 if differ else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("chapter", type=Path)
    r.add_argument("out", type=Path)
    t = sub.add_parser("times")
    t.add_argument("run", type=Path)
    t.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", help="a.pt, a_times.json, or compare.json:a / compare.json:b (see load)")
    c.add_argument("b")
    c.add_argument("--json", type=Path)
    args = p.parse_args()
    if args.cmd == "run":
        run(args.chapter.resolve(), args.out)
        return 0
    if args.cmd == "times":
        return times(args.run, args.out)
    return compare(args.a, args.b, args.json)


if __name__ == "__main__":
    sys.exit(main())
