"""Every notebook in notebooks/ runs headless, top to bottom.

The notebooks plot committed results from a real GPU run; with COURSE_QUICK=1
they also time the kernels at tiny sizes on this machine, so the whole
pipeline (build, time, plot) is exercised without a GPU and without touching
the committed results or figures.
"""

from __future__ import annotations

import os

import pytest

from coursekit import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.skipif(not NOTEBOOKS, reason="no notebooks yet")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("COURSE_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    if nb.metadata.get("course", {}).get("hosted"):
        pytest.skip("a notebook for a hosted GPU (Colab, Kaggle): it clones the course, so it runs there")
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError, with the failing cell, on any error
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
