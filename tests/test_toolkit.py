"""The build set-up: failures end in a message that says what to do (no toolkit is harmed),
and what succeeds builds CPU kernels that can use torch's threads."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
import torch

from coursekit import ROOT, build, chapters, toolkit


def fake_toolkit(root: Path, version: str) -> Path:
    """A folder that looks like a CUDA toolkit whose nvcc reports `version`."""
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("// fake\n")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {version}, V{version}.0'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return root


@pytest.fixture
def clean_env(monkeypatch):
    for var in ("CUDA_HOME", "CUDA_PATH", "FORCE_CUDA", "COURSE_BUILD", "TORCH_CUDA_ARCH_LIST"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_wrong_cuda_home(clean_env, tmp_path):
    clean_env.setenv("CUDA_HOME", str(tmp_path / "not-a-toolkit"))
    with pytest.raises(toolkit.SetupError, match=r"CUDA_HOME=.* is not a CUDA toolkit.*\n  fix: unset CUDA_HOME"):
        toolkit.find_toolkit()


def test_cuda_home_wins(clean_env, tmp_path):
    home = fake_toolkit(tmp_path / "cuda", "13.0")
    clean_env.setenv("CUDA_HOME", str(home))
    found = toolkit.find_toolkit()
    assert found.home == home and found.version == "13.0"


def test_nvcc_wrapper_outside_the_toolkit(clean_env, tmp_path):
    """nvcc on PATH is a script elsewhere that execs the real one: the toolkit is found behind it."""
    home = fake_toolkit(tmp_path / "opt" / "cuda-13.0", "13.0")
    bindir = tmp_path / "wrappers"
    bindir.mkdir()
    wrapper = bindir / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {home}/bin/nvcc "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    clean_env.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    assert home in toolkit._homes_behind_path_nvcc()


def test_version_mismatch(clean_env, tmp_path):
    if torch.version.cuda is None:
        pytest.skip("needs a CUDA build of torch")
    other = "11.8" if not torch.version.cuda.startswith("11") else "12.4"
    clean_env.setenv("CUDA_HOME", str(fake_toolkit(tmp_path / "cuda", other)))
    clean_env.setenv("FORCE_CUDA", "1")
    with pytest.raises(toolkit.SetupError, match=rf"CUDA toolkit {other} .* does not match torch's CUDA .*\n  fix: point CUDA_HOME"):
        toolkit.plan_build()


def test_force_cuda_without_toolkit(clean_env, monkeypatch):
    if torch.version.cuda is None:
        pytest.skip("needs a CUDA build of torch")
    monkeypatch.setattr(toolkit, "find_toolkit", lambda: None)
    clean_env.setenv("FORCE_CUDA", "1")
    with pytest.raises(toolkit.SetupError, match=r"FORCE_CUDA=1, but no CUDA toolkit found.*\n  fix: install the CUDA"):
        toolkit.plan_build()


def test_unknown_build_mode(clean_env):
    clean_env.setenv("COURSE_BUILD", "gpu")
    with pytest.raises(toolkit.SetupError, match="COURSE_BUILD='gpu': use auto, cpu or cuda"):
        toolkit.plan_build()


def test_missing_ninja(clean_env, monkeypatch):
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: False)
    with pytest.raises(toolkit.SetupError, match=r"ninja is not installed.*\n  fix: python -m pip install ninja"):
        build.build(Path(__file__).parents[1] / "01_pybind_hello", cuda=False)


# Chapters whose CPU kernels use at::parallel_for (chapter 06 uses the stable ABI's
# torch::stable::parallel_for, which runs inside libtorch: no OpenMP in its own code).
PARALLEL_CHAPTERS = [c for c in chapters.existing() if build.chapter_flags(c)[2]
                     and any("at::parallel_for(" in p.read_text() for p in (c.path / "csrc").glob("*.cpp"))]


@pytest.mark.skipif(not sys.platform.startswith("linux") or not torch.backends.openmp.is_available(),
                    reason="torch's OpenMP backend on Linux is what this checks")
@pytest.mark.parametrize("chapter", PARALLEL_CHAPTERS, ids=lambda c: c.dirname)
def test_cpu_kernels_can_use_torch_threads(chapter):
    """at::parallel_for expands to `#pragma omp parallel` in the extension's own code.

    Compiled without -fopenmp the header takes its serial branch silently and the CPU
    kernels run on one thread whatever torch.set_num_threads says. Compiled with it,
    the library calls into the OpenMP runtime (GOMP_parallel for GCC, __kmpc_fork_call
    for clang): that call is what this checks, the part a build can get wrong.
    """
    module = build.build(chapter.path)
    binary = Path(module.__file__).read_bytes()
    assert b"GOMP_parallel" in binary or b"__kmpc_fork_call" in binary, (
        f"{Path(module.__file__).name} does not call the OpenMP runtime: was it compiled without -fopenmp?")


def _fake_compiler(tmp_path: Path, answer: str) -> str:
    cxx = tmp_path / "fake-c++"
    cxx.write_text(f"#!/bin/sh\necho {answer}\n")
    cxx.chmod(cxx.stat().st_mode | stat.S_IEXEC)
    return str(cxx)


def test_a_compiler_with_only_a_static_libstdcxx_gets_a_private_copy(tmp_path):
    """A compiler without libstdc++.so (it prints the bare name) would mix its copy with torch's: link it privately."""
    static = _fake_compiler(tmp_path, "libstdc++.so")
    assert toolkit.static_libstdcxx(static)
    if sys.platform.startswith("linux"):
        assert toolkit.libstdcxx_link_flags(static) == toolkit.PRIVATE_LIBSTDCXX


def test_a_compiler_with_a_shared_libstdcxx_needs_no_flags(tmp_path):
    shared = _fake_compiler(tmp_path, "/usr/lib/gcc/x86_64-linux-gnu/12/libstdc++.so")
    assert not toolkit.static_libstdcxx(shared)
    assert toolkit.libstdcxx_link_flags(shared) == []
    assert not toolkit.static_libstdcxx(str(tmp_path / "no-such-compiler"))


def _fatbin(*entries: tuple[int, int]) -> bytes:
    """A fatbin as nvcc lays it out: a 16-byte header, then per entry a 64-byte header (kind, arch) and no payload."""
    import struct

    body = b"".join(struct.pack("<HHIQ", kind, 1, 64, 0) + struct.pack("<3I", 0, 0, 0) + struct.pack("<I", arch)
                    + bytes(32) for kind, arch in entries)
    return b"\x7fELF junk" + struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body + b"tail"


def test_gpu_archs_reads_the_fatbin(tmp_path):
    lib = tmp_path / "ext.so"
    lib.write_bytes(_fatbin((2, 90), (1, 90), (2, 80)))
    assert toolkit.gpu_archs(lib) == ["sm_80", "compute_90", "sm_90"]
    lib.write_bytes(b"no device code here")
    assert toolkit.gpu_archs(lib) == []


@pytest.mark.parametrize("archs, capability, ok", [
    (["sm_90"], (9, 0), True),
    (["sm_80"], (8, 6), True),        # machine code runs on a newer minor of the same major
    (["sm_86"], (8, 0), False),
    (["sm_90"], (10, 0), False),      # not on a new major: "no kernel image is available"
    (["sm_90", "compute_90"], (12, 0), True),  # PTX is compiled by the driver for newer GPUs
    (["compute_90"], (8, 0), False),
])
def test_which_gpus_a_build_covers(archs, capability, ok):
    assert toolkit.covers(archs, capability) == ok


def test_the_torch_floor_is_one_number():
    """requirements.txt and the doctor agree on the oldest torch the course runs on."""
    floor = ".".join(map(str, toolkit.MIN_TORCH))
    assert f"torch>={floor}" in (Path(__file__).parents[1] / "requirements.txt").read_text()
    assert toolkit.torch_too_old("2.9.1+cu128") and not toolkit.torch_too_old(f"{floor}.0")
    assert not toolkit.torch_too_old(torch.__version__), f"torch {torch.__version__} is below the floor {floor}"


def test_a_build_without_code_for_the_visible_gpu_is_refused_with_the_fix(tmp_path, monkeypatch):
    lib = tmp_path / "ext.so"
    lib.write_bytes(_fatbin((2, 90)))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (12, 0))
    with pytest.raises(toolkit.SetupError, match=r'TORCH_CUDA_ARCH_LIST="12.0"'):
        build._check_gpu_code(lib)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    build._check_gpu_code(lib)  # covered: no error


@pytest.mark.parametrize("argv", [["grade", "06", "--cpu-only", "gather-backward", "-v"],
                                  ["grade", "06", "gather-backward", "--cpu-only", "-v"],
                                  ["grade", "--cpu-only", "-v", "06", "gather-backward"]])
def test_grade_takes_options_and_exercises_in_any_order(argv, monkeypatch):
    import coursekit.__main__ as cli

    seen = []
    monkeypatch.setattr(cli, "cmd_grade", lambda args: seen.append(args) or 0)
    assert cli.main(argv) == 0
    (args,) = seen
    assert (args.chapter, args.exercises, args.cpu_only, args.verbose) == ("06", ["gather-backward"], True, True)


# Code that two chapters share and must keep identical: a change to one is a change to both, or a
# lesson's diff that says something it does not mean.
IDENTICAL = [("04_backward/csrc/pack.cuh", "05_autograd/csrc/pack.cuh")]
SAME_FORMULATION = ["04_backward/reference.py", "05_autograd/reference.py"]  # as 03_validate/reference.py


@pytest.mark.parametrize("a, b", IDENTICAL, ids=[a for a, _ in IDENTICAL])
def test_shared_files_stay_identical(a, b):
    assert (ROOT / a).read_bytes() == (ROOT / b).read_bytes(), f"{a} and {b} differ: they are one file in two chapters"


@pytest.mark.parametrize("path", SAME_FORMULATION)
def test_references_share_chapter_03s_formulation(path):
    """CORNER_OFFSETS, corner_weights and trilinear of every reference.py are chapter 03's, statement for
    statement (docstrings and comments aside): one reference formulation in the course."""
    import ast

    def formulation(p):
        found = {}
        for node in ast.parse((ROOT / p).read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name in ("corner_weights", "trilinear"):
                node.body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                                                          and isinstance(n.value.value, str))]
                found[node.name] = ast.dump(node)
            elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CORNER_OFFSETS"]:
                found["CORNER_OFFSETS"] = ast.dump(node)
        return found

    theirs = formulation("03_validate/reference.py")
    assert sorted(theirs) == ["CORNER_OFFSETS", "corner_weights", "trilinear"]
    assert formulation(path) == theirs, f"{path} is not written as 03_validate/reference.py"


def test_bench_in_turns_keeps_each_calls_lowest_median():
    """timing.bench_in_turns: one Timing per call, in the calls' order, each call timed in every turn
    (one round after the other), and each result its lowest median."""
    import time

    from coursekit import timing

    order = []
    slow_turns = iter([0.004, 0.001, 0.004])  # the slow call is fast in its second turn only

    def fast():
        order.append("fast")

    def slow():
        order.append("slow")
        time.sleep(delay)

    delay = 0.0
    rounds = []

    def slow_turn():  # a new delay at the first (warm-up) call of each turn
        nonlocal delay
        if not order or order[-1] != "slow":
            delay = next(slow_turns)
            rounds.append(delay)
        slow()

    got = timing.bench_in_turns([fast, slow_turn], "cpu", turns=3, min_run_time=0.02)
    assert len(got) == 2 and got[0].median_ms < got[1].median_ms
    assert rounds == [0.004, 0.001, 0.004], f"each call is timed once per turn, in rounds: {rounds}"
    assert 0.9 <= got[1].median_ms < 3.5, f"the slow call's lowest median (1 ms turn), got {got[1].median_ms:.2f} ms"
    firsts = [i for i, name in enumerate(order) if name == "slow" and (i == 0 or order[i - 1] != "slow")]
    assert len(firsts) == 3 and all(order[i - 1] == "fast" for i in firsts), "the turns alternate the calls"
