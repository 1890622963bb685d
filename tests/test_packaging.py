"""Chapters 01-05 as packages a learner can lift out of the course.

Each chapter folder holds a pyproject.toml and a setup.py that imports nothing from
this repository, so that `pip install --no-build-isolation .` works in a copy of the
folder, in any environment that has torch, setuptools and ninja.

* test_setup_py_* (fast): each setup.py imports only setuptools, torch and the standard
  library, and builds its extension with the flags of the course's own builds
  (coursekit/build.py: CXX_FLAGS, NVCC_FLAGS, LD_FLAGS), its sources and its CUDA
  choice. setup.py runs with `setuptools.setup` replaced by a recorder: nothing is compiled.
* test_installs_outside_the_course (marker `aot`, about a minute per chapter on a 2-core
  machine): the chapter is copied to a temporary folder outside the repository and
  installed with `pip install --no-build-isolation --no-deps` into a new venv that sees
  torch, setuptools, pip and ninja but not `coursekit` (the test checks that first:
  otherwise it would prove nothing). A short script then calls the chapter's ops and
  compares them with a reference written here, from an empty folder and from inside the
  copy. By default chapters 01 and 05 (the first one, and the one with a Python layer);
  COURSE_PACKAGING_ALL=1 installs all five. The build is what a learner gets with a
  plain `pip install`: FORCE_CUDA is not passed on (the course's own builds compile the
  CUDA sources already), so without a GPU it compiles the C++ only.
"""

from __future__ import annotations

import ast
import os
import runpy
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils import cpp_extension

from coursekit import ROOT, build, chapters, toolkit

PACKAGED = [c for c in chapters.existing() if c.number in {"01", "02", "03", "04", "05"}]
DEFAULT = {"01", "05"}
SETUP_PY_MAY_IMPORT = {"subprocess", "setuptools", "torch", "os", "sys", "glob", "pathlib"}


def _ids(chs):
    return [c.dirname for c in chs]


def test_no_script_shadows_the_standard_library():
    """`python 03_validate/bench.py` puts 03_validate/ first on sys.path: a file there named like a
    standard-library module (profile.py) replaces that module for everything the script imports
    (torch._dynamo imports cProfile, which imports profile, and torch.compile fails)."""
    shadows = [str(p.relative_to(ROOT)) for c in chapters.existing() for p in c.path.iterdir()
               if (p.is_dir() or p.suffix == ".py") and p.stem in sys.stdlib_module_names]
    assert not shadows, f"rename these (they shadow standard-library modules): {shadows}"


# ----------------------------------------------------------------------------
# setup.py, read without building


@pytest.mark.parametrize("chapter", PACKAGED, ids=_ids(PACKAGED))
def test_setup_py_imports_nothing_from_the_course(chapter):
    tree = ast.parse((chapter.path / "setup.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    outside = sorted(name for name in imported if name.split(".")[0] not in SETUP_PY_MAY_IMPORT)
    assert not outside, f"{chapter.dirname}/setup.py imports {outside}: a copy of the folder could not be built alone"
    assert (chapter.path / "pyproject.toml").is_file(), f"{chapter.dirname} has no pyproject.toml"
    assert "--no-build-isolation" in (chapter.path / "pyproject.toml").read_text()


def run_setup_py(chapter, monkeypatch, force_cuda: bool, cxx: str | None = None):
    """Execute the chapter's setup.py as pip would (in its folder), with setuptools.setup recording its
    arguments instead of building. Returns (setup.py's globals, the arguments given to setup)."""
    import setuptools

    calls = []
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: calls.append(kwargs))
    monkeypatch.chdir(chapter.path)
    env = dict(os.environ, FORCE_CUDA="1" if force_cuda else "0")
    if cxx:
        env["CXX"] = cxx
    monkeypatch.setattr(os, "environ", env)  # kept here
    namespace = runpy.run_path(str(chapter.path / "setup.py"), run_name="__main__")
    assert len(calls) == 1, f"{chapter.dirname}/setup.py called setup() {len(calls)} times"
    return namespace, calls[0]


@pytest.mark.parametrize("force_cuda", [False, True], ids=["auto", "FORCE_CUDA=1"])
@pytest.mark.parametrize("chapter", PACKAGED, ids=_ids(PACKAGED))
def test_setup_py_flags_match_the_course_build(chapter, force_cuda, monkeypatch):
    namespace, kwargs = run_setup_py(chapter, monkeypatch, force_cuda)
    for name in ("CXX_FLAGS", "NVCC_FLAGS", "LD_FLAGS"):
        if name in namespace:
            assert namespace[name] == getattr(build, name), (
                f"{chapter.dirname}/setup.py: {name} = {namespace[name]}, coursekit/build.py: {getattr(build, name)}")
    (ext,) = kwargs["ext_modules"]
    assert ext.name == chapter.module
    assert kwargs["cmdclass"]["build_ext"] is cpp_extension.BuildExtension

    has_cu = any((chapter.path / "csrc").glob("*.cu"))
    cuda = any(s.endswith(".cu") for s in ext.sources)
    # The rule of the README: a CUDA build of torch, a toolkit, and a GPU or FORCE_CUDA=1.
    expected = has_cu and bool(torch.version.cuda and cpp_extension.CUDA_HOME
                               and (torch.cuda.is_available() or force_cuda))
    assert cuda == expected, f"{chapter.dirname}/setup.py compiles the .cu files: {cuda}, expected {expected}"
    expected_sources = [str(p.relative_to(chapter.path)) for p in build._sources(chapter.path, cuda)]
    assert sorted(ext.sources) == sorted(expected_sources)

    defines = ["-DWITH_CUDA"] if cuda else []
    if has_cu:
        assert ext.extra_compile_args == {"cxx": build.CXX_FLAGS + defines, "nvcc": build.NVCC_FLAGS + defines}
    else:
        assert ext.extra_compile_args == build.CXX_FLAGS
    assert ext.extra_link_args == build.LD_FLAGS + toolkit.libstdcxx_link_flags()


@pytest.mark.parametrize("chapter", PACKAGED, ids=_ids(PACKAGED))
def test_setup_py_keeps_a_static_libstdcxx_private(chapter, monkeypatch, tmp_path):
    """With a compiler that has only a static libstdc++, setup.py links as the course's build does."""
    import stat

    fake = tmp_path / "c++"
    fake.write_text("#!/bin/sh\necho libstdc++.so\n")  # what such a compiler answers to -print-file-name
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    _, kwargs = run_setup_py(chapter, monkeypatch, False, cxx=str(fake))
    (ext,) = kwargs["ext_modules"]
    assert ext.extra_link_args == build.LD_FLAGS + toolkit.libstdcxx_link_flags(str(fake))
    if sys.platform.startswith("linux"):
        assert ext.extra_link_args[-len(toolkit.PRIVATE_LIBSTDCXX):] == toolkit.PRIVATE_LIBSTDCXX


def test_setup_py_installs_the_python_layer(monkeypatch):
    """05's op lives partly in Python (fake implementation, autograd formula, module): pip installs those files."""
    chapter = chapters.find("05")
    _, kwargs = run_setup_py(chapter, monkeypatch, force_cuda=False)
    imports_ext = sorted(p.stem for p in chapter.path.glob("*.py")
                         if p.stem not in {"setup", "demo", "bench"} and chapter.module in p.read_text())
    assert imports_ext, "05's Python files no longer import the extension by name?"
    assert set(imports_ext) | {"module"} <= set(kwargs.get("py_modules", [])), (
        f"05_autograd/setup.py installs {kwargs.get('py_modules')}, the op needs {imports_ext} and module")


# ----------------------------------------------------------------------------
# pip install into a fresh venv, outside the repository

REFERENCE = '''
import torch

def check(what, got, want, tol=1e-10):
    err = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    assert got.shape == want.shape and err <= tol, f"{what}: shape {tuple(got.shape)}, error {err:.3g}"

def trilinear_ref(feats, points):
    """out[n, f] = sum_k weight_k(u, v, w) feats[n, k, f]; corner k at offsets (k>>2&1, k>>1&1, k&1)."""
    u, v, w = ((points + 1) / 2).unbind(1)
    out = 0
    for k in range(8):
        a, b, c = (k >> 2) & 1, (k >> 1) & 1, k & 1
        weight = (u if a else 1 - u) * (v if b else 1 - v) * (w if c else 1 - w)
        out = out + weight[:, None] * feats[:, k]
    return out

def expect_error(fn, *args, says):
    try:
        fn(*args)
    except (RuntimeError, ValueError) as e:
        assert says in str(e), f"the error says {str(e)!r}, expected it to mention {says!r}"
    else:
        raise AssertionError(f"no error, expected one about {says!r}")

torch.manual_seed(0)
feats = torch.randn(300, 8, 5, dtype=torch.float64)
points = torch.rand(300, 3, dtype=torch.float64) * 2 - 1
'''

CHECKS = {
    "01": '''
import ch01_hello as ext
x = torch.randn(2, 3)
assert ext.echo(x).data_ptr() == x.data_ptr()
assert ext.describe(torch.zeros(2, 3)) == "Tensor(Float, shape=(2, 3), device=cpu)", ext.describe(torch.zeros(2, 3))
check("scale", ext.scale(x, 2.5), x * 2.5, 1e-6)
''',
    "02": '''
import ch02_trilinear as ext
check("forward", ext.forward(feats, points), trilinear_ref(feats, points))
check("forward float32", ext.forward(feats.float(), points.float()), trilinear_ref(feats, points), 1e-5)
expect_error(ext.forward, feats, points[:, :2], says="points")
''',
    "03": '''
import ch03_trilinear as ext
for name in ("forward", "forward_naive", "forward_vectorized"):
    check(name, getattr(ext, name)(feats, points), trilinear_ref(feats, points))
expect_error(ext.forward, feats, points[:, :2], says="points")
''',
    "04": '''
import ch04_trilinear as ext
f, p = feats.clone().requires_grad_(), points.clone().requires_grad_()
out = trilinear_ref(f, p)
grad_out = torch.randn_like(out)
want_feats, want_points = torch.autograd.grad(out, (f, p), grad_out)
got_feats, got_points = ext.backward(grad_out, feats, points)
check("forward", ext.forward(feats, points), out.detach())
check("grad feats", got_feats, want_feats)
check("grad points", got_points, want_points)
x = torch.randn(1000, dtype=torch.float64, requires_grad=True)
y = torch.nn.functional.gelu(x)
check("gelu", ext.gelu_forward(x.detach()), y.detach())
check("gelu backward", ext.gelu_backward(torch.ones_like(x), x.detach()), torch.autograd.grad(y.sum(), x)[0])
expect_error(ext.forward, feats, points[:, :2], says="points")
''',
    "05": '''
import ch05_trilinear
from module import FeatureGrid
from ste import fake_quantize
from trilinear_function import trilinear as trilinear_function
from trilinear_op import trilinear
assert "site-packages" in ch05_trilinear.__file__, ch05_trilinear.__file__
check("torch.ops.ch05.trilinear", torch.ops.ch05.trilinear(feats, points), trilinear_ref(feats, points))
f, p = feats[:6, :, :2].clone().requires_grad_(), points[:6].clone().requires_grad_()
assert torch.autograd.gradcheck(trilinear, (f, p)) and torch.autograd.gradcheck(trilinear_function, (f, p))
x = torch.randn(1000)
check("fake_quantize", fake_quantize(x, 0.05, 0, -8, 7), torch.fake_quantize_per_tensor_affine(x, 0.05, 0, -8, 7), 0)
grid = FeatureGrid(resolution=4, features=3)
grid(points.float()).sum().backward()
assert next(grid.parameters()).grad.abs().sum() > 0
expect_error(trilinear, feats, points[:, :2], says="points")
''',
}


def _site_dirs() -> list[str]:
    """The folders that hold what a chapter's build and check need."""
    return [d for d in site.getsitepackages() if Path(d).is_dir()]  # this Python's: torch, setuptools, pip, ninja


def _fresh_venv(where: Path) -> tuple[Path, dict]:
    """A new venv that sees torch, setuptools, pip and ninja through a .pth file, and the environment to run it in."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    # A path line in a .pth file is added to sys.path, but the .pth files in that folder are not
    # read: the course's own course.pth (which puts this repository on sys.path) stays unread.
    (purelib / "course-deps.pth").write_text("\n".join(_site_dirs()) + "\n")
    ninja = shutil.which("ninja", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if ninja:
        (where / "bin" / "ninja").symlink_to(ninja)
    # As after `source venv/bin/activate`, and nothing of the course's own environment:
    # no PYTHONPATH, no LD_PRELOAD, no FORCE_CUDA.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV", "LD_PRELOAD", "FORCE_CUDA", "COURSE_"))}
    env.update(PATH=f"{where / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(where),
               PYTHONNOUSERSITE="1", PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INPUT="1")
    plan = toolkit.plan_build() if torch.cuda.is_available() else None
    if plan is not None and plan.toolkit is not None:  # what the README tells a learner to set
        env["CUDA_HOME"] = str(plan.toolkit.home)
        if plan.arch_list:
            env.setdefault("TORCH_CUDA_ARCH_LIST", plan.arch_list)
    return python, env


def _selected(chapter) -> bool:
    return os.environ.get("COURSE_PACKAGING_ALL", "") not in {"", "0"} or chapter.number in DEFAULT


@pytest.mark.aot
@pytest.mark.parametrize("chapter", PACKAGED, ids=_ids(PACKAGED))
def test_installs_outside_the_course(chapter, tmp_path):
    if not _selected(chapter):
        pytest.skip(f"installs only chapters {', '.join(sorted(DEFAULT))} by default; COURSE_PACKAGING_ALL=1 for all")
    assert ROOT.resolve() not in tmp_path.resolve().parents, f"{tmp_path} is inside the repository"
    copy = tmp_path / chapter.dirname
    shutil.copytree(chapter.path, copy, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    python, env = _fresh_venv(tmp_path / "venv")
    empty = tmp_path / "run"
    empty.mkdir()

    def run(args, cwd, timeout=120):
        return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)

    probe = run(["-c", "import torch, setuptools\ntry:\n    import coursekit\nexcept ImportError:\n    pass\n"
                       "else:\n    raise SystemExit('coursekit is importable: ' + coursekit.__file__)"], empty)
    assert probe.returncode == 0, f"the fresh venv is not fresh, or lacks torch/setuptools:\n{probe.stdout}{probe.stderr}"

    pip = run(["-m", "pip", "install", "--no-build-isolation", "--no-deps", str(copy)], empty, timeout=1200)
    if pip.returncode != 0:
        log = (pip.stdout + pip.stderr).splitlines()
        errors = [line for line in log if "error" in line.lower() and len(line) < 400][:30]
        pytest.fail(f"pip install of a copy of {chapter.dirname} failed; its errors:\n" + "\n".join(errors)
                    + "\n... and the end of pip's output:\n" + "\n".join(log[-25:]), pytrace=False)

    code = textwrap.dedent(REFERENCE) + CHECKS[chapter.number] + 'print("ok")\n'
    # From an empty folder (the installed Python files), and from inside the copy (its own
    # Python files shadow the installed ones and must find the installed extension).
    for cwd in (empty, copy):
        out = run(["-c", code], cwd)
        assert out.returncode == 0 and out.stdout.strip().endswith("ok"), (
            f"the installed {chapter.dirname}, run from {cwd}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    # and the chapter's demo, as `python demo.py` in the copy: it finds no coursekit and uses the installed module
    demo = run([str(copy / "demo.py")], copy, timeout=600)
    assert demo.returncode == 0, f"demo.py of the installed {chapter.dirname}:\n{demo.stdout[-3000:]}\n{demo.stderr[-3000:]}"
