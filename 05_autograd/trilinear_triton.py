"""Route 3: the forward as a Triton kernel, registered with torch.library.triton_op.

    from trilinear_triton import trilinear
    out = trilinear(feats, points)                        # eager: launches the Triton kernel
    out = torch.compile(model, fullgraph=True)(...)       # inductor sees the kernel itself

The kernel is Python (Triton's language), compiled for the GPU at its first call. The
operator torch.ops.ch05_triton.trilinear is made by torch.library.triton_op: its body
allocates the output and launches the kernel through torch.library.wrap_triton, and
torch.compile / torch.export trace that body (no fake implementation to write: the body
*is* one, since wrap_triton does nothing on fake tensors). The gradient is route 2's:
the same autograd formula (trilinear_op.py) and backward operator (chapter 04's kernels).

On a machine without a GPU, Triton kernels run only in Triton's interpreter (numpy, on
CPU tensors; slow, for tests and debugging). It is switched on by TRITON_INTERPRET=1,
which triton reads when a kernel is decorated, and for its own library functions (tl.zeros,
...) when triton is imported: so this module sets it when no GPU is visible and triton is
not imported yet (tests/conftest.py sets it before anything imports triton). The interpreter reads the tensors' memory, which fake tensors
do not have, so there the launch is an opaque operator of its own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

if "triton" not in sys.modules and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton can only interpret

try:
    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction
except ImportError as e:  # torch's Linux wheels bring triton; other platforms may not have it
    raise ImportError("trilinear_triton needs Triton (pip install triton), which torch's Linux wheels "
                      "install with it") from e

# Route 2's autograd formula and backward operator, made once per process (see module.py).
try:
    from coursekit.build import load_python  # in the course: the trilinear_op.py beside this file
except ImportError:  # installed with pip (see setup.py): trilinear_op is installed beside this module
    import trilinear_op as _op
else:
    _op = sys.modules.get("trilinear_op") or load_python(Path(__file__).parent, "trilinear_op")

DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def trilinear_forward_kernel(feats_ptr, points_ptr, out_ptr, N, F,
                             stride_fn, stride_fk, stride_ff,  # feats[n, k, f] at feats_ptr + n*stride_fn + ...
                             stride_pn, stride_pd,             # points[n, d] at points_ptr + n*stride_pn + d*stride_pd
                             BLOCK_N: tl.constexpr, BLOCK_F: tl.constexpr):
    """One program computes the tile out[n0 : n0 + BLOCK_N, f0 : f0 + BLOCK_F] (out is contiguous, (N, F)).

    A program is a block of threads; the kernel says what the whole tile does, with
    (BLOCK_N,), (BLOCK_F,) and (BLOCK_N, BLOCK_F) blocks of values, and Triton maps the
    tile onto threads and vector loads. The last tile along either axis is partial.
    """
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,) the tile's cubes
    f = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)  # (BLOCK_F,) the tile's features
    # BEGIN SOLUTION triton-forward
    # STUB: pass
    n_ok = n < N
    mask = n_ok[:, None] & (f < F)[None, :]  # the tile's elements that exist
    # float32 arithmetic for every input type but float64 (at::opmath_type, as the CUDA kernel)
    compute: tl.constexpr = tl.float64 if feats_ptr.dtype.element_ty == tl.float64 else tl.float32
    n64 = n.to(tl.int64)  # N * 8 * F may exceed 2^31: 64-bit offsets
    p = points_ptr + n64 * stride_pn
    u = (tl.load(p, mask=n_ok).to(compute) + 1) * 0.5  # [-1, 1] -> [0, 1]
    v = (tl.load(p + stride_pd, mask=n_ok).to(compute) + 1) * 0.5
    w = (tl.load(p + 2 * stride_pd, mask=n_ok).to(compute) + 1) * 0.5
    corner = feats_ptr + n64[:, None] * stride_fn + f[None, :] * stride_ff  # (BLOCK_N, BLOCK_F) pointers, k = 0
    acc = tl.zeros((BLOCK_N, BLOCK_F), dtype=compute)
    for k in tl.static_range(8):  # unrolled: k is a constant in each copy
        wx = u if (k >> 2) & 1 else 1 - u
        wy = v if (k >> 1) & 1 else 1 - v
        wz = w if k & 1 else 1 - w
        acc += (wx * wy * wz)[:, None] * tl.load(corner + k * stride_fk, mask=mask).to(compute)
    tl.store(out_ptr + n64[:, None] * F + f[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


# With TRITON_INTERPRET=1 (at triton's import), @triton.jit gives an interpreted function instead.
INTERPRETED = not isinstance(trilinear_forward_kernel, JITFunction)


def blocks(F: int) -> tuple[int, int]:
    """(BLOCK_N, BLOCK_F): the feature axis in one tile up to 128 wide, 2048 elements per tile (powers of 2)."""
    block_f = min(triton.next_power_of_2(max(F, 1)), 128)
    return max(2048 // block_f, 1), block_f


def launch(feats: torch.Tensor, points: torch.Tensor, out: torch.Tensor, kernel=trilinear_forward_kernel) -> None:
    """Run the kernel over out (N, F), contiguous; feats and points may have any strides."""
    N, F = out.shape
    block_n, block_f = blocks(F)
    grid = (triton.cdiv(N, block_n), triton.cdiv(F, block_f))
    kernel[grid](feats, points, out, N, F, *feats.stride(), *points.stride(), BLOCK_N=block_n, BLOCK_F=block_f)


def _check_inputs(feats: torch.Tensor, points: torch.Tensor) -> None:
    # torch._check, not `if ...: raise`: under torch.compile the sizes may be symbolic; and one size
    # comparison per call, since `and` would ask a symbolic size for a plain bool.
    bad_shapes = lambda: (f"trilinear_triton: feats must have shape (N, 8, F) and points (N, 3), got feats "  # noqa: E731
                          f"{list(feats.shape)} and points {list(points.shape)}")
    torch._check(feats.dim() == 3, bad_shapes)
    torch._check(points.dim() == 2, bad_shapes)
    torch._check(feats.shape[1] == 8, bad_shapes)
    torch._check(points.shape[0] == feats.shape[0], bad_shapes)
    torch._check(points.shape[1] == 3, bad_shapes)
    torch._check(feats.dtype in DTYPES and points.dtype == feats.dtype,
                 lambda: f"trilinear_triton: feats and points must have one dtype, float64, float32, float16 or "
                         f"bfloat16, got {feats.dtype} and {points.dtype}")
    torch._check(feats.device == points.device,
                 lambda: f"trilinear_triton: feats and points must be on the same device, got feats on "
                         f"{feats.device} and points on {points.device}")
    torch._check(feats.device.type == "cuda" or (INTERPRETED and feats.device.type == "cpu"),
                 lambda: f"trilinear_triton: tensors must be on a CUDA GPU, got {feats.device}"
                         + ("" if INTERPRETED else "; CPU tensors run only in Triton's interpreter, which "
                            "TRITON_INTERPRET=1 switches on before triton is imported"))


@torch.library.triton_op("ch05_triton::trilinear", mutates_args=())
def _trilinear(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    _check_inputs(feats, points)
    if INTERPRETED:
        return torch.ops.ch05_triton.trilinear_interpreted(feats, points)
    out = feats.new_empty(feats.shape[0], feats.shape[2])
    if out.numel() > 0:  # N = 0 or F = 0: no launch (a grid must not be empty)
        # Triton launches on the current device: make it the tensors' (cuda:1 inputs, cuda:0 current).
        # wrap_triton: torch.compile and torch.export see the launch (and, on fake tensors, skip it).
        with torch.cuda.device(out.device):
            launch(feats, points, out, torch.library.wrap_triton(trilinear_forward_kernel))
    return out


# The interpreter's launch, as an opaque operator: it reads memory, so tracing must not enter it.
@torch.library.custom_op("ch05_triton::trilinear_interpreted", mutates_args=())
def _trilinear_interpreted(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    N, F = feats.shape[0], feats.shape[2]
    if N * F == 0:
        return feats.new_empty(N, F)
    # The interpreter checks no bounds: a store outside out would corrupt memory. So out is the
    # start of a larger buffer whose tail, as far as the grid reaches, must come back untouched.
    block_n, block_f = blocks(F)
    reach = (triton.cdiv(N, block_n) * block_n) * F + triton.cdiv(F, block_f) * block_f
    buffer = feats.new_empty(N * F + reach)
    guard = buffer[N * F:]
    guard.copy_(torch.randn(guard.shape, dtype=torch.float64))
    before = guard.clone()
    out = buffer[:N * F].view(N, F)
    launch(feats, points, out)
    if not torch.equal(guard, before):
        raise RuntimeError("trilinear_triton: the kernel wrote past the end of out (a store without its mask?)")
    return out.clone()


@_trilinear_interpreted.register_fake
def _(feats, points):
    return feats.new_empty(feats.shape[0], feats.shape[2])


# The gradient: route 2's formula, which calls the backward operator (chapter 04's kernels).
_trilinear.register_autograd(_op._backward, setup_context=_op._setup_context)
trilinear_op = torch.ops.ch05_triton.trilinear.default


def trilinear(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """feats (N, 8, F) interpolated at points (N, 3) in [-1, 1]: (N, F), differentiable in both."""
    return trilinear_op(feats, points)
