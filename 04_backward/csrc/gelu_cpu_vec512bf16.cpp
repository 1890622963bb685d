// Chapter 04 warm-up: gelu_cpu_vec.cpp's loops a third time, for AVX-512 CPUs that
// also have AVX512_BF16 (namespace gelu_avx512_bf16): the AVX-512 build, plus one
// instruction that rounds floats to bfloat16 (see round_to there).
#define GELU_VEC_ISA 512
#define GELU_VEC_BF16 1
#include "gelu_cpu_vec.cpp"
