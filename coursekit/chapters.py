"""The chapters of the course, in order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import ROOT


@dataclass(frozen=True)
class Chapter:
    number: str  # "02"
    dirname: str  # "02_forward_kernel"
    module: str  # the extension's Python module name (TORCH_EXTENSION_NAME)
    title: str

    @property
    def path(self) -> Path:
        return ROOT / self.dirname

    @property
    def test_file(self) -> Path:
        return ROOT / "tests" / f"test_{self.dirname}.py"

    @property
    def workspace(self) -> Path:
        return ROOT / "workspace" / self.dirname


CHAPTERS = [
    Chapter("01", "01_pybind_hello", "ch01_hello", "C++ meets Python: a first extension"),
    Chapter("02", "02_forward_kernel", "ch02_trilinear", "Trilinear interpolation forward, CPU and CUDA"),
    Chapter("03", "03_validate", "ch03_trilinear", "Validate and time a kernel honestly"),
    Chapter("04", "04_backward", "ch04_trilinear", "Gradients by hand: GELU and trilinear backward"),
    Chapter("05", "05_autograd", "ch05_trilinear", "From kernels to a first-class PyTorch operator"),
    Chapter("06", "06_upsample", "ch06_upsample", "Bilinear upsampling in three coordinate conventions"),
]


def existing() -> list[Chapter]:
    """The chapters present in this checkout."""
    return [c for c in CHAPTERS if c.path.is_dir()]


def find(key: str | Path) -> Chapter:
    """A chapter by number ("2", "02"), folder name, or any path whose last part is a chapter folder."""
    name = Path(str(key)).name
    for c in CHAPTERS:
        if name in {c.number, c.number.lstrip("0"), c.dirname}:
            return c
    raise KeyError(f"no chapter {key!r}; chapters are: " + ", ".join(c.dirname for c in CHAPTERS))
