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


def assert_finite(out: torch.Tensor, what: str = "output") -> None:
    """No NaN or Inf in `out` (an element never written stays NaN under poisoned_empty); else where the first is."""
    bad = ~torch.isfinite(out.detach().cpu())
    if bad.any():
        idx = tuple(int(j) for j in bad.nonzero()[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {out.numel()} elements are NaN/Inf (never written, a stub, "
                             f"computed from a value never set: a __shared__ slot, a local variable; or arithmetic "
                             f"such as 0/0, inf - inf, a division by a weight that can be 0?); first at {idx}: got "
                             f"{out.detach().flatten()[int(bad.flatten().nonzero()[0])].item()}")


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype | None = None, what: str = "output",
                 tol: float | None = None, inputs=None) -> None:
    """Assert shape, dtype and relative error with a message a learner can act on (see `mismatch`;
    `inputs(index)` describes the inputs that produced the output at `index`)."""
    dtype = dtype or out.dtype
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    assert out.dtype == dtype, f"{what}: dtype {out.dtype}, expected {dtype}"
    assert_finite(out, what)
    tol = TOLERANCE[dtype] if tol is None else tol
    err = rel_error(out, ref)
    if err > tol:
        got, ref64 = out.detach().double().cpu(), ref.detach().double().cpu()
        scale = ref64.abs().clamp(min=max(ref64.abs().max().item() * 2.0**-6, 1e-300))
        raise AssertionError(mismatch(what, got, ref64, scale, dtype, f"relative error {err:.3g} > tolerance {tol:.1g} "
                                      f"for {dtype}", allowed=None, inputs=inputs))


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


def assert_memcheck_clean(code: str, what: str, timeout: float = 900) -> None:
    """Run `code` in a fresh Python under compute-sanitizer's memcheck and fail with its first
    reports if any kernel touched memory outside its tensors.

    Every tensor is its own allocation there (toolkit.sanitizer_env), so memcheck sees a read
    even one element past a tensor's end. Skips where there is no sanitizer, or when already under one."""
    import pytest

    from . import toolkit

    if os.environ.get("COURSE_SANITIZER"):
        pytest.skip("already running under compute-sanitizer")
    sanitizer = toolkit.compute_sanitizer()
    if sanitizer is None:
        pytest.skip("compute-sanitizer not found (it comes with the CUDA toolkit)")
    proc = subprocess.run([sanitizer, "--tool", "memcheck", "--error-exitcode", "99", "--print-limit", "4",
                           sys.executable, "-c", code], capture_output=True, text=True, env=toolkit.sanitizer_env(),
                          timeout=timeout)
    if proc.returncode == 99:
        lines = [line.removeprefix("========= ") for line in proc.stdout.splitlines()
                 if "Invalid" in line or "is out of bounds" in line or "bytes after" in line or "bytes before" in line]
        raise AssertionError(f"{what}: compute-sanitizer memcheck saw accesses outside the tensors:\n  "
                             + "\n  ".join(lines[:8] or proc.stdout.splitlines()[-12:]))
    assert proc.returncode == 0, f"{what}: the memcheck run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"


def memcheck_script(source: str | Path, body: str) -> str:
    """A script for assert_memcheck_clean: build (or reuse) the extension in `source` as `ext`,
    run `body` (which may use torch and ext), wait for the GPU.

    The CUDA code is built unoptimised (nvcc -G, build.build(device_debug=True)): optimised code
    moves a load whose value the thread never uses below the bounds check (a kernel that reads
    points[n] before `if (n >= N) return` reads nothing past the end once compiled), so memcheck,
    which sees the machine code, would pass the source's out-of-bounds read."""
    from . import ROOT

    return (f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport torch\nfrom coursekit import build\n"
            f"ext = build.build({str(source)!r}, device_debug=True)\n{body}\ntorch.cuda.synchronize()\n")


def cuda_available() -> bool:
    return torch.cuda.is_available()


# ----------------------------------------------------------------------------
# Sharper tools for graders. A relative-norm tolerance answers "is this roughly
# right?"; the helpers below answer "is every element as right as the dtype allows?",
# which is what catches arithmetic done in the wrong type.

MANTISSA_BITS = {torch.float64: 52, torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}


def ulp_of(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of `dtype` numbers at |x| (x in float64): one unit in the last place."""
    info = torch.finfo(dtype)
    mag = x.detach().double().abs().clamp(min=info.tiny)
    return torch.exp2(torch.floor(torch.log2(mag)) - MANTISSA_BITS[dtype])


# Advice sized to the error. An element off by a few roundings of a lower precision is a
# precision mistake (a step in the wrong type); one off by more is a wrong value (an index, a
# weight, a range), and precision advice would send the learner the wrong way. The line between
# them, as |got - expected| / scale (the element's size, or a floor where terms cancel):
# float64: 2^-14, 1000s of float32 roundings (the tests ask for 1e-12); float32: 2^-10, a
# float16 step, a fast approximation or a short constant; float16 and bfloat16: 16 ulp.
ROUNDING_SIZED = {torch.float64: 2.0**-14, torch.float32: 2.0**-10, torch.float16: 2.0**-6, torch.bfloat16: 2.0**-3}
PRECISION_ADVICE = {
    torch.float64: "Off by a rounding of float32 or less: does some step go through float32 (a float variable, "
                   "an f literal, float as the arithmetic type), or is a constant written with too few digits?",
    torch.float32: "A near miss, larger than float32's rounding: a step in a 16-bit type, a fast approximation "
                   "(__expf), or a constant with too few digits?",
    torch.float16: "Off by roundings: compute in float (at::opmath_type) and round to float16 once, at the end.",
    torch.bfloat16: "Off by roundings: compute in float (at::opmath_type) and round to bfloat16 once, at the end.",
}
FAR_ADVICE = "the values are far off, not rounding: an index, a weight or a range is wrong"
# What the GPU-free judge leaves in a local variable read before it is set (emulate.PATTERN: 0xFE
# bytes, -1.7e38 as a float, -5.3e303 as a double): a value this large where the expected one is not.
UNSET_ADVICE = ("A value this large is what the GPU-free judge leaves in a local variable read before it is set "
                "(-1.7e38 as a float, -5.3e303 as a double): is an accumulator or array declared without a value?")


def _value(v: float, dtype: torch.dtype) -> str:
    return repr(v) if dtype == torch.float64 else f"{v:.9g}"


def mismatch(what: str, got: torch.Tensor, ref: torch.Tensor, scale: torch.Tensor | float, dtype: torch.dtype,
             rule: str, *, allowed: torch.Tensor | None = None, unit: torch.Tensor | None = None, inputs=None) -> str:
    """The message for `got` (float64, CPU) not matching the float64 `ref`, advice sized to the error.

    scale: each element's size for the relative error; rule: what was asked ("are more than 1 ulp
    of torch.float16 from the float64 reference"; with allowed=None, the whole sentence, e.g. a
    relative-norm check); allowed: each element's allowance (counts the wrong ones); unit: the ulp,
    to say the error in ulp; inputs(index) -> text: the inputs that produced the output at index.
    A rounding-sized error (ROUNDING_SIZED) gets the worst element and precision advice; a larger
    one gets FAR_ADVICE and the first element that is far off, with its inputs.
    """
    err = (got - ref).abs()
    rel = torch.where(err == 0, 0.0, err / scale)  # 0/0 where an element is exactly 0 and right
    head = f"{what}: " + (f"{int((err > allowed).sum())} of {ref.numel()} elements {rule}" if allowed is not None
                          else rule)

    def at(i: int, size: str = "") -> str:
        idx = tuple(int(j) for j in torch.unravel_index(torch.tensor(i), ref.shape))
        text = (f"at {idx}: got {_value(got.flatten()[i].item(), dtype)}, expected {_value(ref.flatten()[i].item(), dtype)}"
                + (f" ({size})" if size else ""))
        if inputs is not None:
            try:
                text += f"; inputs: {inputs(idx)}"
            except Exception:  # noqa: BLE001 - the description is a help, never the failure
                pass
        return text

    worst_rel = rel.max().item()
    if worst_rel <= ROUNDING_SIZED[dtype]:
        i = int(torch.argmax(err / allowed)) if allowed is not None else int(torch.argmax(rel))
        size = (f"{(err.flatten()[i] / unit.flatten()[i]).item():.1f} ulp" if unit is not None
                else f"relative error {rel.flatten()[i].item():.2g}")
        return f"{head}; worst {at(i, size)}. {PRECISION_ADVICE[dtype]}"
    far = rel.flatten() > ROUNDING_SIZED[dtype]
    first = int(far.nonzero()[0])
    unset = abs(got.flatten()[first].item()) >= 1e37 and abs(ref.flatten()[first].item()) < 1e30
    return (f"{head}: {FAR_ADVICE} ({int(far.sum())} of {ref.numel()} elements, relative error up to "
            f"{worst_rel:.2g}). First wrong {at(first)}" + (f". {UNSET_ADVICE}" if unset else ""))


def assert_rounded(out: torch.Tensor, ref64: torch.Tensor, *, ulps: float = 1.0, tiny: float | None = None,
                   what: str = "output", inputs=None) -> None:
    """Every element of `out` within `ulps` units in the last place of out.dtype of the float64 `ref64`.

    This is what a kernel that accumulates in float (at::opmath_type) and rounds once
    at the end achieves for float16/bfloat16 outputs: the correctly rounded value, or
    its neighbour when the exact value lies within a hair of a tie (`ulps=1` allows
    that). Arithmetic in the storage type rounds at every step and lands several ulps
    away somewhere in a large tensor; a relative-norm tolerance would absorb it.

    Where |ref| is below `tiny` (default: 2^-6 of max |ref|; results that are small
    because terms cancel) the allowance is `ulps` at `tiny`, since there the float
    accumulation's own rounding is of the order of the terms, not of the result.
    """
    assert out.shape == ref64.shape, f"{what}: shape {tuple(out.shape)}, expected {tuple(ref64.shape)}"
    dtype = out.dtype
    got = out.detach().double().cpu()
    ref = ref64.detach().double().cpu()
    assert_finite(out, what)
    if ref.numel() == 0:
        return
    if tiny is None:
        tiny = ref.abs().max().item() * 2.0**-6
    allowed = ulps * ulp_of(ref.abs().clamp(min=tiny), dtype)
    if ((got - ref).abs() > allowed).any():
        raise AssertionError(mismatch(what, got, ref, ref.abs().clamp(min=tiny), dtype,
                                      f"are more than {ulps:g} ulp of {dtype} from the float64 reference",
                                      allowed=allowed, unit=allowed / ulps, inputs=inputs))


def assert_float64(out: torch.Tensor, ref: torch.Tensor, tol: float = 1e-12, what: str = "output",
                   floor: float = 0.0, inputs=None) -> None:
    """Every element within tol of the float64 reference, relative to its size (at least 2^-6 of
    the largest, and at least `floor`): what float64 arithmetic gives, and 1e4 times finer than
    anything through float32."""
    assert out.dtype == torch.float64, f"{what}: dtype {out.dtype}, expected torch.float64"
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    got, ref = out.detach().cpu(), ref.detach().double().cpu()
    assert_finite(out, what)
    if ref.numel() == 0:
        return
    scale = ref.abs().clamp(min=max(ref.abs().max().item() * 2.0**-6, floor, 1e-300))
    if ((got - ref).abs() > tol * scale).any():
        raise AssertionError(mismatch(what, got, ref, scale, torch.float64,
                                      f"are off by more than {tol:g} (relative)", allowed=tol * scale, inputs=inputs))


def assert_bitwise(out: torch.Tensor, expected: torch.Tensor, what: str = "output") -> None:
    """Bit-for-bit equality, signed zeros and NaN payloads included (torch.equal calls -0.0 == 0.0)."""
    assert out.shape == expected.shape, f"{what}: shape {tuple(out.shape)}, expected {tuple(expected.shape)}"
    assert out.dtype == expected.dtype, f"{what}: dtype {out.dtype}, expected {expected.dtype}"
    a, b = out.detach().cpu().contiguous(), expected.detach().cpu().contiguous()
    int_type = {8: torch.int64, 4: torch.int32, 2: torch.int16}[a.element_size()]
    differ = a.view(int_type) != b.view(int_type)
    if differ.any():
        i = int(differ.flatten().nonzero()[0])
        raise AssertionError(
            f"{what}: {int(differ.sum())} of {a.numel()} elements differ bit for bit; first at flat index {i}: "
            f"got {a.flatten()[i].item()!r}, expected {b.flatten()[i].item()!r}"
        )


def assert_property(got, expected, prop: str, what: str = "output") -> None:
    """got == expected for one named property (strides, dtype, device, shape, layout, a string), with a
    message that shows both whole: pytest's own comparison elides long strings on both sides."""
    if got == expected:
        return
    text = f"{what}: {prop} {got!r}, expected {expected!r}"
    if isinstance(got, str) and isinstance(expected, str):
        i = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        text += f" (they differ from character {i}: {got[i:i + 20]!r} vs {expected[i:i + 20]!r})"
    raise AssertionError(text)


def assert_mask(mask: torch.Tensor, expected: torch.Tensor, what: str = "mask", inputs: torch.Tensor | None = None) -> None:
    """Two boolean tensors equal; else how many differ and the first: index, got, expected, and the input there."""
    assert_property(mask.dtype, expected.dtype, "dtype", what)
    assert_property(tuple(mask.shape), tuple(expected.shape), "shape", what)
    got, want = mask.detach().cpu(), expected.detach().cpu()
    wrong = got != want
    if wrong.any():
        idx = tuple(int(j) for j in wrong.nonzero()[0])
        text = (f"{what}: {int(wrong.sum())} of {got.numel()} elements wrong; first at {idx}: got {got[idx].item()}, "
                f"expected {want[idx].item()}")
        if inputs is not None:
            text += f" (input {inputs.detach().cpu()[idx].item()!r})"
        raise AssertionError(text)


@contextlib.contextmanager
def expect_error(pattern: str, exc_type: type[BaseException] = RuntimeError, what: str = "the call"):
    """Like pytest.raises(exc_type, match=pattern), with a message that shows what happened instead.

        with expect_error(r"feats must have shape \\(N, 8, F\\)"):
            ext.forward(feats[0], points)
    """
    import re

    try:
        yield
    except exc_type as e:
        text = str(e).splitlines()[0] if str(e) else ""
        if not re.search(pattern, str(e)):
            raise AssertionError(f"{what} raised {type(e).__name__} with the wrong message\n"
                                 f"  expected (regex): {pattern}\n  got: {text[:300]}") from None
    except Exception as e:  # noqa: BLE001 - we report the wrong type
        text = str(e).splitlines()[0] if str(e) else ""
        raise AssertionError(f"{what} raised {type(e).__name__} instead of {exc_type.__name__}\n"
                             f"  expected (regex): {pattern}\n  got: {text[:300]}") from None
    else:
        raise AssertionError(f"{what} returned normally; expected {exc_type.__name__} matching: {pattern}")


def assert_no_data_race(number: str, source) -> None:
    """Chapter `number`'s CPU kernels, built from `source`, run under ThreadSanitizer with their
    parallel_for chunks on three threads (coursekit/races.py): no two threads touch the same
    memory, one of them writing, without an order between them. Skips where ThreadSanitizer is
    not available."""
    import pytest

    from coursekit import races

    reason = races.unavailable()
    if reason:
        pytest.skip(f"the thread judge needs ThreadSanitizer: {reason}")
    found = races.check(number, source)
    if found:
        more = f"\n(ThreadSanitizer reports {len(found) - 1} more pair(s) of places.)" if len(found) > 1 else ""
        raise AssertionError(found[0].message() + more)
