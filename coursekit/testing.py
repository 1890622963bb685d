"""Helpers the chapter tests share: tolerances, error measure, poisoned outputs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import torch

# Relative error ||out - ref|| / ||ref|| against a float64 reference computed from
# the same (already rounded) inputs. What is left is the rounding of the output
# and of the arithmetic: about 2^-24 for float32, 2^-11 for float16 and 2^-8 for
# bfloat16, with room for a few operations.
TOLERANCE = {
    torch.float64: 1e-12,
    torch.float32: 1e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 1.6e-2,
}

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; inf if `out` holds NaN or Inf (e.g. never written)."""
    out64, ref64 = out.detach().double().cpu(), ref.detach().double().cpu()
    if not torch.isfinite(out64).all():
        return float("inf")
    denom = ref64.norm().item()
    diff = (out64 - ref64).norm().item()
    return diff / denom if denom > 0 else diff


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype | None = None, what: str = "output", tol: float | None = None) -> None:
    """Assert shape, dtype and relative error with a message a learner can act on."""
    dtype = dtype or out.dtype
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    assert out.dtype == dtype, f"{what}: dtype {out.dtype}, expected {dtype}"
    bad = (~torch.isfinite(out.detach())).sum().item()
    assert bad == 0, f"{what}: {bad} of {out.numel()} elements are NaN/Inf (never written, or a stub?)"
    tol = TOLERANCE[dtype] if tol is None else tol
    err = rel_error(out, ref)
    assert err <= tol, f"{what}: relative error {err:.3g} > tolerance {tol:.1g} for {dtype}"


@contextlib.contextmanager
def poisoned_empty():
    """Inside this block every `empty` tensor (torch.empty, at::empty in C++) starts as NaN.

    A kernel that forgets to write part of its output then leaves NaNs that the
    tests catch, instead of stale memory that happens to look right.
    """
    import torch.utils.deterministic as det

    was_on, was_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = det.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        yield
    finally:
        det.fill_uninitialized_memory = was_fill
        torch.use_deterministic_algorithms(was_on, warn_only=was_warn)


def install_and_run(source: str | Path, workdir: Path, code: str) -> str:
    """The ahead-of-time route: `pip install --no-build-isolation` the chapter in `source` into
    `workdir/site`, then run `code` in a fresh Python that imports from there; return its stdout."""
    target = workdir / "site"
    env = dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", str(target), str(source)],
        capture_output=True, text=True, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(env, PYTHONPATH=str(target)), cwd=workdir)
    assert out.returncode == 0, out.stderr
    return out.stdout


def cuda_available() -> bool:
    return torch.cuda.is_available()
