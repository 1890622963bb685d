"""The operators of chapters 05 and 06 in the modes users run custom ops in.

* CUDA graphs: captured once, replayed with new inputs copied into the captured
  tensors (torch.cuda.graph), and torch.compile(mode="reduce-overhead"), which
  captures graphs itself. A kernel launched on the legacy default stream instead of
  the current one breaks the capture (or, without capture, races; see the stream
  tests of chapters 02 and 06).
* torch.export of a small model that calls the op, then AOTInductor: the exported
  program is compiled to a shared library and run from it. The op is called through
  the dispatcher by name, so the C++-registered route (torch.ops.ch05/ch06) is the
  one that works here; a torch.autograd.Function would be traced through.

These are not graded: they check the chapters' solutions.
"""

from __future__ import annotations

import pytest
import torch

from coursekit import build, timing
from coursekit.testing import assert_bitwise

GPU = torch.cuda.is_available()


@pytest.fixture(scope="module")
def tri(build_chapter):
    _, src = build_chapter("05")
    return build.load_python(src, "trilinear_op")


@pytest.fixture(scope="module")
def up(build_chapter):
    _, src = build_chapter("06")
    return build.load_python(src, "upsample")


def _needs_cuda_build(module_name: str):
    if not GPU:
        pytest.skip("needs a CUDA GPU (none visible)")
    import sys

    ext = sys.modules[module_name]
    if build.describe(ext) != "CPU+CUDA":
        pytest.skip("the extension was built without CUDA (run ./course doctor to see why)")


def _trilinear_inputs(device, N=3000, F=40, dtype=torch.float32):
    feats = torch.randn(N, 8, F, device=device, dtype=dtype)
    points = torch.rand(N, 3, device=device, dtype=dtype) * 2 - 1
    return feats, points


# ----------------------------------------------------------------------------- CUDA graphs


def _capture_and_replay(fn, make_inputs):
    """Capture fn(*static) once; replay after copying fresh inputs in; compare with eager, bit for bit."""
    static = [t.detach().clone().requires_grad_(t.requires_grad) for t in make_inputs()]
    graph, captured = timing.capture_graph(lambda: fn(*static), warmup=2)
    for _ in range(3):
        fresh = make_inputs()
        with torch.no_grad():
            for s, f in zip(static, fresh):
                s.copy_(f)
        graph.replay()
        expected = fn(*[f.detach().clone().requires_grad_(f.requires_grad) for f in fresh])
        torch.cuda.synchronize()
        for got, want in zip(captured, expected):
            assert_bitwise(got, want)


@pytest.mark.cuda
def test_trilinear_forward_and_backward_in_a_cuda_graph(tri):
    _needs_cuda_build("ch05_trilinear")

    def fn(feats, points):
        out = tri.trilinear(feats, points)
        grads = torch.autograd.grad(out, (feats, points), torch.ones_like(out))
        return (out, *grads)

    def make():
        feats, points = _trilinear_inputs("cuda")
        return feats.requires_grad_(), points.requires_grad_()

    _capture_and_replay(fn, make)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "tf_legacy"])
def test_upsample_forward_and_backward_in_a_cuda_graph(up, mode):
    _needs_cuda_build("ch06_upsample")

    def fn(x):
        out = up.upsample_bilinear(x, scale_factor=1.5, mode=mode)
        (grad,) = torch.autograd.grad(out, (x,), torch.ones_like(out))
        return out, grad

    _capture_and_replay(fn, lambda: (torch.randn(2, 5, 33, 47, device="cuda").requires_grad_(),))


@pytest.mark.cuda
def test_reduce_overhead_compile_replays_with_new_inputs(tri, up):
    """torch.compile(mode="reduce-overhead") records CUDA graphs of both ops and replays them."""
    _needs_cuda_build("ch05_trilinear")
    _needs_cuda_build("ch06_upsample")

    def model(feats, points, image):
        # no reductions of our own around the ops: inductor may sum in another order than eager
        return tri.trilinear(feats, points) * 2.0, up.upsample_bilinear(image, scale_factor=2.0) * 2.0

    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):  # the first calls warm up and record; later ones replay
        feats, points = _trilinear_inputs("cuda")
        image = torch.randn(2, 3, 20, 30, device="cuda")
        got = [t.clone() for t in compiled(feats, points, image)]  # replays reuse the output memory
        want = model(feats, points, image)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- export + AOTInductor


class _TrilinearModel(torch.nn.Module):
    def __init__(self, tri):
        super().__init__()
        self.tri = tri

    def forward(self, feats, points):
        return torch.relu(self.tri.trilinear(feats, points)) * 2.0


class _UpsampleModel(torch.nn.Module):
    def __init__(self, up):
        super().__init__()
        self.up = up

    def forward(self, x):
        return self.up.upsample_bilinear(x * 0.5, scale_factor=2.0, mode="half_pixel") + 1.0


def _aoti_compiler() -> str | None:
    """The C++ compiler for AOTInductor's model library: like every extension, that library must share
    the libstdc++ torch loaded (chapter 01, "import torch first"). Inductor takes $CXX; a compiler
    with only a static libstdc++ would make the package crash as it loads, so take another one."""
    import shutil

    from coursekit import toolkit

    configured = torch._inductor.config.cpp.cxx[1]
    for cxx in (configured, "/usr/bin/g++", "/usr/bin/c++", "g++", "c++", "clang++"):
        path = shutil.which(cxx)
        if path and not toolkit.static_libstdcxx(path):
            return path
    return None


def _export_and_run(model, args, tmp_path):
    """torch.export the model, find our op in the graph, compile it with AOTInductor, run the package."""
    program = torch.export.export(model, args)
    targets = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    cxx = _aoti_compiler()
    if cxx is None:
        pytest.skip("every C++ compiler here has only a static libstdc++; AOTInductor's library would crash on load")
    with torch._inductor.config.patch({"cpp.cxx": (None, cxx)}):
        package = torch._inductor.aoti_compile_and_package(program, package_path=str(tmp_path / "model.pt2"))
    loaded = torch._inductor.aoti_load_package(package)
    return targets, loaded(*args)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_trilinear_exports_and_runs_under_aotinductor(tri, device, tmp_path):
    if device == "cuda":
        _needs_cuda_build("ch05_trilinear")
    model = _TrilinearModel(tri)
    args = _trilinear_inputs(device, N=500, F=24)
    targets, out = _export_and_run(model, args, tmp_path)
    assert any("ch05.trilinear" in t for t in targets), f"torch.ops.ch05.trilinear is not in the exported graph: {targets}"
    torch.testing.assert_close(out, model(*args), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_upsample_exports_and_runs_under_aotinductor(up, device, tmp_path):
    if device == "cuda":
        _needs_cuda_build("ch06_upsample")
    model = _UpsampleModel(up)
    args = (torch.randn(2, 3, 17, 23, device=device),)
    targets, out = _export_and_run(model, args, tmp_path)
    assert any("ch06." in t for t in targets), f"no torch.ops.ch06 op in the exported graph: {targets}"
    torch.testing.assert_close(out, model(*args), rtol=1e-6, atol=1e-6)
