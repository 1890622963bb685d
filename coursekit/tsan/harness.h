// What the thread judge's harnesses share (coursekit/races.py): each harness is a main() that
// calls a chapter's CPU kernels on a few inputs large enough for parallel_for to split them over
// threads. ThreadSanitizer watches the calls; the results are not checked here (the chapter's
// tests check them).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <exception>

namespace course_tsan {
// Run one call; an exception (a stub's "not done yet", a failed check) ends the harness with
// status 3 and its message, which the judge reports.
template <class F>
void call(const char* what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "COURSE_TSAN_RAISED %s: %s\n", what, e.what());
    std::exit(3);
  }
}
}  // namespace course_tsan
