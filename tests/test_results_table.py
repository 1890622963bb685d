"""The README's results table is exactly what the committed data says."""

from coursekit import ROOT, results


def test_readme_table_matches_results():
    readme = (ROOT / "README.md").read_text()
    assert results.readme_block() in readme, (
        "README.md's results table differs from results/*.json; regenerate it: python -m coursekit.results --write")


def test_every_row_names_its_data():
    rows = results.rows()
    assert rows, "no timing data in results/"
    for row in rows:
        assert (ROOT / row[-1].strip("`")).is_file()
