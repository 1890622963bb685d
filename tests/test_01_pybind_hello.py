"""Chapter 01: the first extension, built with JIT (setup.py and pip: tests/test_packaging.py)."""

import pytest
import torch

from coursekit.testing import assert_property

CHAPTER = "01"


def test_module_name(ext):
    # TORCH_EXTENSION_NAME and the name Python imports must agree.
    assert ext.__name__ == "ch01_hello"
    assert {"echo", "describe", "scale"} <= set(dir(ext))


def test_echo_returns_the_same_tensor(ext):
    x = torch.randn(4, 5)
    y = ext.echo(x)
    assert torch.equal(y, x)
    assert y.data_ptr() == x.data_ptr(), "echo copied the data; return the handle itself"


def test_echo_keeps_dtype_and_view(ext):
    x = torch.randn(6, 4, dtype=torch.float64).t()
    y = ext.echo(x)
    assert_property(y.dtype, torch.float64, "dtype", "echo")
    assert_property(y.stride(), x.stride(), "strides", "echo of a transposed tensor")
    assert y.data_ptr() == x.data_ptr(), "echo copied the data; return the handle itself"


@pytest.mark.exercise("describe")
@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: torch.zeros(2, 3), "Tensor(Float, shape=(2, 3), device=cpu)"),
        (lambda: torch.zeros(7, dtype=torch.float64), "Tensor(Double, shape=(7), device=cpu)"),
        (lambda: torch.tensor(3, dtype=torch.int64), "Tensor(Long, shape=(), device=cpu)"),
        (lambda: torch.zeros(1, 0, 4, dtype=torch.float16), "Tensor(Half, shape=(1, 0, 4), device=cpu)"),
        (lambda: torch.zeros(2, 1, 3, 5, dtype=torch.bool)[:, :, ::2], "Tensor(Bool, shape=(2, 1, 2, 5), device=cpu)"),
        (lambda: torch.zeros(12, dtype=torch.bfloat16).view(3, 4).t(), "Tensor(BFloat16, shape=(4, 3), device=cpu)"),
    ],
)
def test_describe(ext, make, expected):
    assert_property(ext.describe(make()), expected, "the string", "describe")


@pytest.mark.exercise("scale")
def test_scale_returns_new_tensor_by_default(ext):
    x = torch.randn(3, 4)
    before = x.clone()
    y = ext.scale(x, 2.5)
    torch.testing.assert_close(y, before * 2.5)
    assert torch.equal(x, before), "scale modified its input although inplace=False"
    assert y.data_ptr() != x.data_ptr()


@pytest.mark.exercise("scale")
def test_scale_inplace(ext):
    x = torch.randn(5)
    expected = x * -0.5
    y = ext.scale(x, factor=-0.5, inplace=True)
    torch.testing.assert_close(x, expected)
    assert y.data_ptr() == x.data_ptr(), "with inplace=True return the input itself"


@pytest.mark.exercise("scale")
def test_scale_promotes_like_python(ext):
    """x * factor, as PyTorch computes it: an integer tensor times 2.5 is a float tensor, not truncated."""
    x = torch.tensor([1, 2, -3])
    y = ext.scale(x, 2.5)
    assert y.dtype == (x * 2.5).dtype, f"scale(int64 tensor, 2.5) gave {y.dtype}, x * 2.5 gives {(x * 2.5).dtype}"
    assert torch.equal(y, x * 2.5), f"scale(tensor([1, 2, -3]), 2.5) gave {y.tolist()}, expected [2.5, 5.0, -7.5]"


@pytest.mark.exercise("scale")
def test_scale_inplace_refuses_what_mul_refuses(ext):
    """In place, as x.mul_(2.5): an integer tensor cannot hold x * 2.5, so PyTorch raises and leaves x
    as it was; a copy of the product back into x would silently truncate it."""
    f = torch.tensor([1.0, 2.0, -3.0])  # first what in place must do where the dtype can hold the product
    ext.scale(f, 2.5, inplace=True)
    assert f.tolist() == [2.5, 5.0, -7.5], f"scale(tensor([1., 2., -3.]), 2.5, inplace=True) left x = {f.tolist()}"
    x = torch.tensor([1, 2, -3])
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.clone().mul_(2.5)  # what PyTorch does
    try:
        ext.scale(x, 2.5, inplace=True)
    except RuntimeError:
        pass
    else:
        raise AssertionError(f"scale(tensor([1, 2, -3]), 2.5, inplace=True) returned, leaving x = {x.tolist()}; "
                             "x.mul_(2.5) raises: an int64 tensor cannot hold the float product")
    assert x.tolist() == [1, 2, -3], f"scale(..., inplace=True) raised but changed x to {x.tolist()}"


@pytest.mark.exercise("scale")
@pytest.mark.parametrize("inplace", [False, True])
def test_scale_keeps_precision_and_layout(ext, inplace):
    """A float64 tensor scaled by a double stays float64 to the last bit; a view keeps its strides."""
    x = torch.randn(6, 4, dtype=torch.float64).t()
    factor = 1.0 + 2.0**-40  # lost if the factor goes through float
    expected = x * factor
    y = ext.scale(x, factor, inplace=inplace)
    assert y.dtype == torch.float64 and y.shape == x.shape, f"got {y.dtype} {tuple(y.shape)}"
    assert torch.equal(y, expected), "scale lost precision: compute in the tensor's dtype with the double factor"
    if inplace:
        assert_property(y.stride(), x.stride(), "strides", "scale(inplace=True)")
        assert y.data_ptr() == x.data_ptr(), "scale(inplace=True) returned a new tensor; return x itself"


def test_scale_argument_types(ext):
    x = torch.ones(2)
    with pytest.raises(TypeError):
        ext.scale(x, "two")  # pybind11 refuses what it cannot convert, naming the signature
    with pytest.raises(TypeError):
        ext.scale(x, 2.0, inplace=True, extra=1)


@pytest.mark.cuda
@pytest.mark.exercise("describe")
def test_describe_cuda(ext):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (none visible)")
    assert ext.describe(torch.zeros(2, device="cuda")) == "Tensor(Float, shape=(2), device=cuda:0)"


@pytest.mark.exercise("describe")
def test_runs_in_a_clean_environment(ext):
    """A plain Python with no environment at all (no LD_PRELOAD, no PYTHONPATH) imports the built
    extension and formats a string with std::ostringstream: the extension shares the libstdc++ that
    torch loaded (see coursekit/toolkit.py, "One C++ standard library per process")."""
    import os
    import subprocess
    import sys

    build_dir = ext.__course_build__["build_dir"]
    code = (f"import sys; sys.path.insert(0, {build_dir!r}); import torch, ch01_hello; "
            "print(ch01_hello.describe(torch.zeros(2, 3)))")
    proc = subprocess.run([sys.executable, "-c", code], env={"PATH": os.defpath}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, (f"chapter 01 in a clean environment exited with {proc.returncode} "
                                  f"(-11: a segmentation fault):\n{proc.stderr[-2000:]}")
    assert proc.stdout.strip() == "Tensor(Float, shape=(2, 3), device=cpu)"


def test_demo_runs_in_a_clean_environment(tmp_path):
    """`python 01_pybind_hello/demo.py`, from another folder, with nothing in the environment but the
    machine's own PATH and compiler choice (CXX): no LD_PRELOAD, no PYTHONPATH."""
    import os
    import subprocess
    import sys

    from coursekit import ROOT

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "CXX", "CC", "CUDA_HOME")}
    proc = subprocess.run([sys.executable, str(ROOT / "01_pybind_hello" / "demo.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"demo.py exited with {proc.returncode}:\n{proc.stdout[-1000:]}{proc.stderr[-2000:]}"
    assert "describe: Tensor(Float, shape=(2, 3), device=cpu)" in proc.stdout
