"""Chapter 06: the bilinear resize operator, made a first-class PyTorch op.

The compiled library (csrc/, on the LibTorch stable ABI) declares the operators
torch.ops.ch06.* and registers the kernels. This file adds what is written in
Python:

* the public operators' implementation: check every argument, raising
  ValueError for a bad value and TypeError for a bad dtype (C++ code on the
  stable ABI can only raise RuntimeError), then call the kernel operator;
* a fake (meta) implementation of each op, with the same checks: output shape
  and dtype without computing anything, for torch.compile and
  torch.library.opcheck;
* an autograd formula: the backward op is the transpose of the forward, and the
  backward of the backward op is the forward again (so double backward works);

and the public function `upsample_bilinear`, shaped like F.interpolate.

It runs in two settings: installed (the wheel's package ch06_upsample, where it
sits next to the compiled ch06_upsample._C), or inside the course, where the
course's build helper compiles csrc/ first.
"""

from __future__ import annotations

import importlib
import math
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Sequence

import torch
from torch.utils._python_dispatch import is_in_torch_dispatch_mode


def _same_sources(a: Path, b: Path) -> bool:
    """Do two chapter folders hold the same csrc/, byte for byte?"""
    files = [sorted(p.relative_to(root) for p in (root / "csrc").rglob("*") if p.is_file()) for root in (a, b)]
    return files[0] == files[1] and all((a / p).read_bytes() == (b / p).read_bytes() for p in files[0])


def _extension() -> ModuleType:
    """The compiled library; loading it registers torch.ops.ch06.*.

    Installed, it is the package's _C. In the course, a library that is already
    loaded (by the tests' build) is reused rather than built and loaded a second
    time: an operator namespace can be registered once per process. One built
    from another folder is the right one when its sources are the same as ours
    (the build helper reuses the chapter's build for a copy with the same csrc/).
    """
    if __package__:  # ch06_upsample.upsample: the wheel's package
        return importlib.import_module(f"{__package__}._C")
    from coursekit import build, chapters

    here = Path(__file__).resolve().parent
    loaded = sys.modules.get(chapters.find(here).module)
    if loaded is None:
        return build.build(here)  # compiles csrc/ if needed
    source = getattr(loaded, "__course_build__", {}).get("source")
    if source is not None and Path(source) != here and not _same_sources(Path(source), here):
        raise RuntimeError(f"upsample: the operators of {source} are already loaded in this process; "
                           f"start a new Python process to use the ones in {here}")
    return loaded


WITH_CUDA = bool(getattr(_extension(), "with_cuda", False))  # were the CUDA kernels compiled?

MODES = ("align_corners", "half_pixel", "tf_legacy")
BACKWARDS = ("gather", "scatter")

_forward = torch.ops.ch06.upsample_bilinear2d
_backward = torch.ops.ch06.upsample_bilinear2d_backward
_forward_kernel = torch.ops.ch06._upsample_bilinear2d_kernel
_backward_kernel = torch.ops.ch06._upsample_bilinear2d_backward_kernel


# The checks. The public operators' implementation (eagerly) and their fake
# kernels (under torch.compile or FakeTensorMode, or on meta tensors, where only
# the fake runs) call the same functions, so a bad call fails the same way
# everywhere: same exception type, same message.

_DTYPE_NAMES = {  # c10's names for dtypes
    torch.bool: "Bool", torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int",
    torch.int64: "Long", torch.complex32: "ComplexHalf", torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble", torch.float8_e5m2: "Float8_e5m2", torch.float8_e4m3fn: "Float8_e4m3fn",
}
_FLOATS = (torch.float64, torch.float32, torch.float16, torch.bfloat16)  # what the kernels are compiled for


def _fail(op: str, message: str, exc: type[Exception] = ValueError):
    raise exc(f"{op}: {message}")


def _check_tensor(op: str, name: str, t: torch.Tensor) -> None:
    if t.dim() != 4:
        _fail(op, f"{name} must be 4-D (N, C, H, W), got shape {list(t.shape)}")
    if t.dtype not in _FLOATS:
        _fail(op, f"{name} must be float64, float32, float16 or bfloat16, got {_DTYPE_NAMES.get(t.dtype, t.dtype)}",
              TypeError)


def _check_hw(op: str, name: str, hw) -> None:
    if not (len(hw) == 2 and hw[0] >= 1 and hw[1] >= 1):
        _fail(op, f"{name} must be (H, W) with H >= 1 and W >= 1, got {list(hw)}")


def _check_scale(op: str, name: str, scale) -> None:
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        _fail(op, f"{name} must be a finite number > 0 or None, got {scale:g}")


def _check_mode(op: str, mode: str) -> None:
    if mode not in MODES:
        _fail(op, f'mode must be "align_corners", "half_pixel" or "tf_legacy", got "{mode}"')


def _check_method(op: str, method: str) -> None:
    if method not in BACKWARDS:
        _fail(op, f'backward method must be "gather" or "scatter", got "{method}"')


def _check_forward(x, size, mode, scale_h, scale_w, backward) -> None:
    op = "upsample_bilinear2d"
    _check_tensor(op, "x", x)
    _check_hw(op, "size", size)
    if x.shape[2] < 1 or x.shape[3] < 1:
        _fail(op, f"x must have H >= 1 and W >= 1 to interpolate from, got shape {list(x.shape)}")
    _check_scale(op, "scale_h", scale_h)
    _check_scale(op, "scale_w", scale_w)
    _check_mode(op, mode)
    _check_method(op, backward)  # only autograd uses it, but a typo should fail here, not in backward


def _check_backward(grad_out, input_size, mode, method, scale_h, scale_w) -> None:
    op = "upsample_bilinear2d_backward"
    _check_tensor(op, "grad_out", grad_out)
    _check_hw(op, "input_size", input_size)
    if grad_out.shape[2] < 1 or grad_out.shape[3] < 1:
        _fail(op, f"grad_out must have H >= 1 and W >= 1, got shape {list(grad_out.shape)}")
    _check_scale(op, "scale_h", scale_h)
    _check_scale(op, "scale_w", scale_w)
    _check_mode(op, mode)
    _check_method(op, method)


def _check_device(op: str, name: str, t: torch.Tensor) -> None:
    """Eager only: a fake tensor is on the device it fakes, and there is no kernel to miss."""
    if t.device.type not in ("cpu", "cuda"):
        _fail(op, f"{name} must be on the CPU or a CUDA GPU, got {t.device}")
    if t.device.type == "cuda" and not WITH_CUDA:
        _fail(op, f"this extension was built without CUDA, so it cannot take tensors on {t.device}; "
                  "build it where a CUDA toolkit is found (FORCE_CUDA=1 forces it; ./course doctor says why)",
              RuntimeError)


def _alert_not_deterministic(caller: str) -> None:
    """What at::globalContext().alertNotDeterministic(caller) does in PyTorch's own kernels; that
    C++ function is not part of the stable ABI, so the check is made here, before the kernel runs."""
    if not torch.are_deterministic_algorithms_enabled():
        return
    message = (f"{caller} does not have a deterministic implementation, but you set "
               "'torch.use_deterministic_algorithms(True)'. You can turn off determinism just for this operation, "
               "or you can use the 'warn_only=True' option, if that's acceptable for your application. "
               'The gather backward (backward="gather", the default) is deterministic.')
    if torch.is_deterministic_algorithms_warn_only_enabled():
        warnings.warn(message, UserWarning, stacklevel=3)
    else:
        raise RuntimeError(message)


def _launch(kernel, *args):
    """Run a kernel op; a GPU the library has no code for gets the fix, not CUDA's bare message."""
    try:
        return kernel(*args)
    except RuntimeError as e:
        if "no kernel image is available" not in str(e):
            raise
        major, minor = torch.cuda.get_device_capability()
        raise RuntimeError(
            f"this build of ch06 has no GPU code for this GPU (compute capability {major}.{minor}). "
            f"Rebuild or reinstall it with TORCH_CUDA_ARCH_LIST=\"{major}.{minor}\" (or \"9.0+PTX\" and newer "
            f"entries for several GPUs); 06_upsample/check_wheel.py lists what a wheel contains.") from e


# The public operators: checks, then the kernels.


@torch.library.impl("ch06::upsample_bilinear2d", "default")
def _forward_impl(x, size, mode, scale_h=None, scale_w=None, backward="gather"):
    _check_forward(x, size, mode, scale_h, scale_w, backward)
    _check_device("upsample_bilinear2d", "x", x)
    return _launch(_forward_kernel, x, size, mode, scale_h, scale_w)


@torch.library.impl("ch06::upsample_bilinear2d_backward", "default")
def _backward_impl(grad_out, input_size, mode, method, scale_h=None, scale_w=None):
    _check_backward(grad_out, input_size, mode, method, scale_h, scale_w)
    _check_device("upsample_bilinear2d_backward", "grad_out", grad_out)
    return _launch_backward(grad_out, input_size, mode, method, scale_h, scale_w)


def _launch_backward(grad_out, input_size, mode, method, scale_h, scale_w):
    """The backward kernel op, after the alert deterministic mode asks of the scatter."""
    if method == "scatter" and grad_out.is_cuda:  # on the CPU, both methods run the gather kernel
        _alert_not_deterministic('upsample_bilinear2d_backward (backward="scatter", CUDA)')
    return _launch(_backward_kernel, grad_out, input_size, mode, method, scale_h, scale_w)


def _memory_format(t: torch.Tensor) -> torch.memory_format:
    """The layout of the result: PyTorch's rule (suggest_memory_format), as ops.cpp's
    channels_last_like applies it. Channels-last when t's strides order the axes C, W,
    H, N from the innermost out; ties (size-1 axes) go to NCHW."""
    if t.stride(1) == 0:
        return torch.contiguous_format
    least = 0
    for d in (1, 3, 2, 0):
        if t.shape[d] == 0 or t.stride(d) < least or (d == 0 and least == t.stride(1)):
            return torch.contiguous_format
        least = t.stride(d) * (t.shape[d] if t.shape[d] > 1 else 1)
    return torch.channels_last


def _new_empty(like: torch.Tensor, shape) -> torch.Tensor:
    return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=_memory_format(like))


@torch.library.register_fake("ch06::upsample_bilinear2d")
def _forward_fake(x, size, mode, scale_h=None, scale_w=None, backward="gather"):
    _check_forward(x, size, mode, scale_h, scale_w, backward)
    return _new_empty(x, (x.shape[0], x.shape[1], size[0], size[1]))


@torch.library.register_fake("ch06::upsample_bilinear2d_backward")
def _backward_fake(grad_out, input_size, mode, method, scale_h=None, scale_w=None):
    _check_backward(grad_out, input_size, mode, method, scale_h, scale_w)
    return _new_empty(grad_out, (grad_out.shape[0], grad_out.shape[1], input_size[0], input_size[1]))


# The kernel operators are called only by the implementations above (where the
# arguments are already checked); their fakes serve a trace that reaches them.
@torch.library.register_fake("ch06::_upsample_bilinear2d_kernel")
def _forward_kernel_fake(x, size, mode, scale_h=None, scale_w=None):
    return _forward_fake(x, size, mode, scale_h, scale_w)


@torch.library.register_fake("ch06::_upsample_bilinear2d_backward_kernel")
def _backward_kernel_fake(grad_out, input_size, mode, method, scale_h=None, scale_w=None):
    return _backward_fake(grad_out, input_size, mode, method, scale_h, scale_w)


def _forward_setup(ctx, inputs, output):
    x, size, mode, scale_h, scale_w, backward = inputs
    ctx.args = (tuple(x.shape[2:]), tuple(size), mode, scale_h, scale_w, backward)


def _forward_grad(ctx, grad):
    input_size, _, mode, scale_h, scale_w, backward = ctx.args
    # One gradient per forward input; size, mode, scales and backward get None.
    return _backward(grad, input_size, mode, backward, scale_h, scale_w), None, None, None, None, None


torch.library.register_autograd("ch06::upsample_bilinear2d", _forward_grad, setup_context=_forward_setup)


def _backward_setup(ctx, inputs, output):
    grad_out, input_size, mode, method, scale_h, scale_w = inputs
    ctx.args = (tuple(grad_out.shape[2:]), mode, method, scale_h, scale_w)


def _backward_grad(ctx, grad):
    # The backward is linear in grad_out, with the transposed matrix of the
    # forward; its own backward is therefore the forward.
    size, mode, method, scale_h, scale_w = ctx.args
    return _forward(grad, size, mode, scale_h, scale_w, method), None, None, None, None, None


torch.library.register_autograd("ch06::upsample_bilinear2d_backward", _backward_grad, setup_context=_backward_setup)


# The eager path of upsample_bilinear. The operator above is what torch.compile, export and
# opcheck see; its autograd formula runs through torch.library's Python machinery, which costs
# tens of microseconds per call (utils.fill_defaults, a redispatch, a generated
# autograd.Function) on top of the public implementation's dispatch into Python. A user's
# eager call takes this shortcut instead: the same checks, the same kernel ops, one
# autograd.Function. Anything else (compiling, fake or subclass tensors, functorch transforms,
# a dispatch mode, a double backward) goes through the operator.


class _Resize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, call):  # call: (input_size, size, mode, scale_h, scale_w, backward), checked
        ctx.call = call
        return _launch(_forward_kernel, x, *call[1:5])

    @staticmethod
    def backward(ctx, grad):
        input_size, size, mode, scale_h, scale_w, method = ctx.call
        if torch.is_grad_enabled() or not _plain(grad):  # create_graph=True: a differentiable backward
            return _backward(grad, input_size, mode, method, scale_h, scale_w), None
        return _launch_backward(grad, input_size, mode, method, scale_h, scale_w), None


# The eager calls whose arguments passed every check, keyed by what the checks read (shape,
# dtype, device and the other arguments): a training loop resizes the same shapes again and
# again, and a second call then costs a dictionary lookup instead of the checks.
_CHECKED: dict = {}


def _plain(t) -> bool:
    """A plain CPU or CUDA tensor in eager mode, with nothing that needs to see the operator."""
    # is_cpu / is_cuda: t.device.type costs microseconds when _Resize.backward asks it of a gradient
    return (type(t) in (torch.Tensor, torch.nn.Parameter) and (t.is_cpu or t.is_cuda)
            and not torch.compiler.is_compiling()
            and not torch._C._are_functorch_transforms_active()
            and not is_in_torch_dispatch_mode()  # e.g. FakeTensorMode, FlopCounterMode
            and not torch._C._is_torch_function_mode_enabled())


def _pair(value, name: str) -> tuple:
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(f"upsample_bilinear: {name} must be one value or (H, W), got {tuple(value)}")
        return tuple(value)
    return (value, value)


def output_geometry(
    in_hw: Sequence[int],
    size: int | Sequence[int] | None,
    scale_factor: float | Sequence[float] | None,
    recompute_scale_factor: bool = False,
) -> tuple[tuple[int, int], tuple[float | None, float | None]]:
    """((H_out, W_out), (scale_h, scale_w)) as F.interpolate computes them.

    With scale_factor, the output size is floor(in * factor), and unless
    recompute_scale_factor is set PyTorch keeps the factor itself for the
    coordinates (ratio 1/factor, not in/out): the scales returned here.
    """
    if (size is None) == (scale_factor is None):
        raise ValueError("upsample_bilinear: give exactly one of size and scale_factor")
    if size is not None:
        out = _pair(size, "size")
        if not all(isinstance(s, int) and s >= 1 for s in out):
            raise ValueError(f"upsample_bilinear: size must be integers >= 1, got {out}")
        return out, (None, None)
    factors = _pair(scale_factor, "scale_factor")
    if not all(isinstance(f, (int, float)) and math.isfinite(f) and f > 0 for f in factors):
        raise ValueError(f"upsample_bilinear: scale_factor must be finite numbers > 0, got {factors}")
    out = tuple(math.floor(float(n * f)) for n, f in zip(in_hw, factors))
    if not all(o >= 1 for o in out):
        raise ValueError(f"upsample_bilinear: scale_factor {factors} turns input size {tuple(in_hw)} into {out}; "
                         "every output size must be >= 1")
    scales = (None, None) if recompute_scale_factor else tuple(float(f) for f in factors)
    return out, scales


def upsample_bilinear(
    x: torch.Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "half_pixel",
    backward: str = "gather",
    recompute_scale_factor: bool = False,
) -> torch.Tensor:
    """Bilinear resize of an (N, C, H, W) tensor, up or down (no antialiasing).

    mode: "half_pixel"    = F.interpolate(mode="bilinear", align_corners=False)
          "align_corners" = F.interpolate(mode="bilinear", align_corners=True)
          "tf_legacy"     = tf.compat.v1.image.resize_bilinear(align_corners=False, half_pixel_centers=False)
    backward: "gather" (deterministic, default) or "scatter" (atomicAdd on a GPU).
    With scale_factor, "half_pixel" uses the factor for the coordinates as
    F.interpolate does; "tf_legacy" always uses in/out, as TensorFlow does
    (TensorFlow only takes sizes).
    """
    plain = _plain(x)
    if plain:  # a call already checked once: its arguments are known good (_CHECKED)
        # repr, not the values: 8.0 == 8 and True == 1, but a float size or a bool must still fail its check
        key = (x.shape, x.dtype, x.device, repr((size, scale_factor, mode, backward, recompute_scale_factor)))
        call = _CHECKED.get(key)
        if call is not None:
            return _run(x, call)
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        shape = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"upsample_bilinear: x must be a 4-D (N, C, H, W) tensor, got {shape}")
    if mode not in MODES:
        raise ValueError(f"upsample_bilinear: mode must be one of {MODES}, got {mode!r}")
    if backward not in BACKWARDS:
        raise ValueError(f"upsample_bilinear: backward must be one of {BACKWARDS}, got {backward!r}")
    out_hw, scales = output_geometry(x.shape[2:], size, scale_factor, recompute_scale_factor)
    # 2**63 fits no traced int, and torch counts a tensor's bytes in int64 too
    elements = x.shape[0] * x.shape[1] * out_hw[0] * out_hw[1]
    if elements * x.element_size() > 2**63 - 1 or max(out_hw) > 2**63 - 1:
        what = "elements" if elements > 2**63 - 1 or max(out_hw) > 2**63 - 1 else f"bytes ({x.dtype})"
        raise ValueError(f"upsample_bilinear: an output of shape {[*x.shape[:2], *out_hw]} has more {what} "
                         "than an int64 can count")
    if mode != "half_pixel":
        scales = (None, None)  # align_corners ignores them in PyTorch; TensorFlow has none
    if not plain:
        return _forward(x, list(out_hw), mode, scales[0], scales[1], backward)
    _check_forward(x, out_hw, mode, scales[0], scales[1], backward)
    _check_device("upsample_bilinear2d", "x", x)
    if len(_CHECKED) >= 4096:  # a program that resizes ever new shapes: start over
        _CHECKED.clear()
    call = _CHECKED[key] = (list(x.shape[2:]), list(out_hw), mode, scales[0], scales[1], backward)
    return _run(x, call)


def _run(x: torch.Tensor, call: tuple) -> torch.Tensor:
    """An eager call with checked arguments: through _Resize when a gradient is wanted."""
    if x.requires_grad and torch.is_grad_enabled():
        return _Resize.apply(x, call)
    return _launch(_forward_kernel, x, *call[1:5])
