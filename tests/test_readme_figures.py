"""Every timing a lesson states comes from committed data.

A time written in a README or an appendix (a number followed by ms, µs or us) must be a value of
some committed results file under results/ (any JSON there, at the precision the text gives it),
and the chapter 06 CUDA sources carry no timings in their comments at all. Regenerate the data
with the script that wrote it (each results file names it), then quote it; or don't quote it.
"""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ["01_pybind_hello", "02_forward_kernel", "03_validate", "04_backward", "05_autograd", "06_upsample"]
# a number, optionally the end of a range ("0.15-0.20 ms", "0.15 to 0.20 ms"), then the unit
TIMING = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*(?:-|–|to)\s*(\d+(?:\.\d+)?))?\s*(ms|µs|us)\b")


def texts():
    yield ROOT / "README.md"
    for chapter in CHAPTERS:
        yield from sorted((ROOT / chapter).glob("*.md"))
    yield from sorted((ROOT / "notebooks").glob("*.md"))


def numbers(obj, out):
    if isinstance(obj, bool):
        return out
    if isinstance(obj, (int, float)):
        out.append(float(obj))
    elif isinstance(obj, dict):
        for v in obj.values():
            numbers(v, out)
    elif isinstance(obj, list):
        for v in obj:
            numbers(v, out)
    return out


def committed_values():
    values = []
    for path in sorted((ROOT / "results").rglob("*.json")):
        numbers(json.loads(path.read_text()), values)
    return values


def stated(text):
    """(line number, the number as written, unit) for every timing in `text`."""
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in TIMING.finditer(line):
            for g in (m.group(1), m.group(2)):
                if g is not None:
                    yield lineno, g, m.group(3)


def backed(written, unit, values):
    """True when some committed value, in ms (or, for a time in µs, in µs), rounds to `written`."""
    decimals = len(written.split(".")[1]) if "." in written else 0
    target, tol = float(written), 0.5 * 10 ** -decimals + 1e-12
    scales = (1.0,) if unit == "ms" else (1e3, 1.0)  # results hold ms; a few fields hold µs
    return any(abs(v * s - target) <= tol for v in values for s in scales)


def test_every_stated_timing_is_in_a_results_file():
    values = committed_values()
    missing = []
    for path in texts():
        for lineno, written, unit in stated(path.read_text()):
            if not backed(written, unit, values):
                missing.append(f"{path.relative_to(ROOT)}:{lineno}: {written} {unit}")
    assert not missing, (f"{len(missing)} timings in the lessons are in no results/*.json file "
                         "(quote the committed data, or leave the number out):\n  " + "\n  ".join(missing[:60]))


def test_no_timings_in_chapter_06_sources():
    found = []
    for path in sorted((ROOT / "06_upsample" / "csrc").iterdir()):
        for lineno, written, unit in stated(path.read_text()):
            found.append(f"{path.relative_to(ROOT)}:{lineno}: {written} {unit}")
    assert not found, "timings in code comments (they belong in results/ and the lesson):\n  " + "\n  ".join(found)
