"""The results tables are exactly what the committed data says.

`python -m coursekit.results --write` writes the full tables into results/README.md and a
short summary into README.md; both must be what it prints now.
"""

import json
import re

from coursekit import ROOT, results

REGENERATE = "regenerate it: python -m coursekit.results --write"


def test_full_tables_match_results():
    text = (results.RESULTS / "README.md").read_text()
    assert results.results_block() in text, f"results/README.md's tables differ from results/*.json; {REGENERATE}"


def test_readme_summary_matches_results():
    readme = (ROOT / "README.md").read_text()
    assert results.summary_block() in readme, f"README.md's results summary differs from results/*.json; {REGENERATE}"


def test_readme_has_no_full_table():
    """The full tables live in results/README.md; the README holds the summary only."""
    readme = (ROOT / "README.md").read_text()
    assert results.START not in readme and results.END not in readme


def test_every_row_names_its_data():
    rows = results.rows()
    assert rows, "no timing data in results/"
    for row in rows:
        assert (results.RESULTS / row[-1].strip("`")).is_file()


def test_every_file_names_the_script_that_writes_it():
    for path in sorted(results.RESULTS.glob("*_c*.json")):
        stem, device = path.stem.rsplit("_", 1)
        assert device in ("cuda", "cpu"), path.name
        script = results.WRITERS.get(stem)
        assert script, f"{path.name}: add the script that writes it to coursekit.results.WRITERS"
        assert f"{stem}_" in (ROOT / script).read_text(), f"{script} does not write {path.name}"


def test_graph_replays_compared_only_with_graph_replays():
    """A "GPU only" time (CUDA graph replays) is never set against a time per ordinary call."""
    for _, _, ours, compare in results.SPECS:
        for other in compare.values():
            assert results.like_for_like(ours, other), (ours, other)
    for _, _, _, pairs in results.HEADLINES:
        for _, ours, peers in pairs:
            for other in peers:
                assert results.like_for_like(ours, other), (ours, other)


def test_summary_cases_are_in_the_data():
    """Each summary row's times are records of its file, and its ratio is their quotient."""
    for _, _, stem, pairs in results.HEADLINES:
        _, cases = results.headline_cases(stem, pairs)
        path = results.RESULTS / f"{stem}_cuda.json"
        if not path.is_file():
            continue
        times = {r["median_ms"] for r in json.loads(path.read_text())["records"] if "median_ms" in r}
        assert cases, f"no case of {stem} in {path.name}"
        for case in cases:
            assert case["ours"] in times
            if "ratio" in case:
                assert case["peer_ms"] in times
                assert case["ratio"] == case["peer_ms"] / case["ours"]


def test_summary_cells_agree_with_their_times():
    table, _ = results.summary_rows()
    assert table
    for row in table:
        for cell in row[4:]:
            m = re.match(r"\*\*([\d.]+)×\*\*: ([\d.]+) vs ([\d.]+) ms", cell)
            if m:
                ratio, ours, peer = map(float, m.groups())
                assert abs(peer / ours - ratio) / ratio < 0.05, cell


def test_sweep_summaries_match_results():
    """Chapter 06's sweep summaries (README.md, SPEED.md) are what 06_upsample/sweep.py makes of its file."""
    import importlib.util

    from coursekit import timing

    spec = importlib.util.spec_from_file_location("ch06_sweep", ROOT / "06_upsample" / "sweep.py")
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    doc = timing.load(results.RESULTS / "06_upsample_sweep_cuda.json")
    for name, short in (("README.md", True), ("SPEED.md", False)):
        text = (ROOT / "06_upsample" / name).read_text()
        block = f"{sweep.START}\n{sweep.summary(doc, short=short)}{sweep.END}"
        assert block in text, f"06_upsample/{name}'s sweep summary differs from the results; python 06_upsample/sweep.py --readme"
    cpu = timing.load(results.RESULTS / "06_upsample_sweep_cpu.json")
    block = f"{sweep.CPU_START}\n{sweep.summary(cpu)}{sweep.CPU_END}"
    assert block in (ROOT / "06_upsample" / "SPEED.md").read_text(), \
        "06_upsample/SPEED.md's CPU sweep summary differs from the results; python 06_upsample/sweep.py --readme"


def test_cpu_speed_table_matches_results():
    """06_upsample/SPEED.md's CPU table is what 06_upsample/bench.py makes of its CPU results file."""
    import importlib.util

    from coursekit import timing

    spec = importlib.util.spec_from_file_location("ch06_bench", ROOT / "06_upsample" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    text = (ROOT / "06_upsample" / "SPEED.md").read_text()
    block = f"{bench.CPU_START}\n{bench.cpu_table(timing.load(results.RESULTS / '06_upsample_cpu.json'))}{bench.CPU_END}"
    assert block in text, "06_upsample/SPEED.md's CPU table differs from the results; python 06_upsample/bench.py --readme"
