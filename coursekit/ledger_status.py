"""Which records of a GPU self-check ledger still hold for the code here; no GPU needed.

    python -m coursekit.ledger_status                       # results/selfcheck_gpu.json
    python -m coursekit.ledger_status path/to/ledger.json

A GPU's CUDA-only self-check (`COURSE_SELFCHECK_CUDA_ONLY=unemulated ./course selfcheck` with
`COURSE_SELFCHECK_LEDGER`) records each case under a digest of what decides it
(selfcheck.case_key, as a GPU computes it). This recomputes the digests for the sources here and
says, chapter by chapter, how many records still match, and lists the cases a GPU's next run has
to check: those with no record, a failed one, or one made for other code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import ROOT, chapters, grading, selfcheck


def gpu_cases(chapter: chapters.Chapter) -> list[tuple[str, object]]:
    """The cases of a GPU's CUDA-only self-check of `chapter`, named as tests/test_graders.py names
    them: each exercise's stub alone, then every CUDA-only variant the GPU-free judge does not grade."""
    cases = [(f"{chapter.number}-stubs:{name}", None) for name in grading.exercise_names(chapter)]
    cases += [(f"{chapter.number}-{v.name}", v) for v in selfcheck.variants(chapter)
              if v.cuda_only and not selfcheck.emulated(chapter, v)]
    return cases


def status(ledger: dict) -> dict[str, tuple[int, list[str]]]:
    """{chapter number: (records that hold, [the cases left, each with why])}."""
    saved = selfcheck.GPU, selfcheck.CUDA_TESTS_ONLY
    selfcheck.GPU = selfcheck.CUDA_TESTS_ONLY = True  # the digests as a GPU's run computes them
    try:
        out = {}
        for chapter in chapters.existing():
            held, left = 0, []
            for case, variant in gpu_cases(chapter):
                record = ledger.get(case)
                if record is None:
                    left.append(f"{case} (no record)")
                elif record["key"] != selfcheck.case_key(chapter, variant):
                    left.append(f"{case} (recorded for other code)")
                elif record["outcome"] != "passed":
                    left.append(f"{case} ({record['outcome']})")
                else:
                    held += 1
            out[chapter.number] = (held, left)
        return out
    finally:
        selfcheck.GPU, selfcheck.CUDA_TESTS_ONLY = saved


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else ROOT / "results" / "selfcheck_gpu.json"
    found = status(json.loads(path.read_text()))
    for number, (held, left) in found.items():
        print(f"{number}: {held} of {held + len(left)} records hold")
    left = [case for _, cases in found.values() for case in cases]
    print(f"{len(left)} cases left for a GPU" + "".join(f"\n  {case}" for case in left))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
