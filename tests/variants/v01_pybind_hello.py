"""Plausible wrong solutions for chapter 01; each must fail a test of its own exercise.

echo-copies changes the worked example (not an exercise): the chapter's tests as a whole must catch it.
"""

from coursekit.exercises import Variant

VARIANTS = [
    Variant("echo-copies", "returns a copy, not the same tensor",
            "csrc/hello.cpp", "  return x;\n", "  return x.clone();\n"),
    Variant("describe-no-comma", "joins the sizes without ', '",
            "csrc/hello.cpp", 'out << (d ? ", " : "") << x.size(d);', 'out << (d ? "," : "") << x.size(d);'),
    Variant("scale-ignores-inplace", "always returns a new tensor",
            "csrc/hello.cpp", "    return x.mul_(factor);", "    return x.mul(factor);"),
    Variant("scale-always-inplace", "modifies the input even when inplace=false",
            "csrc/hello.cpp", "  return x.mul(factor);\n  // END", "  return x.mul_(factor);\n  // END"),
    Variant("describe-sizes-list", "prints x.sizes() ([2, 3]) instead of the (2, 3) format",
            "csrc/hello.cpp", '''  for (int64_t d = 0; d < x.dim(); ++d) {
    out << (d ? ", " : "") << x.size(d);
  }''', "  out << x.sizes();"),
    Variant("scale-factor-as-float", "passes the factor through float",
            "csrc/hello.cpp", "  return x.mul(factor);\n  // END", "  return x.mul(static_cast<float>(factor));\n  // END"),
    Variant("describe-device-type", "prints x.device().type(): a CUDA tensor shows device=cuda, not cuda:0",
            "csrc/hello.cpp", 'out << "), device=" << x.device() << ")";',
            'out << "), device=" << x.device().type() << ")";', cuda_only=True),
    Variant("scale-keeps-dtype", "casts the product back to x's dtype: an integer tensor times 2.5 is truncated "
            "to integers (x * 2.5 is float)",
            "csrc/hello.cpp", "  return x.mul(factor);\n  // END", "  return x.mul(factor).to(x.scalar_type());\n  // END"),
]

# A reviewer's mistakes (a set written without these variants at hand), each a class the tests close.
VARIANTS += [
    Variant("scale-inplace-copy-back", "in place as a copy of the product back into x: an int64 tensor times "
            "2.5 is truncated silently, where x.mul_(2.5) raises",
            "csrc/hello.cpp", "    return x.mul_(factor);", "    return x.copy_(x.mul(factor));"),
]
