"""Plausible wrong solutions for chapter 01; each must fail at least one test."""

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
]
