"""The README's results table, generated from the committed timing data in results/.

    python -m coursekit.results            print the table
    python -m coursekit.results --write    rewrite it in README.md (between the markers)

A test checks that README.md holds exactly what this prints, so every number
in the table comes from a results/*.json file written by a benchmark run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import ROOT

START, END = "<!-- results:start -->", "<!-- results:end -->"

# (kernel, chapter, our row, {column: the row it is compared with}, rows to iterate over)
SPECS = [
    ("trilinear forward", "02_forward_kernel", "chapter02", {"eager": "eager", "torch.compile": "compiled"}),
    ("trilinear backward, grad_feats", "04_backward", "backward grad_feats", {}),
    ("trilinear backward, both gradients", "04_backward", "backward both", {}),
    ("trilinear forward + backward", "04_backward", "ours forward+backward",
     {"eager": "eager forward+backward", "torch.compile": "torch.compile forward+backward"}),
    ("GELU forward", "04_backward", "gelu forward (ours)", {"torch": "gelu forward (F.gelu)"}),
    ("GELU backward", "04_backward", "gelu backward (ours)", {"torch": "gelu backward (aten)"}),
    ("upsample forward", "06_upsample", "forward ours",
     {"torch.compile": "forward torch.compile", "torch": "forward F.interpolate"}),
    ("upsample backward (gather)", "06_upsample", "backward gather", {"torch": "backward F.interpolate"}),
    ("upsample backward (scatter)", "06_upsample", "backward scatter", {"torch": "backward F.interpolate"}),
]
SIZE_KEYS = ("N", "F", "numel", "shape", "factor", "mode", "dtype", "layout")


def _key(row: dict) -> tuple:
    return tuple((k, json.dumps(row.get(k))) for k in SIZE_KEYS)


def _sizes(row: dict) -> str:
    parts = []
    if "N" in row:
        parts.append(f"N={row['N']}, F={row['F']}")
    if "numel" in row:
        parts.append(f"{row['numel']:,} elements")
    if "shape" in row:
        parts.append("×".join(map(str, row["shape"])) + (f", ×{row['factor']}" if "factor" in row else ""))
    if row.get("layout") == "channels_last":
        parts.append("channels_last")
    if "mode" in row:
        parts.append(row["mode"])
    if row.get("dtype", "float32") != "float32":
        parts.append(row["dtype"])
    return ", ".join(parts)


def _group(row: dict) -> tuple:
    return (row.get("N"), row.get("F"), json.dumps(row.get("shape")), json.dumps(row.get("factor")), row.get("mode"),
            row.get("dtype", "float32"), row.get("layout"))


def _device(env: dict) -> str:
    return env.get("device_name", env.get("device_type", "?"))


def rows(results: Path = ROOT / "results") -> list[list[str]]:
    table = []
    for device in ("cuda", "cpu"):
        for label, chapter, ours, compare in SPECS:
            path = results / f"{chapter}_{device}.json"
            if not path.is_file():
                continue
            doc = json.loads(path.read_text())
            # float32, except where a chapter measures other dtypes on purpose (06: bfloat16, float16)
            records = [r for r in doc["records"] if "median_ms" in r
                       and (r.get("dtype", "float32") == "float32" or chapter == "06_upsample")]
            by_key: dict[tuple, dict[str, dict]] = {}
            for r in records:
                by_key.setdefault(_key(r), {}).setdefault(r["name"], r)
            # rows measured in another group (e.g. eager autograd) share N and F but not the group
            by_size = {}
            for r in records:
                by_size.setdefault(_group(r), {}).setdefault(r["name"], r)
            for key, named in by_key.items():
                if ours not in named or (label.endswith("(scatter)") and named[ours].get("mode") != "half_pixel"):
                    continue  # scatter: one mode is enough to show it
                r = named[ours]
                peers = by_size.get(_group(r), {})
                cells = {}
                for column, other in compare.items():
                    o = named.get(other) or peers.get(other)
                    if o and o.get("median_ms"):
                        cells[column] = f"{o['median_ms'] / r['median_ms']:.1f}×"
                frac = r.get("fraction_of_floor")
                table.append([label, _device(doc["environment"]), _sizes(r), f"{r['median_ms']:.3f}",
                              f"{frac:.0%}" if frac is not None else "",
                              cells.get("eager", ""), cells.get("torch.compile", ""), cells.get("torch", ""),
                              f"`results/{path.name}`"])
    return table


def markdown() -> str:
    head = ["kernel", "device", "sizes (float32 unless named)", "median ms", "of floor", "vs eager", "vs torch.compile",
            "vs PyTorch's op", "data"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows()]
    return "\n".join(lines)


def readme_block() -> str:
    return f"{START}\n{markdown()}\n{END}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the table in README.md")
    args = parser.parse_args(argv)
    if not args.write:
        print(markdown())
        return 0
    readme = ROOT / "README.md"
    text = readme.read_text()
    if START not in text or END not in text:
        print(f"README.md has no {START} ... {END} block", file=sys.stderr)
        return 1
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    readme.write_text(before + readme_block() + after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
