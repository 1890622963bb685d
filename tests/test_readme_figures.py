"""Every timing a lesson states comes from committed data.

A time written in a chapter's README or appendix (a number followed by ms, µs or us) must be a
value, at the precision the text gives it, of that chapter's committed results (results/NN_*: its
files, and the files in its folders), or of a results file the same paragraph names
(`03_validate_cuda.json`, `results/06_upsample_sweep_cuda.json`). Matching any file at all would
let a stale number pass whenever some unrelated measurement happens to round to it. The course
README and the notebooks' text may quote any results file (their tables are generated from
them: tests/test_results_table.py). A duration that is not a measurement (a test's sleep, a
budget) is written out in words ("20 milliseconds"), so that it is not taken for one. The chapter
06 CUDA sources carry no timings in their comments at all. Regenerate the data with the script
that wrote it (each results file names it), then quote it; or don't quote it.
"""
import functools
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ["01_pybind_hello", "02_forward_kernel", "03_validate", "04_backward", "05_autograd", "06_upsample"]
# a number, optionally the end of a range ("0.15-0.20 ms", "0.15 to 0.20 ms"), then the unit
TIMING = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*(?:-|–|to)\s*(\d+(?:\.\d+)?))?\s*(ms|µs|us)\b")


def texts():
    """(markdown file, the chapter folder it belongs to or None) for every text that quotes timings."""
    yield ROOT / "README.md", None
    for chapter in CHAPTERS:
        for path in sorted((ROOT / chapter).glob("*.md")):
            yield path, chapter
    for path in sorted((ROOT / "notebooks").glob("*.md")):
        yield path, None


def nodes(obj):
    """obj and every value nested in it (JSON's dicts and lists), depth first."""
    yield obj
    for child in obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ():
        yield from nodes(child)


@functools.cache
def results() -> dict[str, object]:
    """Every committed results file, parsed, by its path under results/."""
    return {str(path.relative_to(ROOT / "results")): json.loads(path.read_text())
            for path in sorted((ROOT / "results").rglob("*.json"))}


def committed_values() -> dict[str, list[float]]:
    """The numbers of every results file, by its path under results/."""
    return {name: [float(v) for v in nodes(doc) if isinstance(v, (int, float)) and not isinstance(v, bool)]
            for name, doc in results().items()}


NAMED = re.compile(r"[\w./-]+\.json")


def paragraphs(text):
    """(number of the paragraph's first line, the paragraph) for the blank-line separated paragraphs."""
    lineno = 1
    for block in re.split(r"(\n\s*\n)", text):
        if block.strip():
            yield lineno, block
        lineno += block.count("\n")


def allowed(values: dict, chapter: str | None, paragraph: str) -> list[float]:
    """The values a timing in `paragraph` may quote: the chapter's results and the files it names."""
    if chapter is None:
        return [v for vs in values.values() for v in vs]
    named = NAMED.findall(paragraph)
    return [v for name, vs in values.items()
            if name.startswith(chapter[:3]) or any(name == n or n.endswith("/" + name) or name.endswith("/" + n)
                                                  for n in named)
            for v in vs]


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
    for path, chapter in texts():
        for first, paragraph in paragraphs(path.read_text()):
            quotable = allowed(values, chapter, paragraph)
            for lineno, written, unit in stated(paragraph):
                if not backed(written, unit, quotable):
                    where = [name for name, vs in values.items() if backed(written, unit, vs)]
                    missing.append(f"{path.relative_to(ROOT)}:{first + lineno - 1}: {written} {unit}"
                                   + (f" (a value of {', '.join(where[:3])}: name the file in the paragraph)"
                                      if where else ""))
    assert not missing, (f"{len(missing)} timings in the lessons are in none of the results files they may quote "
                         "(quote the committed data, or leave the number out):\n  " + "\n  ".join(missing[:60]))


# a time with its unit, then its share of the floor in brackets: "0.183 ms (97 %)" (a bare "12.4 (1%)" is not matched)
TIME_AND_FLOOR = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(ms|µs)\s*\((\d+(?:\.\d+)?)\s*%")


def timed_records() -> list[tuple[float, float]]:
    """(ms, fraction of the floor) of every record that has both (bench files: median_ms and
    fraction_of_floor; A/B files: ms and of_floor)."""
    return [(float(d[t]), float(d[f])) for doc in results().values() for d in nodes(doc) if isinstance(d, dict)
            for t, f in (("median_ms", "fraction_of_floor"), ("ms", "of_floor"))
            if isinstance(d.get(t), (int, float)) and isinstance(d.get(f), (int, float))]


def test_time_and_floor_fraction_come_from_one_record():
    """A time quoted with its share of the bandwidth floor ("0.183 ms (97 %)") is one record's
    pair, both at the precision written: a percentage left over from an earlier run, next to a
    time from the new one, fails here."""
    records = timed_records()
    wrong = []
    for path, _ in texts():
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for m in TIME_AND_FLOOR.finditer(line):
                written, unit, percent = m.groups()
                ms = float(written) / (1000 if unit == "µs" else 1)
                tol = 0.5 * 10 ** -(len(written.split(".")[1]) if "." in written else 0) / (1000 if unit == "µs" else 1)
                ptol = 0.5 * 10 ** -(len(percent.split(".")[1]) if "." in percent else 0)
                if not any(abs(t - ms) <= tol + 1e-12 and abs(100 * f - float(percent)) <= ptol + 1e-9 for t, f in records):
                    wrong.append(f"{path.relative_to(ROOT)}:{lineno}: {m.group(0)})")
    assert not wrong, ("times quoted with a share of the floor that no one record holds (time and share from "
                       "different runs, or misrounded):\n  " + "\n  ".join(wrong))


def test_no_timings_in_chapter_06_sources():
    found = []
    for path in sorted((ROOT / "06_upsample" / "csrc").iterdir()):
        for lineno, written, unit in stated(path.read_text()):
            found.append(f"{path.relative_to(ROOT)}:{lineno}: {written} {unit}")
    assert not found, "timings in code comments (they belong in results/ and the lesson):\n  " + "\n  ".join(found)
