"""Writes notebooks/hosted_gpu.ipynb (run: .venv/bin/python notebooks/make_hosted_gpu.py).

The notebook grades the CUDA exercises on a hosted notebook GPU (Colab, Kaggle: a T4, compute
capability 7.5). It clones the course, so the test suite does not run it (its metadata says
"course": {"hosted": true}; tests/test_notebooks.py skips such notebooks); it has no outputs.
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent

cells = [
    new_markdown_cell("""# Grade the CUDA exercises on a hosted GPU (Colab, Kaggle)

No GPU of your own? A hosted notebook lends one: on Colab, *Runtime → Change runtime type → T4 GPU*;
on Kaggle, *Settings → Accelerator → GPU T4*. A T4 is compute capability 7.5 (sm_75); every kernel
of the course compiles for it. These images come with a CUDA build of torch and a CUDA toolkit, so
the course runs with the notebook's own Python (`COURSE_PYTHON=python`), without a `.venv`.

Run the cells in order. Your workspace lives on the hosted machine: download what you wrote before
the session ends (or keep it in a clone of your own repository)."""),
    new_code_cell("""import torch

assert torch.cuda.is_available(), "no GPU: pick a GPU runtime (Colab: Runtime > Change runtime type > T4 GPU)"
major, minor = torch.cuda.get_device_capability()
print(torch.__version__, "CUDA", torch.version.cuda, "|", torch.cuda.get_device_name(), f"sm_{major}{minor}")
!nvcc --version | tail -n 2"""),
    new_markdown_cell("""Clone the course: set `REPO_URL` to the address you cloned it from (or upload the folder and
skip this cell)."""),
    new_code_cell("""REPO_URL = ""  # the course's git URL
assert REPO_URL, "set REPO_URL to the course's git URL"
!git clone --depth 1 {REPO_URL} course
%cd course
!python -m pip install --quiet ninja  # torch and pytest are already there"""),
    new_markdown_cell("""Compile for this GPU only (the fastest build): `TORCH_CUDA_ARCH_LIST` is its compute capability,
`7.5` on a T4. The doctor checks torch, the toolkit (its major version must match torch's CUDA),
ninja and the compiler, and says how to fix what is off."""),
    new_code_cell("""import os

os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
os.environ["COURSE_PYTHON"] = "python"
!./course doctor"""),
    new_markdown_cell("""Make your workspace of a chapter (`workspace/02_forward_kernel/`, the chapter with the exercises
replaced by stubs), write your code between the `BEGIN EXERCISE` and `END EXERCISE` lines (the
file browser on the left opens the files), and grade it. With a GPU, the CUDA exercises run on the
GPU itself, under the same tests, at all sizes."""),
    new_code_cell("""!./course exercise 02
!./course grade 02"""),
    new_code_cell("""# one exercise, faster; -v shows every failing test
!./course grade 02 cuda-kernel"""),
]

nb = new_notebook(cells=cells, metadata={
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
    "accelerator": "GPU",
    "course": {"hosted": True},
})
nbformat.write(nb, ROOT / "notebooks" / "hosted_gpu.ipynb")
