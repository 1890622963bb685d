"""Decide how a chapter is built: CPU only, or CPU + CUDA, and with which toolkit.

The rules (the same ones torchvision, pytorch3d and mmcv follow):

* CUDA sources are compiled when torch is a CUDA build, a CUDA toolkit is found
  and a GPU is visible, or when ``FORCE_CUDA=1`` asks for it (CI compiles
  CUDA code on machines without a GPU this way). ``COURSE_BUILD=cpu`` forces a
  CPU-only build.
* The toolkit is ``$CUDA_HOME`` (or ``$CUDA_PATH``) when set, else
  ``/usr/local/cuda``, else the one that ``nvcc`` on PATH belongs to. On some
  machines ``nvcc`` on PATH is a small wrapper script outside the toolkit;
  torch's own guess (the parent of nvcc's folder) is then wrong, so we resolve
  it ourselves and tell torch.
* ``TORCH_CUDA_ARCH_LIST`` picks the GPU architectures. When it is unset, torch
  compiles for the visible GPU; with no GPU we default to ``9.0`` (Hopper).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_ARCH_WITHOUT_GPU = "9.0"

# The oldest torch the course runs on (requirements.txt says the same): chapter 06 is built on
# the LibTorch stable ABI of torch 2.10, and the course's suite passes on 2.10.
MIN_TORCH = (2, 10)


def torch_too_old(version: str) -> bool:
    """Is this torch version (e.g. "2.9.1+cu128") older than MIN_TORCH?"""
    parts = re.findall(r"\d+", version)[:2]
    return tuple(int(p) for p in parts) < MIN_TORCH


class SetupError(RuntimeError):
    """A problem that stops a build, with the fix in its message."""


@dataclass
class Toolkit:
    home: Path
    nvcc: Path
    version: str | None  # "13.0"


@dataclass
class BuildPlan:
    cuda: bool
    reason: str
    toolkit: Toolkit | None = None
    arch_list: str | None = None
    notes: list[str] = field(default_factory=list)


def _has_toolkit(home: Path) -> bool:
    if not (home / "bin" / "nvcc").is_file():
        return False
    headers = [home / "include" / "cuda_runtime.h", *home.glob("targets/*/include/cuda_runtime.h")]
    return any(h.is_file() for h in headers)


def _nvcc_version(nvcc: Path) -> str | None:
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else None


def _homes_behind_path_nvcc() -> list[Path]:
    """Toolkit folders that the `nvcc` found on PATH may belong to."""
    found = shutil.which("nvcc")
    if not found:
        return []
    real = Path(found).resolve()
    homes = [real.parent.parent]
    # A wrapper script: look for the real nvcc it execs.
    try:
        text = real.read_text(errors="ignore")[:4096]
    except OSError:
        return homes
    for m in re.finditer(r"(/[^\s\"']+)/bin/nvcc\b", text):
        homes.append(Path(m.group(1)))
    return homes


def find_toolkit() -> Toolkit | None:
    """The CUDA toolkit to build with, or None. Raises SetupError if CUDA_HOME is set but wrong."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var)
        if value:
            home = Path(value)
            if not _has_toolkit(home):
                raise SetupError(
                    f"{var}={value} is not a CUDA toolkit (no bin/nvcc and include/cuda_runtime.h there).\n"
                    f"  fix: unset {var} to let the course find the toolkit, or point it at one, "
                    f"e.g. export {var}=/usr/local/cuda"
                )
            return Toolkit(home, home / "bin" / "nvcc", _nvcc_version(home / "bin" / "nvcc"))
    for home in [Path("/usr/local/cuda"), *_homes_behind_path_nvcc()]:
        if _has_toolkit(home):
            home = home.resolve()
            return Toolkit(home, home / "bin" / "nvcc", _nvcc_version(home / "bin" / "nvcc"))
    return None


def compute_sanitizer() -> str | None:
    """compute-sanitizer (it comes with the CUDA toolkit): on PATH, else in the toolkit
    find_toolkit() finds, else in /usr/local/cuda; None if there is none."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    try:
        toolkit = find_toolkit()
    except SetupError:
        toolkit = None
    homes = ([toolkit.home] if toolkit is not None else []) + [Path("/usr/local/cuda")]
    return next((str(h / "bin" / "compute-sanitizer") for h in homes if (h / "bin" / "compute-sanitizer").is_file()),
                None)


def sanitizer_env() -> dict[str, str]:
    """The environment the course runs a sanitizer in. Without PyTorch's caching allocator every
    tensor is its own cudaMalloc, so memcheck sees an access even one element past a tensor's end
    (with the cache, the block around it is allocated too). COURSE_SANITIZER tells the tests."""
    return dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1", COURSE_SANITIZER="1")


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def plan_build() -> BuildPlan:
    """Decide CPU or CUDA for this machine. Raises SetupError when a requested CUDA build cannot work."""
    import torch

    mode = os.environ.get("COURSE_BUILD", "auto").strip().lower()
    if mode not in {"auto", "cpu", "cuda"}:
        raise SetupError(f"COURSE_BUILD={mode!r}: use auto, cpu or cuda")
    forced = _truthy("FORCE_CUDA") or mode == "cuda"
    if mode == "cpu":
        return BuildPlan(False, "COURSE_BUILD=cpu")

    torch_cuda = torch.version.cuda
    if torch_cuda is None:
        if forced:
            raise SetupError(
                f"FORCE_CUDA=1, but torch {torch.__version__} is a CPU-only build.\n"
                "  fix: install a CUDA build of torch (https://pytorch.org/get-started/locally/) or unset FORCE_CUDA"
            )
        return BuildPlan(False, f"torch {torch.__version__} is a CPU-only build")

    toolkit = find_toolkit()
    gpu = torch.cuda.is_available()
    if toolkit is None:
        msg = (
            "no CUDA toolkit found (looked at $CUDA_HOME, /usr/local/cuda and nvcc on PATH).\n"
            f"  fix: install the CUDA {torch_cuda} toolkit and set CUDA_HOME to it"
        )
        if forced:
            raise SetupError("FORCE_CUDA=1, but " + msg)
        return BuildPlan(False, "no CUDA toolkit found", notes=[msg] if gpu else [])
    if not gpu and not forced:
        return BuildPlan(False, "no GPU visible (FORCE_CUDA=1 compiles the CUDA code anyway)", toolkit)

    plan = BuildPlan(True, "FORCE_CUDA=1" if forced and not gpu else "GPU and toolkit found", toolkit)
    if toolkit.version and toolkit.version.split(".")[0] != torch_cuda.split(".")[0]:
        raise SetupError(
            f"CUDA toolkit {toolkit.version} at {toolkit.home} does not match torch's CUDA {torch_cuda}.\n"
            f"  fix: point CUDA_HOME at a CUDA {torch_cuda.split('.')[0]}.x toolkit, or install the torch build "
            f"for CUDA {toolkit.version} (https://pytorch.org/get-started/locally/)"
        )
    if toolkit.version and toolkit.version != torch_cuda:
        plan.notes.append(f"toolkit {toolkit.version} vs torch CUDA {torch_cuda}: same major version, works")

    arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if arch:
        plan.arch_list = arch
    elif gpu:
        major, minor = torch.cuda.get_device_capability()
        plan.arch_list = f"{major}.{minor}"
    else:
        plan.arch_list = DEFAULT_ARCH_WITHOUT_GPU
        plan.notes.append(f"no GPU to ask, so TORCH_CUDA_ARCH_LIST defaults to {DEFAULT_ARCH_WITHOUT_GPU}")
    return plan


def apply(plan: BuildPlan) -> None:
    """Make torch.utils.cpp_extension use the toolkit and arch list of `plan`."""
    import sys

    # ninja may live beside this Python (a venv that is not activated): let torch find it.
    bindir = os.path.dirname(sys.executable)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    if plan.toolkit is not None:
        os.environ["CUDA_HOME"] = str(plan.toolkit.home)
    if plan.cuda and plan.arch_list:
        os.environ["TORCH_CUDA_ARCH_LIST"] = plan.arch_list

    # torch warns "No CUDA runtime is found" on machines without a GPU; doctor reports that clearly.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    import torch.utils.cpp_extension as cpp_extension

    if plan.toolkit is not None:
        # cpp_extension reads CUDA_HOME once, when first imported; correct its copy too.
        cpp_extension.CUDA_HOME = str(plan.toolkit.home)


# ----------------------------------------------------------------------------
# One C++ standard library per process.
#
# An extension must share the libstdc++ that torch has already loaded. A C++ compiler
# that ships only a static libstdc++ (libstdc++.a and no libstdc++.so; seen: a GCC
# installed under /opt and named by $CXX) copies the parts an extension uses into the
# extension, with their symbols exported. At run time the dynamic linker binds some of
# those symbols to the copy and some to the shared libstdc++ that torch loaded: two
# halves of the iostream and locale state, and the first std::ostringstream (every
# TORCH_CHECK message with a number) crashes with a segmentation fault. Keeping the
# copy private to the extension -- hidden symbols, bound inside it -- removes the mix.
# A compiler with a shared libstdc++ needs nothing.

PRIVATE_LIBSTDCXX = ["-static-libstdc++", "-Wl,--exclude-libs,ALL", "-Wl,-Bsymbolic"]


def static_libstdcxx(cxx: str | None = None) -> bool:
    """Does this C++ compiler link libstdc++ statically (it has no libstdc++.so)?"""
    return _prints_bare_libstdcxx(cxx or os.environ.get("CXX") or "c++")


@functools.lru_cache(maxsize=None)
def _prints_bare_libstdcxx(cxx: str) -> bool:
    """Asked once per compiler and process (every build asks)."""
    try:
        found = subprocess.run([cxx, "-print-file-name=libstdc++.so"], capture_output=True, text=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return found == "libstdc++.so"  # gcc and clang print the bare name when they have no such file


def libstdcxx_link_flags(cxx: str | None = None) -> list[str]:
    """The link flags that keep an extension on one libstdc++ (none for most compilers)."""
    return list(PRIVATE_LIBSTDCXX) if sys.platform.startswith("linux") and static_libstdcxx(cxx) else []


# ----------------------------------------------------------------------------
# Which GPUs a build can run on.
#
# nvcc puts the device code of a .cu file into a "fatbin" inside the .so: one entry
# per architecture of TORCH_CUDA_ARCH_LIST, machine code (SASS, "sm_90") or PTX
# ("compute_90", compiled by the driver for newer GPUs). A GPU that no entry covers
# fails at the first launch with "no kernel image is available for execution on the
# device"; the fix is to rebuild with TORCH_CUDA_ARCH_LIST naming that GPU.

_FATBIN_MAGIC = 0xBA55ED50


def gpu_archs(binary: str | Path) -> list[str]:
    """The architectures in a built extension's fatbins: "sm_90" (machine code), "compute_90" (PTX)."""
    import struct

    data = Path(binary).read_bytes()
    found: set[str] = set()
    start = data.find(struct.pack("<I", _FATBIN_MAGIC))
    while start >= 0 and start + 16 <= len(data):
        _, _, header, size = struct.unpack_from("<IHHQ", data, start)
        entry, end = start + header, start + header + size
        while entry + 32 <= min(end, len(data)):
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch = struct.unpack_from("<I", data, entry + 28)[0]
            if kind in (1, 2) and 10 <= arch < 1000:
                found.add(f"{'compute' if kind == 1 else 'sm'}_{arch}")
            if entry_header == 0:
                break
            entry += entry_header + payload
        start = data.find(struct.pack("<I", _FATBIN_MAGIC), max(end, start + 4))
    return sorted(found, key=lambda a: (int(a.split("_")[1]), a))


def uncovered_gpu(archs: list[str], capability: tuple[int, int]) -> str | None:
    """What is wrong, with the fix, when a build with these architectures cannot run on a GPU of this
    compute capability ("built for ...; this GPU is ..."); None when it can (or nothing was found)."""
    if not archs or covers(archs, capability):
        return None
    cc = f"{capability[0]}.{capability[1]}"
    return (f"built for {', '.join(archs)}; this GPU is compute capability {cc}, so every kernel launch would "
            f"fail with \"no kernel image is available\".\n"
            f"  fix: TORCH_CUDA_ARCH_LIST=\"{cc}\" (or unset it: the build then targets the visible GPU)")


def covers(archs: list[str], capability: tuple[int, int]) -> bool:
    """Can a GPU of this compute capability run a build with these architectures?

    Machine code runs on the same major version with an equal or higher minor (sm_80 on an
    8.6 GPU); PTX is compiled by the driver for any GPU at least as new.
    """
    cc = capability[0] * 10 + capability[1]
    for a in archs:
        kind, number = a.split("_")
        n = int(number)
        if kind == "sm" and n // 10 == capability[0] and n <= cc:
            return True
        if kind == "compute" and n <= cc:
            return True
    return False
