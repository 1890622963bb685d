"""Exercises: fenced solutions, learner workspaces with stubs, and wrong variants.

A solution region in a chapter source looks like this (C++, CUDA or Python):

    // BEGIN SOLUTION corner-weight
    // STUB: return NAN;
    ...the solution...
    // END SOLUTION

In a learner's workspace the region becomes a TODO comment plus the STUB lines
(uncommented). Without STUB lines the stub is a run-time error that names the
exercise: `TORCH_CHECK(false, ...)` in C++, `raise NotImplementedError` in
Python. Stubs must compile, so the workspace builds and the tests can say which
exercise is missing. Device code cannot throw: there the STUB returns a value
that the tests catch (NaN, say).

In the workspace the region stays fenced, so the grader can find the learner's code:

    // BEGIN EXERCISE corner-weight: your code goes between this line and END EXERCISE
    // TODO(exercise corner-weight): ...
    return NAN;
    // END EXERCISE corner-weight

`coursekit.grading` grades each exercise alone: the chapter's solution with only
that exercise's regions replaced by the learner's (`splice`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import chapters

BEGIN = re.compile(r"^(?P<indent>\s*)(?P<comment>//|#)\s*BEGIN SOLUTION\s+(?P<name>[\w.-]+)\s*$")
END = re.compile(r"^\s*(//|#)\s*END SOLUTION\s*$")
STUB = re.compile(r"^\s*(//|#)\s*STUB:\s?(?P<code>.*)$")
WS_BEGIN = re.compile(r"^\s*(//|#)\s*BEGIN EXERCISE\s+(?P<name>[\w.-]*[\w])")
WS_END = re.compile(r"^\s*(//|#)\s*END EXERCISE\b")
SOURCE_SUFFIXES = {".cpp", ".cu", ".h", ".cuh", ".py"}


def _skipped(rel: Path) -> bool:
    """Build outputs and caches are not part of a chapter's sources."""
    return rel.suffix == ".so" or any(
        p in {"__pycache__", "build", ".ipynb_checkpoints"} or p.endswith(".egg-info") for p in rel.parts
    )


class ExerciseError(RuntimeError):
    pass


@dataclass(frozen=True)
class Exercise:
    name: str
    file: Path
    line: int


@dataclass(frozen=True)
class Variant:
    """A plausible wrong solution: one textual change to a chapter source.

    `old` must occur exactly once in `file`. The grader self-check applies the
    change and asserts that at least one test of the chapter fails. With
    correct=True it is instead another right answer (what a lesson's hint leads
    to, another order of the work), which every exercise must PASS: a grader that
    demands the chapter's own way of doing it is wrong too.
    """

    name: str
    why: str
    file: str
    old: str
    new: str
    cuda_only: bool = False  # the change only touches code that runs on a GPU
    correct: bool = False  # a different but correct solution: every exercise must PASS
    gpu_only: bool = False  # only a GPU run can catch it (the GPU-free judge cannot: e.g. > 2^31 elements)


def source_files(src: Path) -> list[Path]:
    return sorted(p for p in src.rglob("*") if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts)


def _stub_lines(name: str, indent: str, comment: str, stub: list[str], readme: str) -> list[str]:
    """The body a workspace starts with: a TODO and code that compiles and fails loudly."""
    todo = f"{indent}{comment} TODO(exercise {name}): your code here; see {readme}, exercise {name}.\n"
    if stub:
        return [todo] + [f"{indent}{code}\n" for code in stub]
    message = f"exercise {name} is not done yet (see {readme})"
    if comment == "#":
        return [todo, f'{indent}raise NotImplementedError("{message}")\n']
    return [todo, f'{indent}TORCH_CHECK(false, "{message}");\n']


def _fenced(name: str, indent: str, comment: str, body: list[str]) -> list[str]:
    return ([f"{indent}{comment} BEGIN EXERCISE {name}: your code goes between this line and END EXERCISE\n"]
            + body + [f"{indent}{comment} END EXERCISE {name}\n"])


def strip_solutions(text: str, path: Path, readme: str = "README.md") -> tuple[str, list[Exercise]]:
    """Return `text` with every fenced solution replaced by its stub, and the exercises found."""
    out: list[str] = []
    found: list[Exercise] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if not m:
            if END.match(lines[i]):
                raise ExerciseError(f"{path}:{i + 1}: END SOLUTION without BEGIN SOLUTION")
            out.append(lines[i])
            i += 1
            continue
        start = i
        found.append(Exercise(m["name"], path, start + 1))
        i += 1
        stub = []
        while i < len(lines) and STUB.match(lines[i]):
            stub.append(STUB.match(lines[i])["code"])
            i += 1
        while i < len(lines) and not END.match(lines[i]):
            if BEGIN.match(lines[i]):
                raise ExerciseError(f"{path}:{i + 1}: nested BEGIN SOLUTION")
            i += 1
        if i == len(lines):
            raise ExerciseError(f"{path}:{start + 1}: BEGIN SOLUTION {m['name']} has no END SOLUTION")
        out += _fenced(m["name"], m["indent"], m["comment"], _stub_lines(m["name"], m["indent"], m["comment"], stub, readme))
        i += 1  # skip END
    return "".join(out), found


@dataclass
class Region:
    """One fenced region of a file: its exercise, its body lines and where the body starts (1-based)."""

    name: str
    body: list[str]
    line: int


def solution_regions(text: str, path: Path) -> list[Region]:
    """The BEGIN SOLUTION regions of a chapter source; the body includes STUB lines (comments)."""
    return _regions(text, path, BEGIN, END, "SOLUTION")


def workspace_regions(text: str, path: Path) -> list[Region]:
    """The BEGIN EXERCISE regions of a learner's workspace file."""
    return _regions(text, path, WS_BEGIN, WS_END, "EXERCISE")


def _regions(text: str, path: Path, begin, end, word: str) -> list[Region]:
    found: list[Region] = []
    current: Region | None = None
    for i, line in enumerate(text.splitlines(keepends=True), start=1):
        if (m := begin.match(line)) is not None:
            if current is not None:
                raise ExerciseError(f"{path}:{i}: BEGIN {word} {m['name']} inside exercise {current.name}; "
                                    f"the END {word} line of {current.name} is missing")
            current = Region(m["name"], [], i + 1)
        elif end.match(line):
            if current is None:
                raise ExerciseError(f"{path}:{i}: END {word} without BEGIN {word}")
            found.append(current)
            current = None
        elif current is not None:
            current.body.append(line)
    if current is not None:
        raise ExerciseError(f"{path}:{current.line - 1}: BEGIN {word} {current.name} has no END {word} line")
    return found


def splice(text: str, path: Path, name: str, bodies: list[list[str]]) -> tuple[str, list[tuple[int, int, int]]]:
    """`text` (a solution file) with the bodies of its regions named `name` replaced by `bodies`, in order.

    Returns the new text and, for each replaced region, (first line in the new text,
    number of lines, index into `bodies`), so that messages about the new file can be
    mapped back to the learner's file.
    """
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    spans: list[tuple[int, int, int]] = []
    k = 0
    i = 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if m is None or m["name"] != name:
            out.append(lines[i])
            i += 1
            continue
        out.append(lines[i])
        i += 1
        while not END.match(lines[i]):
            i += 1
        if k >= len(bodies):
            raise ExerciseError(f"{path}: more regions of exercise {name} than the {len(bodies)} given")
        body = bodies[k]
        spans.append((len(out) + 1, len(body), k))
        out += body
        k += 1
    if k != len(bodies):
        raise ExerciseError(f"{path}: {len(bodies)} regions of exercise {name} given, the file has {k}")
    return "".join(out), spans


def list_exercises(src: Path) -> list[Exercise]:
    found = []
    for f in source_files(src):
        found += strip_solutions(f.read_text(), f.relative_to(src))[1]
    return found


def copy_chapter(src: Path, dest: Path, transform=None) -> Path:
    """Make `dest` a copy of chapter folder `src`, each file passed through transform(relpath, text).

    Files whose content is already right are left untouched, so their mtimes
    stay and ninja recompiles only what differs from the last build there:
    building many variants of one chapter in the same folder stays cheap.
    """
    dest.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for f in sorted(src.rglob("*")):
        rel = f.relative_to(src)
        if f.is_dir() or _skipped(rel):
            continue
        wanted.add(rel)
        data = f.read_bytes()
        if transform is not None and f.suffix in SOURCE_SUFFIXES:
            data = transform(rel, data.decode()).encode()
        target = dest / rel
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    for f in sorted(dest.rglob("*"), reverse=True):
        if f.is_file() and f.relative_to(dest) not in wanted and f.suffix in SOURCE_SUFFIXES:
            f.unlink()
    return dest


def make_workspace(chapter: chapters.Chapter, dest: Path | None = None, force: bool = False) -> tuple[Path, list[Exercise]]:
    """Copy `chapter` to `dest` (default workspace/NN_name) with every solution stubbed out."""
    dest = dest or chapter.workspace
    if dest.exists() and not force:
        raise ExerciseError(
            f"{dest} already exists and may hold your work.\n"
            f"  to start over: ./course exercise {chapter.number} --force"
        )
    found: list[Exercise] = []
    readme = f"{chapter.dirname}/README.md"

    def stub(rel: Path, text: str) -> str:
        new, ex = strip_solutions(text, rel, readme)
        found.extend(ex)
        return new

    return copy_chapter(chapter.path, dest, stub), found


def apply_variant(chapter: chapters.Chapter, dest: Path, variant: Variant) -> Path:
    """Make `dest` a copy of `chapter` with `variant` applied."""
    if not (chapter.path / variant.file).is_file():
        raise ExerciseError(f"variant {variant.name}: no file {variant.file} in {chapter.dirname}")

    def change(rel: Path, text: str) -> str:
        if rel != Path(variant.file):
            return text
        count = text.count(variant.old)
        if count != 1:
            raise ExerciseError(
                f"variant {variant.name}: expected its text once in {variant.file}, found it {count} times"
            )
        return text.replace(variant.old, variant.new)

    return copy_chapter(chapter.path, dest, change)


def as_workspace(text: str, path: Path) -> str:
    """`text` (a chapter source) with its solutions kept but fenced as a learner's workspace fences them."""
    out = []
    for i, line in enumerate(text.splitlines(keepends=True), start=1):
        if (m := BEGIN.match(line)) is not None:
            out.append(_fenced(m["name"], m["indent"], m["comment"], [])[0])
            name = m["name"]
        elif (e := END.match(line)) is not None:
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}{e.group(1)} END EXERCISE {name}\n")
        else:
            out.append(line)
    return "".join(out)
