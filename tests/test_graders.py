"""The graders are tested too (`./course selfcheck`; slow, CI runs it).

For every chapter: (1) each exercise's untouched stub fails every test that grades
it, and (2) each plausible wrong solution in tests/variants/ makes exactly the
exercise(s) whose code it changes NOT YET, graded the way `./course grade` grades a
learner (each exercise alone, the chapter's solution for the others); a change outside
every exercise must fail some test of the chapter. Without a GPU the builds are
CPU-only and variants that only touch CUDA code are skipped. See coursekit/selfcheck.py.
"""

from __future__ import annotations

import pytest

from coursekit import chapters, selfcheck

pytestmark = pytest.mark.graders


def _cases():
    for chapter in chapters.existing():
        yield pytest.param(chapter, None, id=f"{chapter.number}-stubs")
        for v in selfcheck.variants(chapter):
            yield pytest.param(chapter, v, id=f"{chapter.number}-{v.name}")


@pytest.mark.parametrize("chapter, variant", list(_cases()))
def test_grader(chapter, variant):
    if variant is None:
        problems = selfcheck.check_stubs(chapter)
    else:
        if variant.cuda_only and not selfcheck.GPU:
            pytest.skip("this wrong variant only changes CUDA code; needs a GPU")
        problems = selfcheck.check_variant(chapter, variant)
    assert not problems, "\n".join(problems)
