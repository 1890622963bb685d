// Chapter 04 warm-up: gelu_cpu_vec.cpp's loops once more, for AVX-512 (namespace
// gelu_avx512): the same source, compiled with another instruction set.
#define GELU_VEC_ISA 512
#include "gelu_cpu_vec.cpp"
