"""Chapter 05: autograd.Function, torch.library operators, fake quantisation with an STE, FeatureGrid."""

from __future__ import annotations

import itertools
import json
import math
import re

import pytest
import torch
import torch.nn.functional as Fn
from torch._subclasses.fake_tensor import FakeTensorMode

from coursekit import ROOT, build
from coursekit.testing import (assert_bitwise, assert_close, assert_finite, assert_mask, assert_property, assert_rounded, expect_error,
                               mismatch, poisoned_empty)

CHAPTER = "05"

# torch.compile backends. On the CPU, inductor generates and compiles C++ for
# every graph (about 12 s per test on 2 cores), so CPU tests use aot_eager: it
# runs the same Dynamo capture and AOTAutograd tracing (the parts that need our
# fake impl and autograd registration) and then executes the traced graph
# eagerly. On a GPU the tests use the default backend, inductor.
BACKEND = {"cpu": "aot_eager", "cuda": "inductor"}

GPU = torch.cuda.is_available()
# Fake CUDA tensors need no GPU, only a torch built with CUDA.
FAKE_DEVICES = ["cpu", "cuda"] if torch.version.cuda else ["cpu"]


# ---------------------------------------------------------------------------
# Fixtures: the chapter's Python files, loaded from the folder under test.


@pytest.fixture(scope="module")
def fn(ext, chapter_source):
    return build.load_python(chapter_source, "trilinear_function")


@pytest.fixture(scope="module")
def op(ext, chapter_source):
    return build.load_python(chapter_source, "trilinear_op")


@pytest.fixture(scope="module")
def ste(ext, chapter_source):
    return build.load_python(chapter_source, "ste")


@pytest.fixture(scope="module")
def grid_module(op, chapter_source):
    return build.load_python(chapter_source, "module")


# The plain-PyTorch formula and its float64 autograd gradients, from the course's
# own 05_autograd/reference.py (not from the folder under test, which a learner edits).
REFERENCE = build.load_python(ROOT / "05_autograd", "reference")

WHICH = ["feats", "points", "both"]  # which inputs require a gradient


def inputs(N, F, device="cpu", dtype=torch.float32, which="both", scale=1.0):
    """feats (N, 8, F) with values that do not round exactly in low precision, points (N, 3) in [-1, 1]."""
    feats = (torch.randn(N, 8, F, dtype=torch.float64) * scale).to(device=device, dtype=dtype)
    points = (torch.rand(N, 3, dtype=torch.float64) * 2 - 1).to(device=device, dtype=dtype)
    return feats.requires_grad_(which in ("feats", "both")), points.requires_grad_(which in ("points", "both"))


def assert_f64(out, ref, what="output", rtol=1e-12):
    """float64 results against a float64 reference, element by element: |out - ref| <= rtol * max(|ref|, m / 64),
    m = max |ref| (elements that are small because terms cancel get the allowance of a larger one)."""
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    assert out.dtype == torch.float64, f"{what}: dtype {out.dtype}, expected torch.float64"
    got, ref = out.detach().cpu(), ref.detach().double().cpu()
    assert_finite(got, what)
    if ref.numel() == 0:
        return
    scale = ref.abs().clamp(min=max(ref.abs().max().item() / 64, 1e-300))
    if ((got - ref).abs() > rtol * scale).any():
        raise AssertionError(mismatch(what, got, ref, scale, torch.float64, f"are off by more than {rtol:g} (relative)",
                                      allowed=rtol * scale))


def check_result(out, ref64, dtype, what):
    """The precision each dtype allows: float64 to 1e-12 per element, float16/bfloat16 to 1 ulp per element
    (arithmetic in float, rounded once), float32 by relative norm (float arithmetic against float64)."""
    assert out.dtype == dtype, f"{what}: dtype {out.dtype}, expected {dtype}"
    if dtype == torch.float64:
        assert_f64(out, ref64, what)
    elif dtype == torch.float32:
        assert_close(out, ref64.to(dtype), dtype, what, tol=2e-6)
    else:
        assert_rounded(out, ref64, ulps=1, what=what)


def reference_out(feats, points):
    return REFERENCE.trilinear(feats.detach().double().cpu(), points.detach().double().cpu())


def check_gradients(trilinear, device, dtype, which, N=40, F=67):
    """Forward and backward of `trilinear` against the float64 reference, for the given need-grad flags."""
    feats, points = inputs(N, F, device, dtype, which)
    with poisoned_empty():
        out = trilinear(feats, points)
        grad_out = torch.randn(N, F, dtype=torch.float64).to(device=device, dtype=dtype)
        out.backward(grad_out)
    check_result(out, reference_out(feats, points), dtype, "out")
    ref_feats, ref_points = REFERENCE.trilinear_grads(grad_out, feats, points)
    for name, t, ref in (("feats", feats, ref_feats), ("points", points, ref_points)):
        if t.requires_grad:
            assert t.grad is not None, (
                f"{name} requires a gradient ({which} do) and got none: backward returned None in its place "
                f"(ctx.needs_input_grad says which gradients autograd needs; compute each one it needs)")
            check_result(t.grad, ref, dtype, f"{name}.grad")
        else:
            assert t.grad is None, f"{name} requires no gradient ({which} do) and got one"


def gradcheck_route(trilinear, device):
    for which in WHICH:
        feats, points = inputs(5, 4, device, torch.float64, which)
        assert torch.autograd.gradcheck(trilinear, (feats, points)), f"gradcheck failed ({which} need a gradient)"


def saved_for_backward(trilinear, feats, points):
    """The tensors autograd keeps for backward when calling trilinear(feats, points)."""
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (saved.append(t), t)[1], lambda t: t):
        out = trilinear(feats, points)
    return out, saved


def check_saved(trilinear, which):
    feats, points = inputs(6, 5, which=which)
    out, saved = saved_for_backward(trilinear, feats, points)
    names = ["feats" if t is feats else "points" if t is points else f"another tensor of shape {tuple(t.shape)}"
             for t in saved]
    expected = ["feats", "points"] if points.requires_grad else ["points"]
    assert names == expected, (
        f"with {which} requiring a gradient, autograd keeps for backward: got {names or 'nothing'}, expected {expected} "
        f"(in this order, as backward unpacks them; the points always: the weights depend on them; feats only for "
        f"the points' gradient; never the output)")


class Spy:
    """Stands in for a backward kernel and records which gradients it was asked for."""

    def __init__(self, target):
        self.target, self.calls = target, []

    def __call__(self, grad_out, feats, points, need_feats, need_points):
        self.calls.append((bool(need_feats), bool(need_points)))
        return self.target(grad_out, feats, points, need_feats, need_points)


class SpyExt:
    def __init__(self, ext):
        self.forward, self.backward = ext.forward, Spy(ext.backward)


def grad_out_layouts(N, F, device, dtype):
    """grad_out as autograd may hand it over: expanded (the gradient of .sum()), transposed, an offset slice."""
    g = torch.randn(N, F, dtype=torch.float64).to(device=device, dtype=dtype)
    return {
        "expanded": torch.tensor(0.75, dtype=dtype, device=device).expand(N, F),
        "expanded row": g[0].expand(N, F),
        "transposed": g.t().contiguous().t(),
        "offset slice": torch.cat([g, g], 1)[:, F:],
        "every other row": torch.stack([g, g], 1).reshape(2 * N, F)[::2],
    }


def check_grad_out_layouts(trilinear, device):
    N, F = 9, 7
    for name, g in grad_out_layouts(N, F, device, torch.float64).items():
        feats, points = inputs(N, F, device, torch.float64)
        with poisoned_empty():
            trilinear(feats, points).backward(g)
        ref_feats, ref_points = REFERENCE.trilinear_grads(g, feats, points)
        assert_f64(feats.grad, ref_feats, f"feats.grad with grad_out {name}")
        assert_f64(points.grad, ref_points, f"points.grad with grad_out {name}")


# (loss, the input the first derivative is taken in). In feats only with the square loss: there the
# gradient depends on feats; with the other two it is a constant, and its derivative truly zero.
SECOND_DERIVATIVES = [("square", "points"), ("sum", "points"), ("penalty", "points"), ("square", "feats"),
                      ("penalty", "points alone")]


def second_derivative(trilinear, loss, wrt="points"):
    """A second derivative through `trilinear`, three ways: must raise, never answer silently.
    wrt="feats": only feats requires a gradient, and the first derivative is taken in feats;
    wrt="points alone": only the points require one (feats is then not even saved)."""
    which = {"points": "both", "feats": "feats", "points alone": "points"}[wrt]
    feats, points = inputs(4, 3, dtype=torch.float64, which=which)
    out = trilinear(feats, points)
    L = (out**2).sum() if loss == "square" else out.sum()
    (grad,) = torch.autograd.grad(L, feats if wrt == "feats" else points, create_graph=True)
    if loss == "penalty":  # a gradient penalty: the loss is linear in out, so grad_out is a constant
        (L + grad.square().sum()).backward()
    else:
        grad.sum().backward()


# ---------------------------------------------------------------------------
# Route 1: torch.autograd.Function around the pybind11 kernels.


@pytest.mark.exercise("function-forward")
def test_function_forward(fn, device, dtype):
    feats, points = inputs(30, 45, device, dtype)
    with poisoned_empty():
        out = fn.trilinear(feats, points)
    check_result(out, reference_out(feats, points), dtype, "out")
    assert out.grad_fn is not None, "the output has no grad_fn: call the kernel inside forward and return its result"


@pytest.mark.exercise("function-forward")
@pytest.mark.parametrize("which", WHICH)
def test_function_saves_only_what_backward_needs(fn, which):
    check_saved(fn.trilinear, which)


def check_output_not_kept(trilinear):
    """Nothing on ctx holds the output: ctx.out = out makes a cycle (out -> grad_fn -> ctx -> out)
    that only the garbage collector breaks, so every output (on a GPU, every activation) outlives
    its last use. save_for_backward(out) is safe: autograd stores an output without that cycle."""
    import gc
    import weakref

    feats, points = inputs(6, 5, which="both")
    gc.collect()
    gc.disable()
    try:
        out = trilinear(feats, points)
        alive = weakref.ref(out)
        del out
        assert alive() is None, ("the output outlives its last reference (del out): something on ctx holds it, "
                                 "a reference cycle that only the garbage collector frees; keep tensors for "
                                 "backward with ctx.save_for_backward, and only what backward needs")
    finally:
        gc.enable()


def check_backward_returns_none(trilinear, which):
    """backward returns None, not a tensor of zeros, for an input that needs no gradient (autograd
    would throw the tensor away: an allocation and a fill per step for nothing)."""
    feats, points = inputs(6, 5, which=which)
    out = trilinear(feats, points)
    with torch.no_grad():  # as autograd calls it (create_graph=False)
        grads = out.grad_fn.apply(torch.ones_like(out))
    grads = grads if isinstance(grads, tuple) else (grads,)
    for name, t, g in zip(("feats", "points"), (feats, points), grads):
        if not t.requires_grad:
            assert g is None, (f"with only {which} requiring a gradient, backward returns "
                               f"{type(g).__name__} {tuple(g.shape) if isinstance(g, torch.Tensor) else ''} for {name}: "
                               "return None for an input that needs no gradient (ctx.needs_input_grad)")
    for g in grads[2:]:
        assert g is None, "backward returns one value per input of forward, None for the non-tensor ones"


@pytest.mark.exercise("function-forward")
def test_function_keeps_no_output(fn):
    check_output_not_kept(fn.trilinear)


@pytest.mark.exercise("function-backward")
@pytest.mark.parametrize("which", ["feats", "points"])
def test_function_backward_returns_none(fn, which):
    check_backward_returns_none(fn.trilinear, which)


@pytest.mark.exercise("function-backward")
@pytest.mark.parametrize("which", WHICH)
def test_function_gradients(fn, device, dtype, which):
    check_gradients(fn.trilinear, device, dtype, which)


def check_empty_gradients(trilinear, device):
    """N = 0 or F = 0: inputs that require a gradient get one, of their own (empty) shape."""
    for N, F in ((0, 5), (4, 0)):
        feats, points = inputs(N, F, device=device)
        trilinear(feats, points).sum().backward()
        for name, t in (("feats", feats), ("points", points)):
            assert t.grad is not None and t.grad.shape == t.shape, (
                f"N={N}, F={F}: {name}.grad is {None if t.grad is None else tuple(t.grad.shape)}, expected a tensor "
                f"of shape {tuple(t.shape)} (an empty gradient is still a gradient)")
            assert (t.grad == 0).all(), f"N={N}, F={F}: {name}.grad is not all zero"


@pytest.mark.exercise("function-backward")
def test_function_empty_gradients(fn, device):
    check_empty_gradients(fn.trilinear, device)


@pytest.mark.exercise("function-backward")
def test_function_gradcheck(fn, device):
    gradcheck_route(fn.trilinear, device)


@pytest.mark.exercise("function-backward")
@pytest.mark.parametrize("which", WHICH)
def test_function_needs_input_grad(fn, monkeypatch, which):
    spy = SpyExt(fn.ext)
    monkeypatch.setattr(fn, "ext", spy)
    feats, points = inputs(7, 5, which=which)
    fn.trilinear(feats, points).sum().backward()
    assert spy.backward.calls, "backward never called ext.backward: the gradients must come from the kernel"
    assert spy.backward.calls == [(feats.requires_grad, points.requires_grad)], \
        "backward must ask the kernel only for the gradients autograd needs (ctx.needs_input_grad)"


@pytest.mark.exercise("function-backward")
def test_function_grad_out_layouts(fn, device):
    check_grad_out_layouts(fn.trilinear, device)


def check_refuses_double_backward(trilinear, loss, wrt):
    what = f"a second derivative in {wrt} with loss {loss}"
    try:
        with expect_error("double backward", RuntimeError, what=what):
            second_derivative(trilinear, loss, wrt)
    except AssertionError as e:
        if "does not require grad and does not have a grad_fn" not in str(e):
            raise
        raise AssertionError(
            f"{what}: the first derivative, taken with create_graph=True, came back with no graph (torch then says "
            "\"element 0 of tensors does not require grad\"), so the second one silently cannot exist. The backward "
            "ran where autograd cannot see it while grad mode was on. The autograd.Function must refuse instead "
            "(raise RuntimeError with \"double backward\" whenever torch.is_grad_enabled(), whatever grad_out is); "
            "the op's formula must call the backward operator, not ext.backward, whose own formula refuses") from None


@pytest.mark.exercise("function-backward")
@pytest.mark.parametrize("loss, wrt", SECOND_DERIVATIVES)
def test_function_refuses_double_backward(fn, loss, wrt):
    check_refuses_double_backward(fn.trilinear, loss, wrt)


def test_function_route_breaks_torch_compile(fn):
    # Dynamo cannot trace into a pybind11 function: with fullgraph=True that is an error.
    feats, points = inputs(4, 3)
    torch._dynamo.reset()
    compiled = torch.compile(lambda f, p: fn.trilinear(f, p).sum(), fullgraph=True, backend="eager")
    with pytest.raises(torch._dynamo.exc.Unsupported, match="pybind|C/C\\+\\+"):
        compiled(feats, points)


# ---------------------------------------------------------------------------
# Route 2, C++: the schemas and the kernels registered for them.


def parse_schema(op):
    """(name, [(type, name, default or None)], [return types], keyword-only?) from the schema's text."""
    text = str(op._schema)
    head, returns = text.rsplit(") -> ", 1)
    name, args = head.split("(", 1)
    parsed, kwarg_only = [], False
    for arg in [a.strip() for a in args.split(",") if a.strip()]:
        if arg == "*":
            kwarg_only = True
            continue
        typ, _, rest = arg.rpartition(" ")
        argname, _, default = rest.partition("=")
        parsed.append((typ, argname, default or None))
    rets = [r.strip() for r in returns.strip("()").split(",")]
    return text, parsed, rets, kwarg_only


@pytest.mark.exercise("op-register")
def test_op_schemas(ext):
    for name in ("trilinear", "trilinear_backward"):
        assert hasattr(torch.ops.ch05, name), f"no operator ch05::{name}: define it in TORCH_LIBRARY(ch05, m)"
    expected = {
        "trilinear": ([("Tensor", "feats"), ("Tensor", "points")], ["Tensor"]),
        "trilinear_backward": ([("Tensor", "grad_out"), ("Tensor?", "feats"), ("Tensor", "points"),
                                ("bool", "need_feats"), ("bool", "need_points")], ["Tensor", "Tensor"]),
    }
    for name, (args, rets) in expected.items():
        text, parsed, got_rets, kwarg_only = parse_schema(getattr(torch.ops.ch05, name).default)
        assert "(" not in "".join(t for t, _, _ in parsed) + "".join(got_rets), (
            f"{text}: an alias annotation, (a) or (a!), says the op returns a view of an input or writes to it; "
            f"these ops are functional")
        assert [(t, n) for t, n, _ in parsed] == args, f"{text}: expected the arguments (type, name) {args}"
        assert [r.split()[0] for r in got_rets] == rets, f"{text}: expected the returns {rets} (names are free)"
        assert not kwarg_only and all(d is None for _, _, d in parsed), f"{text}: no keyword-only arguments, no defaults"


@pytest.mark.exercise("op-register")
def test_op_kernels_registered(ext):
    for name in ("ch05::trilinear", "ch05::trilinear_backward"):
        for key in ("CPU", "CUDA"):  # CUDA too in a CPU-only build: it refuses CUDA tensors with a clear message
            assert torch._C._dispatch_has_kernel_for_dispatch_key(name, key), f"{name}: no kernel for {key}"
        for key in ("CompositeImplicitAutograd", "CompositeExplicitAutograd"):
            assert not torch._C._dispatch_has_kernel_for_dispatch_key(name, key), (
                f"{name}: a kernel for {key} would also serve Meta, XLA, ... devices; register CPU and CUDA")


@pytest.mark.exercise("op-register")
def test_op_keys_run_the_same_kernels(ext):
    """The CPU and CUDA keys register the same functions (they pick the device's kernel inside): each
    key's kernel, called straight (redispatch, on CPU tensors, so no GPU is needed), gives the same
    results, the empty (0,) tensors for gradients not asked for included. A CUDA block that
    registers another function, say the backward without its (0,) placeholders, fails here."""
    K = torch._C.DispatchKey
    feats, points = inputs(6, 5, "cpu", torch.float64, which="none")
    grad_out = torch.randn(6, 5, dtype=torch.float64)
    calls = {"trilinear": (torch.ops.ch05.trilinear.default, (feats, points))}
    for nf, np_, give in NEEDS:
        calls[f"trilinear_backward, need_feats={nf}, need_points={np_}{'' if give else ', feats None'}"] = (
            torch.ops.ch05.trilinear_backward.default, (grad_out, feats if give else None, points, nf, np_))
    for what, (fn, args) in calls.items():
        got = {}
        for key in (K.CPU, K.CUDA):
            out = fn.redispatch(torch._C.DispatchKeySet(key), *args)
            got[key.name] = [None if t is None else (tuple(t.shape), t.dtype) for t in
                             (out if isinstance(out, (tuple, list)) else [out])]
        assert got["CPU"] == got["CUDA"], (f"{what}: the CPU key's kernel returns (shape, dtype) {got['CPU']}, the CUDA "
                                           f"key's {got['CUDA']} (None: an undefined tensor): register the same "
                                           "functions for both keys")


@pytest.mark.exercise("op-register")
def test_op_forward(ext, device, dtype):
    feats, points = inputs(30, 45, device, dtype, which="none")
    with poisoned_empty():
        out = torch.ops.ch05.trilinear(feats, points)
    check_result(out, reference_out(feats, points), dtype, "torch.ops.ch05.trilinear")


NEEDS = [(True, True, True), (True, False, True), (True, False, False), (False, True, True), (False, False, True),
         (False, False, False)]  # (need_feats, need_points, feats given)


@pytest.mark.exercise("op-register")
@pytest.mark.parametrize("need_feats, need_points, give_feats", NEEDS,
                         ids=[f"feats{int(a)}-points{int(b)}{'' if c else '-feats None'}" for a, b, c in NEEDS])
def test_backward_op(ext, device, dtype, need_feats, need_points, give_feats):
    N, F = 40, 67
    feats, points = inputs(N, F, device, dtype, which="none")
    grad_out = torch.randn(N, F, dtype=torch.float64).to(device=device, dtype=dtype)
    with poisoned_empty():
        gf, gp = torch.ops.ch05.trilinear_backward(grad_out, feats if give_feats else None, points,
                                                   need_feats, need_points)
    ref_feats, ref_points = REFERENCE.trilinear_grads(grad_out, feats, points)
    for got, need, ref, what in ((gf, need_feats, ref_feats, "grad_feats"), (gp, need_points, ref_points, "grad_points")):
        assert isinstance(got, torch.Tensor), f"{what}: got {got!r}; each return of the schema is a tensor"
        if need:
            check_result(got, ref, dtype, what)
        else:
            assert got.shape == (0,) and got.dtype == dtype and got.device.type == device, (
                f"{what} not needed: expected an empty tensor, shape (0,), {dtype} on {device}; got shape "
                f"{tuple(got.shape)}, {got.dtype} on {got.device}")


def test_cuda_kernels_emulated(judged_source, dtype):
    """The CUDA forward and backward (csrc/trilinear_cuda.cu) through the GPU-free judge
    (coursekit/emulate.py), on a machine without a GPU too: F a multiple of a 16-byte pack (its
    vector path) and not, feats and grad_out one element past a 16-byte boundary (the scalar path:
    the judge stops a misaligned pack, as a GPU does), every combination of gradients needed (feats
    is passed only when the points' gradient needs it), each tensor at the end and at the start of
    its guarded pages."""
    from coursekit import emulate
    module = emulate.build("05", judged_source)
    for (N, F), offset in itertools.product([(5, 64), (13, 67)], (0, 1)):
        feats, points = inputs(N, F, "cpu", dtype, which="none")
        grad_out = torch.randn(N, F, dtype=torch.float64).to(dtype)
        ref_feats, ref_points = REFERENCE.trilinear_grads(grad_out, feats, points)
        for at_end in (True, False):
            what = (f"the CUDA kernels (emulated), {dtype}, N={N} F={F}" + (", one past 16 bytes" if offset else "")
                    + (", ending where its pages end" if at_end else ""))
            check_result(module.forward(feats, points, at_end, 1, offset), reference_out(feats, points), dtype,
                         f"{what}: out")
            for need_feats, need_points in ((True, True), (True, False), (False, True)):
                got = iter(module.backward(grad_out, feats, points, need_feats, need_points, at_end, 1, offset))
                if need_feats:
                    check_result(next(got), ref_feats, dtype, f"{what}: grad_feats")
                if need_points:
                    check_result(next(got), ref_points, dtype,
                                 f"{what}: grad_points{'' if need_feats else ' alone (feats not needed for grad_feats)'}")


def layouts(t):
    """The same values as `t` in other layouts: transposed storage, an offset slice, every other element."""
    out = {"transposed": t.transpose(0, -1).contiguous().transpose(0, -1) if t.dim() > 1 else t,
           "offset slice": torch.cat([t, t], -1)[..., t.shape[-1]:],
           "strided": torch.stack([t, t], -1)[..., 0]}
    return {k: v for k, v in out.items() if not v.is_contiguous() or k == "offset slice"}


@pytest.mark.exercise("op-register")
def test_op_layouts(ext, device):
    N, F = 9, 7
    feats, points = inputs(N, F, device, torch.float64, which="none")
    grad_out = torch.randn(N, F, dtype=torch.float64, device=device)
    out = torch.ops.ch05.trilinear(feats, points)
    gf, gp = torch.ops.ch05.trilinear_backward(grad_out, feats, points, True, True)
    for name, f in {**layouts(feats), "expanded": feats[:1].expand(N, 8, F)}.items():
        ref = out if name != "expanded" else torch.ops.ch05.trilinear(f.contiguous(), points)
        assert_bitwise(torch.ops.ch05.trilinear(f, points), ref, f"trilinear with feats {name}")
        ref = gp if name != "expanded" else torch.ops.ch05.trilinear_backward(grad_out, f.contiguous(), points, False, True)[1]
        assert_bitwise(torch.ops.ch05.trilinear_backward(grad_out, f, points, False, True)[1], ref,
                       f"grad_points with feats {name}")
    for name, p in {**layouts(points), "expanded": points[:1].expand(N, 3)}.items():
        c = p.contiguous()
        assert_bitwise(torch.ops.ch05.trilinear(feats, p), torch.ops.ch05.trilinear(feats, c), f"trilinear, points {name}")
        for got, ref, what in zip(torch.ops.ch05.trilinear_backward(grad_out, feats, p, True, True),
                                  torch.ops.ch05.trilinear_backward(grad_out, feats, c, True, True), ("feats", "points")):
            assert_bitwise(got, ref, f"grad_{what} with points {name}")
    for name, g in grad_out_layouts(N, F, device, torch.float64).items():
        c = g.contiguous()
        for got, ref, what in zip(torch.ops.ch05.trilinear_backward(g, feats, points, True, True),
                                  torch.ops.ch05.trilinear_backward(c, feats, points, True, True), ("feats", "points")):
            assert_bitwise(got, ref, f"grad_{what} with grad_out {name}")
        ref_feats, ref_points = REFERENCE.trilinear_grads(g, feats, points)
        got_feats, got_points = torch.ops.ch05.trilinear_backward(g, feats, points, True, True)
        assert_f64(got_feats, ref_feats, f"grad_feats with grad_out {name}")
        assert_f64(got_points, ref_points, f"grad_points with grad_out {name}")


@pytest.mark.exercise("op-register")
@pytest.mark.parametrize("N, F", [(0, 5), (4, 0)])
def test_op_empty(ext, device, N, F):
    feats, points = inputs(N, F, device, which="none")
    assert_property(tuple(torch.ops.ch05.trilinear(feats, points).shape), (N, F), "shape", "trilinear")
    gf, gp = torch.ops.ch05.trilinear_backward(torch.randn(N, F, device=device), feats, points, True, True)
    assert_property(tuple(gf.shape), tuple(feats.shape), "shape", "trilinear_backward's grad_feats")
    assert_property(tuple(gp.shape), tuple(points.shape), "shape", "trilinear_backward's grad_points")
    assert not gp.any(), "with F = 0 the output does not depend on the points"


# ---------------------------------------------------------------------------
# Bad inputs: every rank and size of every argument of both ops. The same table
# runs against the C++ op (eager) and the fake implementations, which must
# refuse exactly what the C++ op refuses, with the same message.


def _t(*shape, dtype=torch.float32, device="cpu"):
    if dtype.is_floating_point:
        return torch.randn(shape, device=device).to(dtype)
    return torch.ones(shape, dtype=dtype, device=device)


SHAPE = r"trilinear: feats must have shape \(N, 8, F\)"
POINTS = r"trilinear: points must have shape \(N, 3\) with N = 4 as feats"
KIND = r"must be float64, float32, float16 or bfloat16"
F8 = torch.float8_e4m3fn

BAD_FORWARD = [  # (id, make inputs, message, needs a CUDA device)
    ("feats rank 0", lambda: (_t(), _t(4, 3)), SHAPE, False),
    ("feats rank 1", lambda: (_t(4), _t(4, 3)), SHAPE, False),
    ("feats rank 2", lambda: (_t(4, 8), _t(4, 3)), SHAPE, False),
    ("feats rank 4", lambda: (_t(4, 8, 2, 1), _t(4, 3)), SHAPE, False),
    ("feats 7 corners", lambda: (_t(4, 7, 2), _t(4, 3)), SHAPE, False),
    ("points rank 1", lambda: (_t(4, 8, 2), _t(12)), POINTS, False),
    ("points rank 3", lambda: (_t(4, 8, 2), _t(4, 3, 1)), POINTS, False),
    ("points N differs", lambda: (_t(4, 8, 2), _t(5, 3)), POINTS, False),
    ("points (N, 2)", lambda: (_t(4, 8, 2), _t(4, 2)), POINTS, False),
    ("int32 feats", lambda: (_t(4, 8, 2, dtype=torch.int32), _t(4, 3, dtype=torch.int32)), "trilinear: feats " + KIND, False),
    ("int64 feats", lambda: (_t(4, 8, 2, dtype=torch.int64), _t(4, 3, dtype=torch.int64)), "trilinear: feats " + KIND, False),
    ("float8 feats", lambda: (_t(4, 8, 2, dtype=F8), _t(4, 3, dtype=F8)), "trilinear: feats " + KIND, False),
    ("points float64", lambda: (_t(4, 8, 2), _t(4, 3, dtype=torch.float64)),
     r"trilinear: points must have the dtype of feats", False),
    ("points float16", lambda: (_t(4, 8, 2, dtype=torch.bfloat16), _t(4, 3, dtype=torch.float16)),
     r"trilinear: points must have the dtype of feats", False),
    ("points on another device", lambda: (_t(4, 8, 2, device="cuda"), _t(4, 3)),
     "trilinear: feats and points must be on the same device", True),
    ("feats on another device", lambda: (_t(4, 8, 2), _t(4, 3, device="cuda")),
     "trilinear: feats and points must be on the same device", True),
]

B_GRAD = r"trilinear_backward: grad_out must have shape \(N, F\)"
B_POINTS = r"trilinear_backward: points must have shape \(N, 3\) with N = 4 as grad_out"
B_FEATS = r"trilinear_backward: feats must have shape \(N, 8, F\) = \(4, 8, 2\)"
B_DEVICE = "trilinear_backward: grad_out, feats and points must be on the same device"


def _bwd(g=(4, 2), f=(4, 8, 2), p=(4, 3), need=(True, True), gd=torch.float32, fd=torch.float32,
         pd=torch.float32, gdev="cpu", fdev="cpu", pdev="cpu"):
    return lambda: (_t(*g, dtype=gd, device=gdev), None if f is None else _t(*f, dtype=fd, device=fdev),
                    _t(*p, dtype=pd, device=pdev), *need)


BAD_BACKWARD = [
    ("grad_out rank 1", _bwd(g=(4,)), B_GRAD, False),
    ("grad_out rank 3", _bwd(g=(4, 2, 1)), B_GRAD, False),
    ("points rank 1", _bwd(p=(12,)), B_POINTS, False),
    ("points rank 3", _bwd(p=(4, 3, 1)), B_POINTS, False),
    ("points N differs", _bwd(p=(5, 3)), B_POINTS, False),
    ("points (N, 2)", _bwd(p=(4, 2)), B_POINTS, False),
    ("feats rank 2", _bwd(f=(4, 8)), B_FEATS, False),
    ("feats rank 4", _bwd(f=(4, 8, 2, 1)), B_FEATS, False),
    ("feats N differs", _bwd(f=(5, 8, 2)), B_FEATS, False),
    ("feats 7 corners", _bwd(f=(4, 7, 2)), B_FEATS, False),
    ("feats F differs", _bwd(f=(4, 8, 3)), B_FEATS, False),
    ("feats wrong, not needed", _bwd(f=(4, 8, 3), need=(True, False)), B_FEATS, False),
    ("feats None, points need it", _bwd(f=None, need=(False, True)),
     r"trilinear_backward: the points' gradient needs feats", False),
    ("int32 grad_out", _bwd(gd=torch.int32, fd=torch.int32, pd=torch.int32), "trilinear_backward: grad_out " + KIND, False),
    ("int64 grad_out", _bwd(gd=torch.int64, fd=torch.int64, pd=torch.int64), "trilinear_backward: grad_out " + KIND, False),
    ("float8 grad_out", _bwd(gd=F8, fd=F8, pd=F8), "trilinear_backward: grad_out " + KIND, False),
    ("points float64", _bwd(pd=torch.float64), "trilinear_backward: points must have the dtype of grad_out", False),
    ("feats float64", _bwd(fd=torch.float64), "trilinear_backward: feats must have the dtype of grad_out", False),
    ("feats float64, not needed", _bwd(fd=torch.float64, need=(True, False)),
     "trilinear_backward: feats must have the dtype of grad_out", False),
    ("grad_out on another device", _bwd(gdev="cuda"), B_DEVICE, True),
    ("points on another device", _bwd(pdev="cuda"), B_DEVICE, True),
    ("feats on another device", _bwd(fdev="cuda"), B_DEVICE, True),
]

BAD = [("trilinear", *case) for case in BAD_FORWARD] + [("trilinear_backward", *case) for case in BAD_BACKWARD]
BAD_IDS = [f"{name}: {case}" for name, case, *_ in BAD]


@pytest.mark.exercise("op-register")
@pytest.mark.parametrize("name, case, make, message, cuda", BAD, ids=BAD_IDS)
def test_op_bad_inputs(ext, name, case, make, message, cuda):
    if cuda and not (GPU and build.describe(ext) == "CPU+CUDA"):
        pytest.skip("needs a CUDA GPU and a CUDA build (the fake implementations are checked without one)")
    with expect_error(message, RuntimeError, what=f"torch.ops.ch05.{name} with {case}"):
        getattr(torch.ops.ch05, name)(*make())


def test_pybind_bad_inputs(ext):
    # Route 1 calls the same C++ functions through pybind11.
    for name, case, make, message, cuda in BAD:
        if cuda:
            continue
        with expect_error(message, RuntimeError, what=f"ext.{'forward' if name == 'trilinear' else 'backward'}, {case}"):
            (ext.forward if name == "trilinear" else ext.backward)(*make())


@pytest.mark.cuda
def test_cuda_tensors_on_the_cpu_only_build(ext):
    if build.describe(ext) == "CPU+CUDA":
        pytest.skip("built with CUDA")
    with expect_error("built without CUDA"):
        torch.ops.ch05.trilinear(_t(4, 8, 2, device="cuda"), _t(4, 3, device="cuda"))


# ---------------------------------------------------------------------------
# Route 2, Python: the fake implementations.


@pytest.mark.exercise("fake-impl")
@pytest.mark.parametrize("name, case, make, message, cuda", BAD, ids=BAD_IDS)
def test_fake_refuses_what_eager_refuses(op, name, case, make, message, cuda):
    # Under FakeTensorMode (what torch.compile traces with; devices are pretended, so
    # the device checks run without a GPU) ...
    if cuda and "cuda" not in FAKE_DEVICES:
        pytest.skip("this torch is built without CUDA: no fake CUDA tensors")
    with FakeTensorMode():
        args = make()
        with expect_error(message, RuntimeError, what=f"the fake ch05::{name} with {case}"):
            getattr(torch.ops.ch05, name)(*args)
    # ... and on the meta device (the same fake implementation serves it).
    if not cuda:
        args = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in make()]
        with expect_error(message, RuntimeError, what=f"ch05::{name} on meta tensors with {case}"):
            getattr(torch.ops.ch05, name)(*args)
        # The same message as the C++ op, what follows "got" too (a dtype may be named either way:
        # torch.int32 or c10's Int).
        eager = _first_line(lambda: getattr(torch.ops.ch05, name)(*make()))
        with FakeTensorMode():
            args = make()
            fake = _first_line(lambda: getattr(torch.ops.ch05, name)(*args))
        assert _c10_dtype_names(fake) == eager, (
            f"the fake ch05::{name} with {case} says {fake!r}, the C++ op {eager!r}: a traced program must fail "
            "with the eager op's message, the shapes and values it reports included")


def _first_line(call) -> str | None:
    """The first line of the RuntimeError that call() raises (None: it raises none)."""
    try:
        call()
    except RuntimeError as e:
        return str(e).strip().splitlines()[0]
    return None


_C10_NAMES = {torch.float64: "Double", torch.float32: "Float", torch.float16: "Half", torch.bfloat16: "BFloat16",
              torch.int32: "Int", torch.int64: "Long", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
              torch.bool: "Bool", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
              torch.float8_e4m3fn: "Float8_e4m3fn", torch.float8_e5m2: "Float8_e5m2"}


def _c10_dtype_names(message: str | None) -> str | None:
    """message with Python's dtype names (torch.int32) written as c10's (Int), as C++ prints them."""
    if message is None:
        return None
    return re.sub(r"torch\.(\w+)", lambda m: _C10_NAMES.get(getattr(torch, m.group(1), None), m.group(0)), message)


# Device faults only a fake can show on any machine (fake tensors may sit on GPUs that do not
# exist): two GPUs of one type, and a device fault together with an earlier one. The C++ op
# (trilinear.cpp) checks shapes, then dtypes, then devices, and compares whole devices.
F32, F64 = torch.float32, torch.float64
FAKE_DEVICE_CASES = [  # (op, case, (shape, dtype, device) per tensor argument, then the flags, message)
    ("trilinear", "points on cuda:1, feats on cuda:0", [((4, 8, 2), F32, "cuda:0"), ((4, 3), F32, "cuda:1")],
     "trilinear: feats and points must be on the same device, got feats on cuda:0 and points on cuda:1"),
    ("trilinear", "points float64 and on another device", [((4, 8, 2), F32, "cuda:0"), ((4, 3), F64, "cpu")],
     r"trilinear: points must have the dtype of feats"),
    ("trilinear", "points (N, 2) and on another device", [((4, 8, 2), F32, "cuda:0"), ((4, 2), F32, "cpu")], POINTS),
    ("trilinear_backward", "points on cuda:1",
     [((4, 2), F32, "cuda:0"), ((4, 8, 2), F32, "cuda:0"), ((4, 3), F32, "cuda:1"), True, True],
     B_DEVICE + ", got grad_out on cuda:0, points on cuda:1, feats on cuda:0"),
    ("trilinear_backward", "feats on cuda:1",
     [((4, 2), F32, "cuda:0"), ((4, 8, 2), F32, "cuda:1"), ((4, 3), F32, "cuda:0"), True, True],
     B_DEVICE + ", got grad_out on cuda:0, points on cuda:0, feats on cuda:1"),
    ("trilinear_backward", "grad_out on cuda:1",
     [((4, 2), F32, "cuda:1"), ((4, 8, 2), F32, "cuda:0"), ((4, 3), F32, "cuda:0"), True, True],
     B_DEVICE + ", got grad_out on cuda:1, points on cuda:0, feats on cuda:0"),
    ("trilinear_backward", "feats on another device, its gradient not needed",
     [((4, 2), F32, "cuda:0"), ((4, 8, 2), F32, "cpu"), ((4, 3), F32, "cuda:0"), True, False],
     B_DEVICE + ", got grad_out on cuda:0, points on cuda:0, feats on cpu"),
    ("trilinear_backward", "feats float64 and on another device",
     [((4, 2), F32, "cpu"), ((4, 8, 2), F64, "cuda:0"), ((4, 3), F32, "cpu"), True, True],
     "trilinear_backward: feats must have the dtype of grad_out"),
    ("trilinear_backward", "points float64 and grad_out on another device",
     [((4, 2), F32, "cuda:0"), ((4, 8, 2), F32, "cpu"), ((4, 3), F64, "cpu"), True, True],
     "trilinear_backward: points must have the dtype of grad_out"),
]


def _skip_unless_fake_cuda1_can_exist():
    """A fake tensor on cuda:1 needs no GPU where CUDA is absent, but where CUDA is present torch checks
    that the GPU exists: such cases run on CPU-only machines and on two GPUs."""
    if torch.cuda.is_available() and torch.cuda.device_count() < 2:
        pytest.skip("a fake tensor on cuda:1 needs no GPU where CUDA is absent, but where CUDA is present torch "
                    "checks that the GPU exists: this case runs on CPU-only machines and on two GPUs")


@pytest.mark.exercise("fake-impl")
@pytest.mark.parametrize("name, case, spec, message", FAKE_DEVICE_CASES, ids=[f"{n}: {c}" for n, c, *_ in FAKE_DEVICE_CASES])
def test_fake_device_checks(op, name, case, spec, message):
    from torch._subclasses.fake_tensor import FakeTensor

    if "cuda:1" in str(spec):
        _skip_unless_fake_cuda1_can_exist()
    mode = FakeTensorMode()
    # Fake tensors made directly on their devices: no GPU is touched (cuda:1 need not exist).
    args = [FakeTensor(mode, torch.empty(a[0], dtype=a[1], device="meta"), torch.device(a[2]))
            if isinstance(a, tuple) else a for a in spec]
    with mode, expect_error(message, RuntimeError, what=f"the fake ch05::{name} with {case}"):
        getattr(torch.ops.ch05, name)(*args)


@pytest.mark.exercise("fake-impl")
def test_fake_outputs_on_the_inputs_device(op):
    """The fakes' outputs sit on their inputs' device, the index included (cuda:1, not the current
    GPU): a traced program places every later tensor by them."""
    from torch._subclasses.fake_tensor import FakeTensor

    _skip_unless_fake_cuda1_can_exist()
    if "cuda" not in FAKE_DEVICES:
        pytest.skip("this torch is built without CUDA: no fake CUDA tensors")
    mode = FakeTensorMode()
    device = torch.device("cuda:1")
    fake = lambda *shape: FakeTensor(mode, torch.empty(shape, device="meta"), device)  # noqa: E731
    with mode:
        outs = {"trilinear's out": torch.ops.ch05.trilinear(fake(4, 8, 2), fake(4, 3))}
        gf, gp = torch.ops.ch05.trilinear_backward(fake(4, 2), fake(4, 8, 2), fake(4, 3), True, True)
        outs.update({"grad_feats": gf, "grad_points": gp})
        gf, gp = torch.ops.ch05.trilinear_backward(fake(4, 2), None, fake(4, 3), False, False)
        outs.update({"empty grad_feats (feats None)": gf, "empty grad_points (feats None)": gp})
    for what, t in outs.items():
        assert t.device == device, f"the fake {what} of inputs on {device} is on {t.device}: keep the inputs' device"


# Inputs with two things wrong: the fake must report the same one as the C++ op (its checks in the
# same order), or a traced program fails with another message than the eager one.
_TWO_FAULTS = {
    "trilinear": {
        "feats-shape": lambda a: a.update(feats=a["feats"][:, :7]),
        "points-shape": lambda a: a.update(points=a["points"][:, :2]),
        "feats-dtype": lambda a: a.update(feats=a["feats"].int()),
        "points-dtype": lambda a: a.update(points=a["points"].double()),
    },
    "trilinear_backward": {
        "grad_out-shape": lambda a: a.update(grad_out=a["grad_out"][:, :, None]),
        "points-shape": lambda a: a.update(points=a["points"][:, :2]),
        "feats-shape": lambda a: a.update(feats=a["feats"][:, :7]),
        "feats-missing": lambda a: a.update(feats=None),
        "grad_out-dtype": lambda a: a.update(grad_out=a["grad_out"].int()),
        "points-dtype": lambda a: a.update(points=a["points"].double()),
        "feats-dtype": lambda a: a.update(feats=a["feats"].double()),
    },
}
TWO_FAULTS = [(op, a, b) for op, faults in _TWO_FAULTS.items() for a, b in itertools.combinations(faults, 2)
              if not ({a, b} & {"feats-missing"} and {a, b} & {"feats-shape", "feats-dtype"})]


def _first_error(fn, args) -> str | None:
    """The first line of the RuntimeError fn(*args) raises, without its details (", got ..." and a
    dtype in brackets), which the C++ op and the fake print differently (Int, torch.int32)."""
    try:
        fn(*args)
    except RuntimeError as e:
        return re.sub(r"\((?:torch\.)?\w+\)", "(dtype)", str(e).splitlines()[0].split(", got")[0])
    return None


@pytest.mark.exercise("fake-impl")
@pytest.mark.parametrize("name, first, second", TWO_FAULTS, ids=[f"{n}-{a}+{b}" for n, a, b in TWO_FAULTS])
def test_fake_reports_what_eager_reports_first(op, name, first, second):
    """Two things wrong at once: the fake (under FakeTensorMode, and on meta tensors) must raise the
    C++ op's error, the first check that fails in the C++ order (README: the same checks in the
    same order)."""
    args = {"trilinear": dict(feats=torch.randn(4, 8, 5), points=torch.rand(4, 3) * 2 - 1),
            "trilinear_backward": dict(grad_out=torch.randn(4, 5), feats=torch.randn(4, 8, 5),
                                       points=torch.rand(4, 3) * 2 - 1)}[name]
    for fault in (first, second):
        _TWO_FAULTS[name][fault](args)
    order = ("feats", "points") if name == "trilinear" else ("grad_out", "feats", "points")
    flags = () if name == "trilinear" else (True, True)
    fn = getattr(torch.ops.ch05, name)
    eager = _first_error(fn, (*[args[k] for k in order], *flags))
    assert eager is not None, f"the C++ op accepted {name} with {first} and {second}"
    with FakeTensorMode() as mode:
        fake = _first_error(fn, (*[None if args[k] is None else mode.from_tensor(args[k]) for k in order], *flags))
    assert fake == eager, (f"{name} with {first} and {second}: the C++ op raises \"{eager}, ...\", the fake "
                           f"\"{fake}, ...\": the fake must run the same checks in the same order")
    meta = _first_error(fn, (*[None if args[k] is None else args[k].to("meta") for k in order], *flags))
    assert meta == eager, (f"{name} on meta tensors with {first} and {second}: \"{meta}, ...\", the C++ op "
                           f"raises \"{eager}, ...\"")


FAKE_CASES = [  # (id, N, F, need_feats, need_points, feats given)
    ("N=11 F=5", 11, 5, True, True, True), ("N=0", 0, 5, True, True, True), ("F=0", 3, 0, True, True, True),
    ("feats only", 11, 5, True, False, True), ("feats only, feats None", 11, 5, True, False, False),
    ("points only", 11, 5, False, True, True), ("neither", 11, 5, False, False, True),
    ("neither, feats None", 0, 0, False, False, False),
]


@pytest.mark.exercise("fake-impl")
@pytest.mark.parametrize("case, N, F, need_feats, need_points, give_feats", FAKE_CASES, ids=[c[0] for c in FAKE_CASES])
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=["float64", "bfloat16"])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_fake_outputs_match_eager(op, case, N, F, need_feats, need_points, give_feats, dtype, layout):
    """The fake's outputs have the real op's shapes, strides, dtype and device, also for inputs
    that are not contiguous (the op's outputs are packed whatever the inputs' strides)."""
    feats, points = inputs(N, F, dtype=dtype, which="none")
    grad_out = torch.randn(N, F).to(dtype)
    if layout == "strided":  # n innermost in feats and grad_out, points column-major
        feats = feats.permute(1, 2, 0).contiguous().permute(2, 0, 1)
        points, grad_out = points.t().contiguous().t(), grad_out.t().contiguous().t()
    f = feats if give_feats else None
    real = [torch.ops.ch05.trilinear(feats, points),
            *torch.ops.ch05.trilinear_backward(grad_out, f, points, need_feats, need_points)]
    for device in FAKE_DEVICES:  # fake CUDA tensors need no GPU
        with FakeTensorMode():
            ff = torch.empty_strided(feats.shape, feats.stride(), dtype=dtype, device=device)
            fp = torch.empty_strided(points.shape, points.stride(), dtype=dtype, device=device)
            fg = torch.empty_strided(grad_out.shape, grad_out.stride(), dtype=dtype, device=device)
            fake = [torch.ops.ch05.trilinear(ff, fp),
                    *torch.ops.ch05.trilinear_backward(fg, ff if give_feats else None, fp, need_feats, need_points)]
            for r, k, what in zip(real, fake, ("out", "grad_feats", "grad_points")):
                got = (tuple(k.shape), k.stride(), k.dtype, k.device.type)
                want = (tuple(r.shape), r.stride(), r.dtype, device)
                assert got == want, (f"the fake {what} ({case}, {layout} inputs, {device}): (shape, strides, dtype, "
                                     f"device) {got}, "
                                     f"the C++ op gives {want}")


@pytest.mark.exercise("fake-impl")
def test_fake_traces_sizes_that_depend_on_data(op):
    """Rows picked by nonzero(): N is known only when the program runs, so at trace time it is an unbacked
    symbol, which has no value for a Python bool. The fakes must state their size conditions with
    torch._check, one comparison each (Python's `and` or an `if` on such a size fails to trace)."""
    def f(keeps, feats, points, grad_out):  # every tensor's rows by a mask of its own: 5 sizes unknown until run
        a, b, c, d, e = (k.nonzero().squeeze(1) for k in keeps)
        return (torch.ops.ch05.trilinear(feats[a], points[b]),
                *torch.ops.ch05.trilinear_backward(grad_out[c], feats[d], points[e], True, True))

    keep = torch.tensor([True, False, True, True, False, True])
    keeps = [keep.clone() for _ in range(5)]
    feats, points = (t.detach() for t in inputs(6, 5, dtype=torch.float64))
    grad_out = torch.randn(6, 5, dtype=torch.float64)
    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
            got = torch.compile(f, fullgraph=True, backend="aot_eager")(keeps, feats, points, grad_out)
    except Exception as e:  # noqa: BLE001 - any tracing failure is the finding
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise AssertionError(
            f"torch.compile(fullgraph=True) of ch05::trilinear and ch05::trilinear_backward on rows picked by "
            f"nonzero() failed in a fake: {type(e).__name__}: {first[:300]}. Such a size has no value at trace "
            "time: one size comparison per torch._check (Python's `and` or an `if` asks it for a plain bool)") from None
    finally:
        torch._dynamo.reset()
    for g, w, what in zip(got, f(keeps, feats, points, grad_out), ("out", "grad_feats", "grad_points")):
        assert g.shape == w.shape and torch.equal(g, w), f"compiled {what} on rows picked by nonzero(): not eager's"


@pytest.mark.exercise("fake-impl")
def test_opcheck(op, device, dtype):
    # opcheck runs the op under FakeTensor (our fake impl must agree with the real
    # kernel), checks the schema and the autograd registration, and traces it
    # with AOTAutograd, comparing to eager.
    feats, points = inputs(5, 7, device, dtype)
    torch.library.opcheck(torch.ops.ch05.trilinear.default, (feats, points))
    grad_out = torch.randn(5, 7, device=device, dtype=dtype)
    for need_feats, need_points, give_feats in NEEDS:
        f = feats.detach() if give_feats else None
        torch.library.opcheck(torch.ops.ch05.trilinear_backward.default,
                              (grad_out, f, points.detach(), need_feats, need_points))


# ---------------------------------------------------------------------------
# Route 2, Python: the autograd registration.


@pytest.mark.exercise("op-autograd")
@pytest.mark.parametrize("which", WHICH)
def test_op_gradients(op, device, dtype, which):
    check_gradients(op.trilinear, device, dtype, which)


@pytest.mark.exercise("op-autograd")
def test_op_empty_gradients(op, device):
    check_empty_gradients(op.trilinear, device)


@pytest.mark.exercise("op-autograd")
def test_op_gradcheck(op, device):
    gradcheck_route(op.trilinear, device)


@pytest.mark.exercise("op-autograd")
@pytest.mark.parametrize("which", WHICH)
def test_op_needs_input_grad(op, monkeypatch, which):
    spy = Spy(op.trilinear_backward_op)
    monkeypatch.setattr(op, "trilinear_backward_op", spy)
    monkeypatch.setattr(torch.ops.ch05, "trilinear_backward", spy)  # the same operator, by its other name
    feats, points = inputs(7, 5, which=which)
    op.trilinear(feats, points).sum().backward()
    assert spy.calls, ("the backward operator was never called: _backward must compute the gradients with "
                       "trilinear_backward_op; ext.backward is invisible to torch.compile and has no formula of "
                       "its own for a second derivative")
    assert spy.calls == [(feats.requires_grad, points.requires_grad)], \
        "backward must ask the backward op only for the gradients autograd needs (ctx.needs_input_grad)"
    assert (feats.grad is not None) == feats.requires_grad and (points.grad is not None) == points.requires_grad


@pytest.mark.exercise("op-autograd")
@pytest.mark.parametrize("which", WHICH)
def test_op_saves_only_what_backward_needs(op, which):
    check_saved(op.trilinear, which)


@pytest.mark.exercise("op-autograd")
def test_op_backward_op_refuses_its_derivative(op):
    """The backward operator called directly, its result differentiated: its own formula must
    refuse, not answer (a guard in the forward's backward only covers the route through it)."""
    feats, points = inputs(4, 3, dtype=torch.float64, which="both")
    grad_out = torch.randn(4, 3, dtype=torch.float64)
    _, grad_points = torch.ops.ch05.trilinear_backward(grad_out, feats, points, True, True)
    with expect_error("double backward", RuntimeError, what="differentiating ch05::trilinear_backward's result"):
        grad_points.square().sum().backward()


@pytest.mark.exercise("op-autograd")
def test_op_keeps_no_output(op):
    check_output_not_kept(op.trilinear)


@pytest.mark.exercise("op-autograd")
@pytest.mark.parametrize("which", ["feats", "points"])
def test_op_backward_returns_none(op, which):
    check_backward_returns_none(op.trilinear, which)


@pytest.mark.exercise("op-autograd")
def test_op_grad_out_layouts(op, device):
    check_grad_out_layouts(op.trilinear, device)


@pytest.mark.exercise("op-autograd")
@pytest.mark.parametrize("loss, wrt", SECOND_DERIVATIVES)
def test_op_refuses_double_backward(op, loss, wrt):
    check_refuses_double_backward(op.trilinear, loss, wrt)


@pytest.mark.exercise("op-autograd")
@pytest.mark.parametrize("which", WHICH)
def test_torch_compile_fullgraph(op, device, which):
    def loss_fn(feats, points, weight):
        return (op.trilinear(feats * 2, points) * weight).sum()

    feats, points = inputs(33, 20, device, torch.float64, which)
    weight = torch.randn(33, 20, device=device, dtype=torch.float64)
    wanted = [t for t in (feats, points) if t.requires_grad]
    torch._dynamo.reset()
    compiled = torch.compile(loss_fn, fullgraph=True, backend=BACKEND[device])
    loss = compiled(feats, points, weight)
    grads = torch.autograd.grad(loss, wanted)
    ref_feats, ref_points = REFERENCE.trilinear_grads(weight, feats * 2, points)
    assert_f64(loss.reshape(1), reference_out(feats * 2, points).mul(weight.cpu()).sum().reshape(1), "compiled loss")
    refs = {"feats": 2 * ref_feats, "points": ref_points}
    for g, name in zip(grads, [n for n, t in (("feats", feats), ("points", points)) if t.requires_grad]):
        assert_f64(g, refs[name], f"compiled {name} gradient")


def test_torch_export(op):
    class M(torch.nn.Module):
        def forward(self, feats, points):
            return op.trilinear(feats, points).relu()

    exported = torch.export.export(M(), inputs(4, 3, which="none"))
    assert any(n.target is torch.ops.ch05.trilinear.default for n in exported.graph.nodes)


@pytest.mark.cuda
def test_device_mix(ext):
    if build.describe(ext) != "CPU+CUDA":
        pytest.skip("built without CUDA")
    with expect_error("trilinear: feats and points must be on the same device"):
        torch.ops.ch05.trilinear(torch.randn(4, 8, 2, device="cuda"), torch.rand(4, 3))


# ---------------------------------------------------------------------------
# Autocast: the op's cast policy inside torch.autocast regions (README section 4).

AUTOCAST_LOW = {"cpu": torch.bfloat16, "cuda": torch.float16}  # the lower-precision type autocast is used with


def test_autocast_kernels_registered(ext):
    for key in ("AutocastCPU", "AutocastCUDA"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key("ch05::trilinear", key), f"ch05::trilinear: no {key} kernel"


@pytest.mark.parametrize("feats_type, points_type, runs_in", [
    ("low", "float32", "float32"),  # mixed: the widest type, the coordinates keep their precision
    ("float32", "low", "float32"),
    ("low", "low", "low"),  # both low: stays low, no copies
    ("float32", "float32", "float32"),  # float32 inputs are not lowered
])
def test_op_under_autocast(op, device, feats_type, points_type, runs_in):
    """Inside torch.autocast the op runs in the widest of its inputs' types (PyTorch's "promote" policy), and the
    gradients come back in each input's own dtype. (`op` loads trilinear_op.py, which registers the op's autograd
    formula: run alone, as under pytest -n, the test must load it itself.)"""
    low = AUTOCAST_LOW[device]
    dtypes = {"low": low, "float32": torch.float32}
    feats, _ = inputs(40, 67, device, dtypes[feats_type])
    _, points = inputs(40, 67, device, dtypes[points_type])
    want = dtypes[runs_in]
    with torch.autocast(device, dtype=low):
        out = torch.ops.ch05.trilinear(feats, points)
        grad_out = torch.randn(40, 67, dtype=torch.float64).to(device=device, dtype=out.dtype)
    assert out.dtype == want, (f"under torch.autocast({device!r}, dtype={low}), feats {feats.dtype} and points "
                               f"{points.dtype} gave a {out.dtype} result; expected {want} (the widest input type)")
    check_result(out, reference_out(feats, points), want, f"out under autocast ({feats_type}, {points_type})")
    out.backward(grad_out)
    ref_feats, ref_points = REFERENCE.trilinear_grads(grad_out, feats, points)
    for name, t, ref in (("feats", feats, ref_feats), ("points", points, ref_points)):
        assert t.grad.dtype == t.dtype, f"{name}.grad is {t.grad.dtype}; expected {t.dtype}, the dtype of {name}"
        if t.dtype == want:
            check_result(t.grad, ref, want, f"{name}.grad under autocast")
        else:  # computed in float32, rounded to the input's low type by the cast's backward: within 1 ulp
            assert_rounded(t.grad, ref, ulps=1, what=f"{name}.grad under autocast")


def test_mixed_dtypes_refused_outside_autocast(ext):
    feats, points = inputs(4, 3, dtype=torch.float16, which="none")[0], inputs(4, 3, which="none")[1]
    with expect_error(r"trilinear: points must have the dtype of feats \(Half\), got Float"):
        torch.ops.ch05.trilinear(feats, points)


def test_autocast_compiles(op):
    """torch.compile traces through the Autocast kernel (the casts and the op land in the graph)."""
    feats, points = inputs(10, 6, dtype=torch.bfloat16, which="feats")[0], inputs(10, 6, which="points")[1]

    def f(feats, points):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return op.trilinear(feats, points).sum()

    torch._dynamo.reset()
    loss = torch.compile(f, fullgraph=True, backend="aot_eager")(feats, points)
    assert loss.dtype == torch.float32
    loss.backward()
    ref_feats, ref_points = REFERENCE.trilinear_grads(torch.ones(10, 6), feats, points)
    assert_rounded(feats.grad, ref_feats, ulps=1, what="feats.grad, compiled under autocast")
    assert_close(points.grad, ref_points.float(), torch.float32, "points.grad, compiled under autocast", tol=2e-6)


# Autocast regions of either 16-bit type, with inputs of the other one (ATen's own promote helper throws
# "Unexpected floating ScalarType" for these): one type stays itself, float16 with bfloat16 runs in float32.
F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


@pytest.mark.parametrize("region", [F16, BF16], ids=["float16-region", "bfloat16-region"])
@pytest.mark.parametrize("feats_type, points_type, runs_in", [
    ("other", "other", "other"),  # both of the region's other 16-bit type: no cast
    (F16, BF16, F32), (BF16, F16, F32),  # float16 with bfloat16: float32 holds both
    ("other", F32, F32), (F32, "other", F32),
])
def test_op_under_autocast_of_the_other_16_bit_type(op, device, region, feats_type, points_type, runs_in):
    other = BF16 if region == F16 else F16
    ft, pt, want = (other if t == "other" else t for t in (feats_type, points_type, runs_in))
    feats, points = inputs(40, 67, device, ft)[0], inputs(40, 67, device, pt)[1]
    with torch.autocast(device, dtype=region):
        out = torch.ops.ch05.trilinear(feats, points)
    assert out.dtype == want, (f"under torch.autocast({device!r}, dtype={region}), feats {ft} and points {pt} gave "
                               f"a {out.dtype} result; expected {want}")
    check_result(out, reference_out(feats, points), want, f"out under autocast {region} ({ft}, {pt})")
    grad_out = torch.randn(40, 67, dtype=torch.float64).to(device=device, dtype=want)
    out.backward(grad_out)
    ref_feats, ref_points = REFERENCE.trilinear_grads(grad_out, feats, points)
    for name, t, ref in (("feats", feats, ref_feats), ("points", points, ref_points)):
        assert t.grad.dtype == t.dtype, f"{name}.grad is {t.grad.dtype}; expected {t.dtype}, the dtype of {name}"
        if t.dtype == want:
            check_result(t.grad, ref, want, f"{name}.grad under autocast {region}")
        else:
            assert_rounded(t.grad, ref, ulps=1, what=f"{name}.grad under autocast {region}")


def test_autocast_leaves_float64_to_the_ops_checks(ext):
    """Autocast casts no float64 tensor: float64 feats with 16-bit points get the op's own message."""
    feats, points = inputs(4, 3, dtype=torch.float64, which="none")[0], inputs(4, 3, dtype=F16, which="none")[1]
    for region in (F16, BF16):
        with torch.autocast("cpu", dtype=region), expect_error(
                r"trilinear: points must have the dtype of feats \(Double\), got Half"):
            torch.ops.ch05.trilinear(feats, points)


# ---------------------------------------------------------------------------
# The kernels are chapter 04's.


def _kernels_of_chapter_04(name):
    """04_backward/csrc/<name> as chapter 05 carries it: no exercise fences, no comparison kernels."""
    out = []
    for line in (ROOT / "04_backward" / "csrc" / name).read_text().splitlines(keepends=True):
        text = line.strip()
        if text.startswith("// BEGIN SOLUTION") or text.startswith("// END SOLUTION") or text.startswith("// STUB:"):
            continue
        if text.startswith("// For comparison only"):  # the comparison kernels close the file
            while out and out[-1].strip() in ("", "// " + "-" * 75):
                out.pop()
            break
        out.append(line)
    return "".join(out).replace("// Chapter 04:", "// Chapter 05:", 1)


@pytest.mark.parametrize("name", ["trilinear_cpu.cpp", "trilinear_cuda.cu", "pack.cuh"])
def test_kernels_are_chapter_04s(name):
    """The operator runs chapter 04's best kernels (16-byte packs on the GPU), not a slower copy of them."""
    path = ROOT / "05_autograd" / "csrc" / name
    assert path.is_file(), f"{path} is missing"
    ours, theirs = path.read_text().splitlines(), _kernels_of_chapter_04(name).splitlines()
    for i, (a, b) in enumerate(zip(ours, theirs), start=1):
        assert a == b, f"05_autograd/csrc/{name}:{i} differs from chapter 04's:\n  05: {a}\n  04: {b}"
    assert len(ours) == len(theirs), f"05_autograd/csrc/{name}: {len(ours)} lines, chapter 04's has {len(theirs)}"


# ---------------------------------------------------------------------------
# Fake quantisation: the kernel.

QDTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
OPMATH = {torch.float64: torch.float64, torch.float32: torch.float32, torch.float16: torch.float32,
          torch.bfloat16: torch.float32}
# (scale, zero_point, quant_min, quant_max): int8, uint8 with an odd zero point, 4 bits, a narrow odd range.
# 0.07 and 0.3 have inverses that round differently in float and in double (0.1, 0.25 and 1.0 do not).
# 1.7 and 0.03: their inverses in float and in double-then-rounded differ (as for about a quarter of scales).
GRIDS = [(0.1, 0, -128, 127), (0.07, 131, 0, 255), (0.25, -3, -8, 7), (0.3, 1, -5, 5), (1.7, 0, -128, 127),
         (0.03, 5, -20, 100)]


def assert_same_bits(out, expected, what):
    """assert_bitwise, except that a NaN matches any NaN (conversions to bfloat16 may set other payload bits)."""
    nan = expected.cpu().isnan()
    assert torch.equal(out.cpu().isnan(), nan), f"{what}: NaN where none is expected, or a NaN lost (NaN must stay NaN)"
    assert_bitwise(out.cpu()[~nan], expected.cpu()[~nan], what)


def fake_quantize_reference(x, scale, zero_point, quant_min, quant_max):
    """The rule in plain PyTorch, in the arithmetic type (float for float16/bfloat16): (out, mask)."""
    t = OPMATH[x.dtype]
    xs = x.detach().cpu().to(t)
    s = torch.tensor(scale, dtype=t)
    inv = torch.tensor(1, dtype=t) / s
    q = torch.round(xs * inv) + zero_point  # torch.round: ties to even
    mask = (q >= quant_min) & (q <= quant_max)
    out = (q.clamp(quant_min, quant_max) - zero_point) * s  # torch.clamp lets NaN through
    return out.to(x.dtype), mask


def quantize_inputs(dtype, scale, zero_point, quant_min, quant_max):
    """Values on both sides of every level and of every tie (k + 1/2) * scale, at the range's ends and outside,
    signed zeros, tiny values of both signs, infinities, NaN, and random values."""
    t = OPMATH[dtype]
    k = torch.arange(quant_min - zero_point - 3, quant_max - zero_point + 4, dtype=torch.float64)[:300]
    centres = torch.cat([k * scale, (k + 0.5) * scale]).to(t)
    near = torch.cat([centres, torch.nextafter(centres, centres + 1), torch.nextafter(centres, centres - 1)])
    special = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 0.2 * scale, -0.2 * scale, 0.49 * scale, -0.49 * scale,
                            float("inf"), float("-inf"), float("nan"), 1e30, -1e30], dtype=torch.float64)
    rand = torch.randn(2000, dtype=torch.float64) * scale * (quant_max - quant_min) / 3
    return torch.cat([near.double(), special, rand]).to(dtype)


@pytest.mark.exercise("fake-quantize")
@pytest.mark.parametrize("grid", GRIDS, ids=[f"scale{s}-zp{z}-[{a},{b}]" for s, z, a, b in GRIDS])
def test_fake_quantize_bitwise(ext, device, dtype, grid):
    x = quantize_inputs(dtype, *grid).to(device)
    with poisoned_empty():
        out, mask = ext.fake_quantize(x, *grid)
    ref_out, ref_mask = fake_quantize_reference(x, *grid)
    assert_same_bits(out, ref_out, f"fake_quantize {dtype} (ties to even, signed zeros, NaN and clamping included)")
    assert mask.dtype == torch.bool, f"mask: dtype {mask.dtype}, expected torch.bool"
    assert_mask(mask, ref_mask, f"mask of fake_quantize {dtype}, grid {grid}", inputs=x)


@pytest.mark.exercise("fake-quantize")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["float32", "float16", "bfloat16"])
def test_fake_quantize_matches_pytorch(ext, device, dtype):
    # PyTorch's own fake quantisation, for finite inputs (it turns NaN into a level).
    for grid in GRIDS:
        x = quantize_inputs(dtype, *grid).to(device)
        x = x[torch.isfinite(x)]
        out, mask = ext.fake_quantize(x, *grid)
        ref_out, ref_mask = torch.ops.aten.fake_quantize_per_tensor_affine_cachemask(x, *grid)
        assert_bitwise(out, ref_out, f"fake_quantize vs torch.fake_quantize_per_tensor_affine, {dtype}, grid {grid}")
        assert_mask(mask, ref_mask, f"mask vs PyTorch's, {dtype}, grid {grid}", inputs=x)


@pytest.mark.exercise("fake-quantize")
def test_fake_quantize_large_parallel(ext, device):
    """More values than one parallel_for chunk (32768 on the CPU), on several threads: every chunk
    must work on its own elements [begin, end)."""
    grid = GRIDS[1]
    x = (torch.randn(200_003, dtype=torch.float64) * 10).float().to(device)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(max(threads, 2))
        out, mask = ext.fake_quantize(x, *grid)
    finally:
        torch.set_num_threads(threads)
    ref_out, ref_mask = torch.ops.aten.fake_quantize_per_tensor_affine_cachemask(x, *grid)
    assert_bitwise(out, ref_out, f"fake_quantize of {x.numel()} values on {max(threads, 2)} threads vs PyTorch's")
    assert_mask(mask, ref_mask, f"mask of {x.numel()} values", inputs=x)


@pytest.mark.exercise("fake-quantize")
def test_fake_quantize_layouts(ext, device):
    grid = GRIDS[1]
    x = quantize_inputs(torch.float64, *grid)[:2400].reshape(60, 40).to(device)
    for name, v in {**layouts(x), "expanded": x[:1].expand(5, 40)}.items():
        out, mask = ext.fake_quantize(v, *grid)
        ref_out, ref_mask = fake_quantize_reference(v, *grid)
        assert_same_bits(out, ref_out, f"fake_quantize of x {name}")
        assert torch.equal(mask.cpu(), ref_mask), f"mask of x {name}"
    out, mask = ext.fake_quantize(torch.empty(0, 3, device=device), *GRIDS[0])
    assert out.shape == mask.shape == (0, 3)


BAD_QUANTIZE = [
    ("int x", lambda: (torch.ones(3, dtype=torch.int32), 0.1, 0, -128, 127),
     "fake_quantize: x must be float64, float32, float16 or bfloat16, got Int"),
    ("float8 x", lambda: (torch.zeros(3, dtype=F8), 0.1, 0, -128, 127), "fake_quantize: x must be float64"),
    ("scale 0", lambda: (torch.ones(3), 0.0, 0, -128, 127), "fake_quantize: scale must be a positive"),
    ("scale < 0", lambda: (torch.ones(3), -0.1, 0, -128, 127), "fake_quantize: scale must be a positive"),
    ("scale nan", lambda: (torch.ones(3), float("nan"), 0, -128, 127), "fake_quantize: scale must be a positive"),
    ("scale inf", lambda: (torch.ones(3), float("inf"), 0, -128, 127), "fake_quantize: scale must be a positive"),
    ("scale subnormal", lambda: (torch.ones(3), 1e-40, 0, -128, 127), "fake_quantize: scale must be a positive"),
    ("min > max", lambda: (torch.ones(3), 0.1, 0, 5, 4), "fake_quantize: quant_min must not exceed quant_max"),
    ("zero point below", lambda: (torch.ones(3), 0.1, -129, -128, 127), "fake_quantize: zero_point must lie in"),
    ("zero point above", lambda: (torch.ones(3), 0.1, 256, 0, 255), "fake_quantize: zero_point must lie in"),
    ("levels beyond 2^24", lambda: (torch.ones(3), 0.1, 0, 0, 2**24 + 1), r"fake_quantize: quant_min and quant_max"),
]


@pytest.mark.parametrize("case, make, message", BAD_QUANTIZE, ids=[b[0] for b in BAD_QUANTIZE])
def test_fake_quantize_bad_inputs(ext, case, make, message):
    with expect_error(message, what=f"fake_quantize with {case}"):
        ext.fake_quantize(*make())


# ---------------------------------------------------------------------------
# Fake quantisation: the straight-through gradient.


def ste_reference_grad(x, grad_out, grid):
    """d fake_quantize / dx taken as 1 where the level was in range, 0 where it was clamped: grad_out * mask."""
    _, mask = fake_quantize_reference(x, *grid)
    return grad_out.detach().cpu() * mask


@pytest.mark.exercise("quantize-ste")
@pytest.mark.parametrize("grid", GRIDS[:2], ids=["int8", "uint8"])
def test_ste_gradient(ste, device, dtype, grid):
    x = quantize_inputs(dtype, *grid)
    x = x[~x.isnan()].to(device).requires_grad_()
    grad_out = torch.randn(x.shape, dtype=torch.float64).to(device=device, dtype=dtype)
    grad_out[::7] = -0.0
    out = ste.fake_quantize(x, *grid)
    assert_bitwise(out, fake_quantize_reference(x, *grid)[0], "fake_quantize output")
    out.backward(grad_out)
    assert_bitwise(x.grad, ste_reference_grad(x, grad_out, grid),
                   "x.grad: grad_out times 1 (level in range) or 0 (clamped); a product keeps -0.0 and NaN")
    if dtype != torch.float64:  # PyTorch's own STE, for comparison
        x2 = x.detach().clone().requires_grad_()
        torch.fake_quantize_per_tensor_affine(x2, *grid).backward(grad_out)
        assert_bitwise(x.grad, x2.grad, "x.grad vs torch.fake_quantize_per_tensor_affine's gradient")


@pytest.mark.exercise("quantize-ste")
def test_ste_saves_only_the_mask(ste):
    x = (torch.randn(50) * 10).requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (saved.append(t), t)[1], lambda t: t):
        ste.fake_quantize(x, 0.1)
    kinds = [(tuple(t.shape), t.dtype) for t in saved]
    assert kinds == [((50,), torch.bool)], f"saved for backward: {kinds}; the backward needs only the bool mask"


@pytest.mark.exercise("quantize-ste")
def test_ste_grad_out_layouts(ste, device):
    x = (torch.randn(30, 20, dtype=torch.float64, device=device) * 15).requires_grad_()
    for name, g in grad_out_layouts(30, 20, device, torch.float64).items():
        x.grad = None
        ste.fake_quantize(x, 0.1).backward(g)
        assert_bitwise(x.grad, ste_reference_grad(x, g, (0.1, 0, -128, 127)), f"x.grad with grad_out {name}")
    x.grad = None
    ste.fake_quantize(x, 0.1).sum().backward()
    assert_bitwise(x.grad, ste_reference_grad(x, torch.ones_like(x), (0.1, 0, -128, 127)), "x.grad of .sum()")


@pytest.mark.exercise("quantize-ste")
def test_ste_double_backward(ste, device):
    # The backward is grad_out * mask: differentiable. A gradient penalty through
    # fake_quantize must get its second-order term: with loss = sum(w * q(x)) and
    # g = dloss/dx = w * mask, d(loss + sum(g^2))/dw = q(x) + 2 w mask.
    grid = (0.1, 0, -128, 127)
    for dtype in (torch.float64, torch.float32):
        x = (torch.randn(200, dtype=torch.float64) * 10).to(device=device, dtype=dtype).requires_grad_()
        w = torch.randn(200, dtype=torch.float64).to(device=device, dtype=dtype).requires_grad_()
        q = ste.fake_quantize(x, *grid)
        loss = (q * w).sum()
        (gx,) = torch.autograd.grad(loss, x, create_graph=True)
        (loss + gx.square().sum()).backward()
        ref_q, mask = fake_quantize_reference(x, *grid)
        assert_bitwise(w.grad, ref_q + 2 * w.detach().cpu() * mask, f"d/dw of a gradient penalty, {dtype}")
        if dtype == torch.float32:  # the same through PyTorch's own fake quantisation
            w2 = w.detach().clone().requires_grad_()
            loss = (torch.fake_quantize_per_tensor_affine(x, *grid) * w2).sum()
            (gx,) = torch.autograd.grad(loss, x, create_graph=True)
            (loss + gx.square().sum()).backward()
            assert_bitwise(w.grad, w2.grad, "d/dw of a gradient penalty vs torch.fake_quantize_per_tensor_affine")
    x = (torch.randn(20, dtype=torch.float64) * 3).requires_grad_()
    assert torch.autograd.gradgradcheck(lambda t: ste.fake_quantize(t, 0.5, 0, -4, 4), (x,))


@pytest.mark.exercise("quantize-ste")
def test_fake_quantize_learns(ste):
    # Fit w so that fake_quantize(w) == 0.75 (a level). The STE lets the gradient
    # through the rounding; the first weight starts beyond the last level (7 * 0.25),
    # where the clamp's derivative is 0: it must not move.
    w = torch.tensor([0.1, -1.3, 2.6], requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    for _ in range(50):
        loss = ((ste.fake_quantize(w, 0.25, 0, -8, 7) - 0.75) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.testing.assert_close(ste.fake_quantize(w, 0.25, 0, -8, 7)[:2].detach(), torch.tensor([0.75, 0.75]))
    assert w[2].item() == pytest.approx(2.6), "a clamped value has no gradient: it must not move"


# ---------------------------------------------------------------------------
# FeatureGrid.


def grid_reference(values, resolution, points):
    """FeatureGrid by F.grid_sample (mode="bilinear" on a 5-D input is trilinear; align_corners=True puts -1 and 1
    on the first and last vertex), on the vertex grid padded by one vertex on every side whose value extends
    the outer cell linearly (2 v[0] - v[1], 2 v[R] - v[R-1]). grid_sample picks cell floor(s), as FeatureGrid
    does; the padding makes "the last cell for s = R, extrapolate outside" come out as FeatureGrid defines it,
    value and gradients. Differentiable in values and points."""
    R1 = resolution + 1
    v = values.reshape(R1, R1, R1, -1)  # (x, y, z, F)
    for axis in range(3):
        first, second = v.narrow(axis, 0, 1), v.narrow(axis, 1, 1)
        last, before = v.narrow(axis, R1 - 1, 1), v.narrow(axis, R1 - 2, 1)
        v = torch.cat([2 * first - second, v, 2 * last - before], axis)
    volume = v.permute(3, 2, 1, 0)[None]  # (1, F, D=z, H=y, W=x)
    s = (points + 1) * (0.5 * resolution)  # FeatureGrid's grid units (the spec's formula)
    g = (s + 1) / (0.5 * (resolution + 2)) - 1  # the padded grid's [-1, 1]: vertex i at s = i sits at i + 1
    out = Fn.grid_sample(volume, g[None, :, None, None, :], mode="bilinear", align_corners=True)
    return out[0, :, :, 0, 0].t()  # (N, F)


def boundary_points(resolution, device):
    """Points with some coordinates exactly on vertex planes (s integer in float64), on the far face (p = 1), on
    the near face (p = -1), in corners, and slightly outside the cube."""
    R = resolution
    plane = [(2 * i / R) - 1 for i in range(R + 1)]
    plane = [p for p in plane if ((p + 1) * (0.5 * R)) == round((p + 1) * (0.5 * R))]  # s exactly integer
    torch.manual_seed(5)
    rows = []
    for p in plane:
        for axis in range(3):
            r = (torch.rand(3, dtype=torch.float64) * 2 - 1).tolist()
            r[axis] = p
            rows.append(r)
    rows += [[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [1.0, -1.0, 0.3], [-1.0, 1.0, 1.0], [plane[1], 1.0, plane[-2]],
             [1.02, 0.1, -0.3], [-1.03, 0.5, 0.5], [0.2, 1.01, -1.04]]
    return torch.tensor(rows, dtype=torch.float64, device=device)


@pytest.mark.exercise("grid-lookup")
def test_feature_grid_matches_reference(grid_module, device):
    torch.manual_seed(1)
    R = 6
    grid = grid_module.FeatureGrid(resolution=R, features=3, device=device, dtype=torch.float64)
    points = torch.cat([torch.rand(400, 3, dtype=torch.float64, device=device) * 2 - 1, boundary_points(R, device)])
    points.requires_grad_()
    weight = torch.randn(points.shape[0], 3, dtype=torch.float64, device=device)
    out = grid(points)
    (out * weight).sum().backward()
    values = grid.values.detach().clone().requires_grad_()
    p = points.detach().clone().requires_grad_()
    ref = grid_reference(values, R, p)
    (ref * weight).sum().backward()
    assert_f64(out, ref, "FeatureGrid output (random points, cell boundaries, far face, outside)")
    assert grid.values.grad is not None, "FeatureGrid: the grid's values got no gradient (is the output computed from them?)"
    assert points.grad is not None, ("FeatureGrid: the points require a gradient and got none: the output must "
                                     "depend on them through autograd (the local coordinates from s, not s.detach())")
    assert_f64(grid.values.grad, values.grad, "FeatureGrid values.grad")
    assert_f64(points.grad, p.grad, "FeatureGrid points.grad (one-sided at cell boundaries: the cell floor(s))")


@pytest.mark.exercise("grid-lookup")
def test_cell_lookup_at_boundaries(grid_module):
    R = 4
    points = torch.tensor([[-1.0, -0.5, 0.0], [1.0, 0.5, -1.0], [0.25, 1.0, 0.999], [-1.5, 2.0, -3.0]],
                          dtype=torch.float64)
    index, local = grid_module.cell_lookup(points, R)
    # Cells by hand: s = (p + 1) * R / 2 = (0, 1, 2), (4, 3, 0), (2.5, 4, 3.998), (-1, 6, -4); lower vertex
    # floor(s), the far face (s = R) in the last cell R - 1, and points cells away from the cube in the
    # first or last cell, extrapolated (local beyond [-1, 1]).
    lower = [(0, 1, 2), (3, 3, 0), (2, 3, 3), (0, 3, 0)]
    expect_local = torch.tensor([[-1.0, -1, -1], [1, -1, -1], [0.0, 1, 2 * (3.998 - 3) - 1], [-3.0, 5, -9]],
                                dtype=torch.float64)
    what = ["vertex planes", "the far face x = 1 (s = R: the last cell, R - 1)", "the far face y = 1 (the last cell)",
            "outside the cube (the nearest cell, extrapolated)"]
    R1 = R + 1
    expect_index = torch.tensor([[((i + (k >> 2 & 1)) * R1 + j + (k >> 1 & 1)) * R1 + l + (k & 1) for k in range(8)]
                                 for i, j, l in lower])
    assert index.shape == (4, 8), f"vertex indices of 4 points: shape {tuple(index.shape)}, expected (4, 8)"
    wrong = [k for k in range(4) if not torch.equal(index[k].cpu().long(), expect_index[k])]
    assert not wrong, (
        f"R = {R}: vertex indices wrong for {len(wrong)} of 4 points, first at ({wrong[0]},): point "
        f"{points[wrong[0]].tolist()} on {what[wrong[0]]}: got {index[wrong[0]].tolist()}, expected "
        f"{expect_index[wrong[0]].tolist()} (lower vertex {lower[wrong[0]]})")
    assert_f64(local, expect_local, "local coordinates", rtol=1e-12)


@pytest.mark.exercise("grid-lookup")
@pytest.mark.parametrize("R", [300, 2000])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_cell_lookup_large_resolution(grid_module, dtype, R):
    """Fine grids: from R = 256 on, (R+1)^3 > 2^24, so a flat index computed in float32 is rounded;
    at R = 2000 it passes 2^31 (8e9 vertices), so int32 overflows. The indices must be exact int64,
    from the cell that the contract's arithmetic (float32 for float32 points) gives."""
    points = torch.cat([(torch.rand(2000, 3, dtype=torch.float64) * 2 - 1),
                        torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [1.0, 0.999, -0.999]],
                                     dtype=torch.float64)]).to(dtype)
    index, _ = grid_module.cell_lookup(points, R)
    s = (points + 1) * (0.5 * R)  # the contract's arithmetic, in the points' type
    cell = s.floor().clamp(0, R - 1).long()
    corners = torch.tensor([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)])
    vertex = cell[:, None, :] + corners
    expect = (vertex[..., 0] * (R + 1) + vertex[..., 1]) * (R + 1) + vertex[..., 2]
    wrong = (index.cpu().long() != expect).any(dim=1).nonzero().flatten().tolist()
    assert index.dtype == torch.int64 and not wrong, (
        f"R = {R}, {dtype} points: {len(wrong)} of {len(points)} points get wrong vertex indices, e.g. point "
        f"{points[wrong[0]].tolist() if wrong else ''}: {index[wrong[0]].tolist() if wrong else ''}, expected "
        f"{expect[wrong[0]].tolist() if wrong else ''} (index arithmetic in floating point or in 32 bits?)")


def check_lookup_types(grid_module, points, R):
    """cell_lookup's output types for these points (the type the lookup computes in); returns the local
    coordinates' type. The tests of values built on the lookup check this first: a lookup in a 16-bit type
    shows there as values far off, which reads as an index bug."""
    dtype = points.dtype
    index, local = grid_module.cell_lookup(points, R)
    want = torch.float64 if dtype == torch.float64 else torch.float32
    assert index.dtype == torch.int64, f"indices of {dtype} points are {index.dtype}, expected torch.int64"
    assert local.dtype == want, (f"local coordinates of {dtype} points are {local.dtype}, expected {want}: the "
                                 "lookup must compute s and the local coordinates in float32 for 16-bit points "
                                 "(in float16/bfloat16 they lose the position inside the cell)")
    return want


@pytest.mark.exercise("grid-lookup")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16],
                         ids=["float64", "float32", "float16", "bfloat16"])
def test_cell_lookup_types(grid_module, dtype):
    """cell_lookup's contract: int64 indices; local coordinates in float64 for float64 points and in
    float32 otherwise, computed in that type (R = 100: rounded to 16 bits they would be off by up
    to 5e-4, in float32 by 2e-5 at most)."""
    R = 100
    points = (torch.rand(2000, 3, dtype=torch.float64) * 2 - 1).to(dtype)
    index, local = grid_module.cell_lookup(points, R)
    want = check_lookup_types(grid_module, points, R)
    s = (points.double() + 1) * (R / 2)
    ref = (s - s.floor().clamp(0, R - 1)) * 2 - 1
    err = (local.double() - ref).abs().max().item()
    limit = 1e-12 if dtype == torch.float64 else 4e-5
    assert err <= limit, (f"local coordinates of {dtype} points off by up to {err:.2e} from the exact value (allowed "
                          f"{limit:.0e}): computed or stored in a narrower type than {want}?")


@pytest.mark.exercise("grid-lookup")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["float32", "float16", "bfloat16"])
def test_feature_grid_low_precision(grid_module, dtype):
    # A fine grid: in float16/bfloat16 the grid coordinate s = (p + 1) / 2 * R itself would lose the position
    # inside the cell. The lookup works in float32 (or float64 for float64 points); only the local coordinates
    # passed to the op are rounded to the grid's dtype.
    torch.manual_seed(2)
    R = 100
    grid = grid_module.FeatureGrid(resolution=R, features=4, dtype=dtype)
    points = (torch.rand(3000, 3) * 2 - 1).to(dtype)
    check_lookup_types(grid_module, points, R)
    out = grid(points)
    assert out.dtype == dtype
    ref = grid_reference(grid.values.detach().double(), R, points.double())
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    assert_close(out, ref.to(dtype), dtype, "FeatureGrid output", tol=tol)


# FeatureGrid's own argument checks (outside the exercise): each bad argument gets a message of its own.
@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(resolution=4.0), TypeError, r"resolution must be an int, got float 4.0"),
    (dict(resolution=True), TypeError, r"resolution must be an int, got bool True"),
    (dict(features="8"), TypeError, r"features must be an int, got str '8'"),
    (dict(resolution=0), ValueError, r"resolution must be >= 1, got 0"),
    (dict(features=-2), ValueError, r"features must be >= 1, got -2"),
    (dict(init_scale=float("nan")), ValueError, r"init_scale .* must be finite and >= 0, got nan"),
    (dict(init_scale=-0.1), ValueError, r"init_scale .* must be finite and >= 0, got -0.1"),
    (dict(init_scale="0.1"), TypeError, r"init_scale must be a real number, got str"),
    (dict(dtype=torch.int64), TypeError, r"dtype must be float64, float32, float16 or bfloat16, got torch.int64"),
    (dict(dtype=torch.complex64), TypeError, r"dtype must be .*, got torch.complex64"),
    (dict(dtype=torch.float8_e4m3fn), TypeError, r"dtype must be .*, got torch.float8_e4m3fn"),
], ids=lambda v: ",".join(f"{k}={a}" for k, a in v.items()) if isinstance(v, dict) else "")
def test_feature_grid_bad_arguments(grid_module, kwargs, exc, message):
    args = dict(resolution=4, features=3) | kwargs
    with expect_error("FeatureGrid: " + message, exc, f"FeatureGrid({args})"):
        grid_module.FeatureGrid(**args)


@pytest.mark.parametrize("make, exc, message", [
    (lambda: torch.rand(5, 3, dtype=torch.complex64), TypeError,
     r"points must be float64, float32, float16 or bfloat16, got torch.complex64"),
    (lambda: torch.randint(-1, 2, (5, 3)), TypeError, r"points must be .*, got torch.int64"),
    (lambda: torch.rand(5, 3).to(torch.float8_e5m2), TypeError, r"points must be .*, got torch.float8_e5m2"),
    (lambda: torch.rand(5, 3, device="meta"), ValueError, r"points must be on the grid's device, cpu, got meta"),
    (lambda: torch.rand(5, 2), ValueError, r"points must have shape \(N, 3\), got \(5, 2\)"),
], ids=["complex", "int64", "float8", "device", "shape"])
def test_feature_grid_bad_points(grid_module, make, exc, message):
    grid = grid_module.FeatureGrid(resolution=4, features=3)
    with expect_error("FeatureGrid: " + message, exc, "FeatureGrid(points)"):
        grid(make())


def test_feature_grid_bad_values_dtype(grid_module):
    grid = grid_module.FeatureGrid(resolution=2, features=3)
    grid.values.data = grid.values.data.to(torch.complex64)  # as module.to(torch.complex64) would
    with expect_error(r"FeatureGrid: the grid's values must be float64, float32, float16 or bfloat16, got "
                      r"torch.complex64", TypeError, "FeatureGrid(points)"):
        grid(torch.rand(5, 3))


@pytest.mark.exercise("grid-lookup")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["float64", "float32", "bfloat16"])
def test_feature_grid_non_finite_points(grid_module, device, dtype):
    """A NaN coordinate gives NaN features (no IndexError from floor(NaN) converted to an integer), an infinite one
    non-finite features; the other points are untouched, values and gradients."""
    torch.manual_seed(3)
    R, inf, nan = 4, float("inf"), float("nan")
    grid = grid_module.FeatureGrid(resolution=R, features=3, device=device, dtype=torch.float64)
    bad = torch.tensor([[nan, 0.1, 0.2], [0.3, nan, nan], [inf, 0.0, 0.5], [0.1, -inf, 0.4]], dtype=torch.float64)
    good = torch.rand(30, 3, dtype=torch.float64) * 2 - 1
    points = torch.cat([good[:10], bad, good[10:]]).to(device=device, dtype=dtype).requires_grad_()
    check_lookup_types(grid_module, good.to(device=device, dtype=dtype), R)
    is_bad = torch.zeros(len(points), dtype=torch.bool)
    is_bad[10:14] = True
    out = grid(points)
    assert out.shape == (34, 3)
    finite = torch.isfinite(out.detach().cpu())
    assert not finite[is_bad].any(), f"rows of non-finite points: {out[10:14].tolist()}; expected NaN or inf"
    keep = ~is_bad.to(device)
    (out[keep] * 1.5).sum().backward()
    p = points.detach()[keep].double().requires_grad_()
    ref = grid_reference(grid.values.detach(), R, p)
    (ref * 1.5).sum().backward()
    if dtype == torch.float64:
        assert_f64(out[keep], ref, "FeatureGrid output of the finite points")
        assert_f64(points.grad[keep], p.grad, "points.grad of the finite points")
    else:  # the lookup in float32
        assert_close(out[keep].float(), ref.float(), torch.float32, "FeatureGrid output of the finite points", tol=1e-5)
        assert_close(points.grad[keep].float(), p.grad.to(dtype).float(), torch.float32,
                     "points.grad of the finite points", tol=1e-2 if dtype == torch.bfloat16 else 1e-5)


@pytest.mark.exercise("grid-lookup")
def test_feature_grid_on_meta(grid_module):
    """On the meta device (a model's shapes without memory) the module gives the output's metadata."""
    grid = grid_module.FeatureGrid(resolution=3, features=5, device="meta", dtype=torch.bfloat16)
    out = grid(torch.empty(7, 3, device="meta"))
    assert out.shape == (7, 5) and out.dtype == torch.bfloat16 and out.device.type == "meta"


@pytest.mark.exercise("grid-lookup")
def test_feature_grid_gradcheck(grid_module):
    grid = grid_module.FeatureGrid(resolution=3, features=2, dtype=torch.float64)
    points = (torch.rand(20, 3, dtype=torch.float64) * 1.8 - 0.9).requires_grad_()
    values = grid.values.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda v, p: torch.func.functional_call(grid, {"values": v}, (p,)), (values, points))


@pytest.mark.exercise("grid-lookup")
def test_feature_grid_training_reduces_loss(grid_module):
    grid = grid_module.FeatureGrid(resolution=4, features=1)
    opt = torch.optim.Adam(grid.parameters(), lr=0.05)
    points = torch.rand(512, 3) * 2 - 1
    target = (torch.sin(3 * points[:, 0]) * points[:, 1] + points[:, 2] ** 2)[:, None]
    losses = []
    for _ in range(30):
        loss = Fn.mse_loss(grid(points), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0], f"loss {losses[0]:.4f} -> {losses[-1]:.4f}: training does not learn"


@pytest.mark.exercise("grid-lookup")
def test_feature_grid_compiles(grid_module, device):
    grid = grid_module.FeatureGrid(resolution=4, features=3, device=device)
    points = torch.rand(100, 3, device=device) * 2 - 1
    torch._dynamo.reset()
    compiled = torch.compile(grid, fullgraph=True, backend=BACKEND[device])
    loss = compiled(points).square().sum()
    (g,) = torch.autograd.grad(loss, grid.values)
    (g_ref,) = torch.autograd.grad(grid(points).square().sum(), grid.values)
    torch.testing.assert_close(loss, grid(points).square().sum())
    torch.testing.assert_close(g, g_ref)


# ---------------------------------------------------------------------------
# Route 3: the forward in Triton (trilinear_triton.py), exercise triton-forward. With a GPU the
# kernel runs natively on CUDA tensors. Without one it runs in Triton's interpreter on CPU
# tensors: conftest.py sets TRITON_INTERPRET=1 before anything imports triton (triton reads it
# then). Small shapes: the interpreter runs each program of the grid in numpy, one after another.

# (N, F): partial tiles along N and F (blocks(F) gives BLOCK_F 128 and 4, BLOCK_N 16 and 512),
# two tiles along F, a single element
TRITON_SHAPES = [(40, 67), (300, 3), (3, 130), (1, 1)]


@pytest.fixture(scope="module")
def tri(op, chapter_source):
    pytest.importorskip("triton", reason="Triton is not installed (torch's Linux wheels bring it)")
    return build.load_python(chapter_source, "trilinear_triton")


@pytest.fixture(scope="module")
def tdevice(tri):
    """Where the Triton kernel runs here: CUDA natively, or the CPU in the interpreter."""
    if tri.INTERPRETED:
        return "cpu"
    if not GPU:
        pytest.skip("no GPU, and Triton's interpreter is off (TRITON_INTERPRET=1 must be set before triton is imported)")
    return "cuda"


def guarded(shape, dtype, device, guard):
    """A contiguous tensor of `shape` at the start of a larger buffer; the buffer's tail (`guard`
    elements of random values) must stay as it is."""
    numel = math.prod(shape)
    buffer = torch.randn(numel + guard, dtype=torch.float64).to(device=device, dtype=dtype)
    return buffer[:numel].view(shape), buffer[numel:]


def guarded_inputs(tri, N, F, device):
    """feats and points for the Triton kernel, each at the start of a buffer that reaches past every
    tile of its grid (so that a read that strays stays in memory that exists: the interpreter checks
    no bounds), and the kernel's tile and that reach in elements."""
    block_n, block_f = tri.blocks(F)
    reach = (N + block_n) * max(F, block_f) * 8
    feats, _ = guarded((N, 8, F), torch.float32, device, reach)
    points, _ = guarded((N, 3), torch.float32, device, reach)
    points.uniform_(-1, 1)
    return feats, points, (block_n, block_f), reach


@pytest.mark.exercise("triton-forward")
@pytest.mark.parametrize("N, F", TRITON_SHAPES)
def test_triton_kernel_writes_out_only(tri, tdevice, N, F):
    # The kernel itself (tri.launch), on buffers that reach past every tile of the grid: elements
    # past the end of out must stay untouched (a tile's store needs its mask).
    feats, points, (block_n, block_f), reach = guarded_inputs(tri, N, F, tdevice)
    out, tail = guarded((N, F), torch.float32, tdevice, reach)
    out.fill_(float("nan"))
    before = tail.clone()
    tri.launch(feats, points, out)
    changed = int((tail != before).sum())
    assert changed == 0, (f"N={N}, F={F}: the kernel wrote {changed} elements past the end of out (tiles of "
                          f"{block_n} x {block_f}): every store of a partial tile needs its mask")
    check_result(out, reference_out(feats, points), torch.float32, f"out (N={N}, F={F})")


@pytest.mark.exercise("triton-forward")
@pytest.mark.parametrize("N, F", TRITON_SHAPES)
def test_triton_kernel_reads_inside_its_inputs(tri, tdevice, N, F, monkeypatch):
    """Every element a load takes (its mask on) lies inside feats or points. A row past N or a
    feature past F is never stored, so only the addresses show a load that skipped the tile's mask:
    on a GPU it reads another allocation or faults. Watched in Triton's interpreter, where each load
    is a numpy array of addresses (on a GPU, compute-sanitizer's memcheck finds the same)."""
    import numpy as np

    if not tri.INTERPRETED:
        pytest.skip("watches the interpreter's loads; on a GPU, compute-sanitizer --tool memcheck finds these")
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is None or not hasattr(builder, "create_masked_load"):
        pytest.skip("this Triton's interpreter has no InterpreterBuilder.create_masked_load to watch")
    loads = []
    original = builder.create_masked_load

    def watched(self, ptrs, mask, *args, **kwargs):  # an unmasked tl.load comes here too (create_load)
        addresses = np.asarray(ptrs.data).astype(np.uint64)
        taken = np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)
        loads.append((addresses[taken], ptrs.get_element_ty().primitive_bitwidth // 8))
        return original(self, ptrs, mask, *args, **kwargs)

    monkeypatch.setattr(builder, "create_masked_load", watched)
    feats, points, (block_n, block_f), _ = guarded_inputs(tri, N, F, tdevice)
    out = torch.empty(N, F)
    tri.launch(feats, points, out)
    inside = [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in (feats, points)]
    stray = {}
    for addresses, size in loads:
        ok = np.zeros(addresses.shape, dtype=bool)
        for lo, hi in inside:
            ok |= (addresses >= lo) & (addresses + size <= hi)
        for a in addresses[~ok][:1].tolist():
            name, (lo, hi) = min(zip(("feats", "points"), inside), key=lambda r: abs(a - r[1][1]))
            stray.setdefault(name, [0, a - hi])[0] += int((~ok).sum())
    assert loads, "the watched interpreter saw no load: the kernel was not run through it"
    assert not stray, (f"N={N}, F={F} (tiles of {block_n} x {block_f}): loads outside the inputs: " + "; ".join(
        f"{n} elements outside {name} (the first {off:+d} bytes from its end)" for name, (n, off) in stray.items())
        + ". A load of a row past N or a feature past F needs the tile's mask, as the store does")


@pytest.mark.exercise("triton-forward")
@pytest.mark.parametrize("N, F", TRITON_SHAPES)
def test_triton_forward(tri, tdevice, dtype, N, F):
    feats, points = inputs(N, F, tdevice, dtype, which="none")
    with poisoned_empty():
        out = tri.trilinear(feats, points)
    assert_property(out.device.type, tdevice, "device type", "triton trilinear")
    assert_property(tuple(out.shape), (N, F), "shape", "triton trilinear")
    assert out.is_contiguous(), f"triton trilinear: strides {out.stride()} for shape {(N, F)}, expected contiguous"
    check_result(out, reference_out(feats, points), dtype, f"out (N={N}, F={F})")


@pytest.mark.exercise("triton-forward")
def test_triton_forward_strided_inputs(tri, tdevice):
    # The kernel takes the strides of feats and points: no copy to a contiguous layout.
    N, F = 21, 10
    base, pts = inputs(N, 2 * F, tdevice, torch.float64, which="none")
    layouts = {
        "feats every other feature": (base[:, :, ::2], pts[:, :3]),
        "feats (N, F, 8) transposed": (base[:, :, :F].transpose(1, 2).contiguous().transpose(1, 2), pts),
        "points (3, N) transposed": (base[:, :, F:], pts.t().contiguous().t()),
        "points every other row": (base[:, :, :F], torch.cat([pts, pts], 1).reshape(2 * N, 3)[::2]),
    }
    for name, (feats, points) in layouts.items():
        with poisoned_empty():
            out = tri.trilinear(feats, points)
        assert_f64(out, reference_out(feats, points), f"out with {name}")


@pytest.mark.exercise("triton-forward")
@pytest.mark.parametrize("which", WHICH)
def test_triton_gradients(tri, tdevice, dtype, which):
    # The backward is route 2's (its formula, the backward operator): the output is the kernel's.
    check_gradients(tri.trilinear, tdevice, dtype, which)


@pytest.mark.exercise("triton-forward")
def test_triton_gradcheck(tri, tdevice):
    # fast_mode: a few directional derivatives instead of the whole Jacobian (the interpreter is slow)
    feats, points = inputs(5, 4, tdevice, torch.float64)
    assert torch.autograd.gradcheck(tri.trilinear, (feats, points), fast_mode=True)


@pytest.mark.exercise("triton-forward")
def test_triton_torch_compile_fullgraph(tri, tdevice):
    # inductor on a GPU (it compiles the kernel into its own generated code); aot_eager under the
    # interpreter (Dynamo and AOTAutograd trace the op's body; the interpreted launch is opaque).
    def loss_fn(feats, points, weight):
        return (tri.trilinear(feats * 2, points) * weight).sum()

    feats, points = inputs(33, 20, tdevice, torch.float64)
    weight = torch.randn(33, 20, device=tdevice, dtype=torch.float64)
    torch._dynamo.reset()
    compiled = torch.compile(loss_fn, fullgraph=True, backend=BACKEND[tdevice])
    loss = compiled(feats, points, weight)
    grad_feats, grad_points = torch.autograd.grad(loss, (feats, points))
    ref_feats, ref_points = REFERENCE.trilinear_grads(weight, feats * 2, points)
    assert_f64(loss.reshape(1), reference_out(feats * 2, points).mul(weight.cpu()).sum().reshape(1), "compiled loss")
    assert_f64(grad_feats, 2 * ref_feats, "compiled feats gradient")
    assert_f64(grad_points, ref_points, "compiled points gradient")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_triton_opcheck(tri, tdevice, dtype):
    feats, points = inputs(5, 7, tdevice, dtype)
    torch.library.opcheck(tri.trilinear_op, (feats, points))


def test_triton_export(tri, tdevice):
    class M(torch.nn.Module):
        def forward(self, feats, points):
            return tri.trilinear(feats, points).relu()

    # export keeps a triton_op as one node (its kernel is the backend's business); tracing needs no kernel run
    exported = torch.export.export(M(), inputs(4, 3, tdevice, which="none"))
    assert any(n.target is torch.ops.ch05_triton.trilinear.default for n in exported.graph.nodes)


@pytest.mark.parametrize("N, F", [(0, 5), (4, 0)])
def test_triton_empty(tri, tdevice, N, F):
    feats, points = inputs(N, F, tdevice)
    out = tri.trilinear(feats, points)
    assert_property(tuple(out.shape), (N, F), "shape", "triton trilinear")
    out.sum().backward()
    assert_property(tuple(feats.grad.shape), tuple(feats.shape), "shape", "feats.grad")
    assert_property(tuple(points.grad.shape), tuple(points.shape), "shape", "points.grad")


T_SHAPE = r"trilinear_triton: feats must have shape \(N, 8, F\) and points \(N, 3\)"
T_DTYPE = r"trilinear_triton: feats and points must have one dtype, float64, float32, float16 or bfloat16"
BAD_TRITON = [(case, make, T_SHAPE) for case, make, message, _ in BAD_FORWARD if message in (SHAPE, POINTS)] + [
    (case, make, T_DTYPE) for case, make, message, cuda in BAD_FORWARD if "dtype" in message or KIND in message]


@pytest.mark.parametrize("case, make, message", BAD_TRITON, ids=[c for c, *_ in BAD_TRITON])
def test_triton_bad_inputs(tri, tdevice, case, make, message):
    feats, points = (t.to(tdevice) for t in make())
    with expect_error(message, RuntimeError, what=f"the Triton op with {case}"):
        tri.trilinear(feats, points)
    # the same check at trace time (the op's body is its own fake implementation)
    with FakeTensorMode() as mode, expect_error(message, RuntimeError, what=f"the Triton op on fake tensors, {case}"):
        tri.trilinear(mode.from_tensor(feats), mode.from_tensor(points))


def test_triton_bad_devices(tri):
    if GPU:
        with expect_error("trilinear_triton: feats and points must be on the same device"):
            tri.trilinear(torch.randn(4, 8, 2, device="cuda"), torch.rand(4, 3))
    if not tri.INTERPRETED:  # without the interpreter, the CPU is refused with what to do about it
        with expect_error("trilinear_triton: tensors must be on a CUDA GPU, got cpu; CPU tensors run only in "
                          "Triton's interpreter"):
            tri.trilinear(torch.randn(4, 8, 2), torch.rand(4, 3))


def test_readme_tables_come_from_the_results():
    # README.md section 8: what `bench.py --readme` writes from the committed results file
    bench = build.load_python(ROOT / "05_autograd", "bench")
    path = ROOT / "results" / "05_autograd_cuda.json"
    doc = json.loads(path.read_text()) | {"path": str(path)}
    text = (ROOT / "05_autograd" / "README.md").read_text()
    for name, block in bench.tables(doc).items():
        start, end = bench.BLOCKS[name]
        assert f"{start}\n{block}{end}" in text, (f"README.md's {name} table differs from {path.name}; "
                                                  "regenerate it: python 05_autograd/bench.py --readme")
