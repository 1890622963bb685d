"""Hints: the collapsed sections of a chapter's README, in order.

    <details><summary>Hint 1 · corner-weight</summary>
    ...
    </details>

`./course hint 02 corner-weight` prints the first, `... corner-weight 2` the second.
"""

from __future__ import annotations

import re

from . import chapters

_HINT = re.compile(r"<details>\s*<summary>\s*Hint\s*(\d+)\s*·\s*([\w.-]+)\s*</summary>(.*?)</details>", re.S)


def hints(chapter: chapters.Chapter, exercise: str) -> list[str]:
    text = (chapter.path / "README.md").read_text()
    found = sorted((int(n), body.strip()) for n, name, body in _HINT.findall(text) if name == exercise)
    return [body for _, body in found]
