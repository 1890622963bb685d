"""Forward policies printed 3 (scalar, today), 0, 1, 2; backward 0 (today), 1, 2.
A/B of chapter 05's trilinear thread mappings (kernels.cu), one process, GPU time (graph replays)."""
import json, os, sys, time
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from coursekit import timing
from torch.utils.cpp_extension import load

HERE = Path(__file__).parent
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
ext = load("ab_tri", [str(HERE / "kernels.cu")], extra_cuda_cflags=["-O3", "--use_fast_math"] if False else ["-O3"],
           verbose=False)
if "--build-only" in sys.argv:
    print("built"); sys.exit(0)

def unit(x): return (x.double() + 1) * 0.5
def reference(feats, points):
    u, v, w = unit(points).unbind(1)
    ws = []
    for k in range(8):
        a = u if k >> 2 & 1 else 1 - u; b = v if k >> 1 & 1 else 1 - v; c = w if k & 1 else 1 - w
        ws.append(a * b * c)
    return (torch.stack(ws, 1)[:, :, None] * feats.double()).sum(1)

def per_corner(feats, points):
    u, v, w = ((points + 1) * 0.5).unbind(1)
    out = None
    for k in range(8):
        a = u if k >> 2 & 1 else 1 - u; b = v if k >> 1 & 1 else 1 - v; c = w if k & 1 else 1 - w
        t = (a * b * c)[:, None] * feats[:, k]
        out = t if out is None else out + t
    return out

compiled = torch.compile(per_corner, dynamic=False)
bw = timing.copy_bandwidth("cuda")
MRT = 0.25
COMPILE = {(1 << 20, 32), (1 << 18, 64), (1 << 18, 32), (65536, 256)}
cases = [(1 << 20, 32, torch.float32), (1 << 18, 32, torch.float32), (1 << 18, 64, torch.bfloat16),
         (1 << 18, 32, torch.bfloat16), (65536, 256, torch.float32), (65536, 256, torch.bfloat16),
         (1 << 18, 64, torch.float16), (1 << 18, 16, torch.float32), (1 << 18, 32, torch.float64)]
records = []
for N, F, dt in cases:
    g = torch.Generator("cuda").manual_seed(0)
    feats = torch.randn(N, 8, F, device="cuda", dtype=dt, generator=g)
    points = (torch.rand(N, 3, device="cuda", generator=g) * 2 - 1).to(dt)
    grad_out = torch.randn(N, F, device="cuda", dtype=dt, generator=g)
    want = reference(feats, points)
    fb = timing.nbytes(feats, points) + N * F * feats.element_size()
    tol = 1e-5 if dt in (torch.float32, torch.float64) else 2e-2
    row = dict(N=N, F=F, dtype=str(dt).split(".")[1])
    for pol in (3, 0, 1, 2):
        out = ext.forward(feats, points, pol)
        err = ((out.double() - want).abs().max() / want.abs().max()).item()
        assert err < tol, (pol, N, F, dt, err)
        t = timing.bench_graph(lambda: ext.forward(feats, points, pol), min_run_time=MRT)
        row[f"fwd{pol}"] = t.median_ms
    try:
        if (N, F) not in COMPILE or dt == torch.float64:
            raise RuntimeError("not compiled for this case")
        t = timing.bench_graph(lambda: compiled(feats, points), min_run_time=MRT)
        row["fwd_compiled"] = t.median_ms
    except Exception as e:
        row["fwd_compiled_error"] = repr(e)[:200]
    row["fwd_floor"] = timing.floor_ms(fb, bw)
    # backward: the expected values from autograd on the float64 reference
    f64 = feats.double().requires_grad_(); p64 = points.double().requires_grad_()
    ref_out = reference(f64, p64)
    want_gf, want_gp = torch.autograd.grad(ref_out, (f64, p64), grad_out.double())
    b = lambda *t: sum(x.numel() * feats.element_size() for x in t)
    bytes_ = {"both": b(grad_out, feats, points, feats, points), "feats": b(grad_out, points, feats),
              "points": b(grad_out, feats, points, points)}
    for which, (nf, np_) in {"both": (True, True), "feats": (True, False), "points": (False, True)}.items():
        row[f"bwd_{which}_floor"] = timing.floor_ms(bytes_[which], bw)
        for pol in (0, 1, 2):
            gf, gp = ext.backward(grad_out, feats, points, nf, np_, pol)
            if nf:
                e = ((gf.double() - want_gf).abs().max() / want_gf.abs().max()).item(); assert e < tol, (which, pol, e)
            if np_:
                e = ((gp.double() - want_gp).abs().max() / want_gp.abs().max()).item()
                assert e < (tol if dt != torch.float32 else 1e-4), (which, pol, N, F, dt, e)
            t = timing.bench_graph(lambda: ext.backward(grad_out, feats, points, nf, np_, pol), min_run_time=MRT)
            row[f"bwd_{which}{pol}"] = t.median_ms
    records.append(row)
    fl = row["fwd_floor"]
    print(f"{N:>8} {F:>4} {row['dtype']:>9} fwd " + " ".join(f"{row[f'fwd{p}']*1e3:7.1f}us({fl/row[f'fwd{p}']:.0%})" for p in (3, 0, 1, 2))
          + f" compiled {row.get('fwd_compiled', float('nan'))*1e3:7.1f}us({fl/row.get('fwd_compiled', float('nan')):.0%})", flush=True)
    for which in ("both", "feats", "points"):
        fl = row[f"bwd_{which}_floor"]
        print(f"{'':>24} bwd {which:>6} " + " ".join(f"{row[f'bwd_{which}{p}']*1e3:7.1f}us({fl/row[f'bwd_{which}{p}']:.0%})" for p in range(3)), flush=True)
env = timing.environment("cuda")
out = Path(os.environ.get("OUT", "/tmp")) / "ab_tri.json"
out.write_text(json.dumps({"environment": env, "copy_bandwidth_GBps": bw / 1e9, "records": records}, indent=1))
print("wrote", out)
