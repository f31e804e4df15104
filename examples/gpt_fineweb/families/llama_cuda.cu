// families/llama_cuda.cu — the llama family's CUDA training composition (nvcc:
// train/cuda_entry.cuh). The program's CMake compiles every family's CUDA composition as one
// unit (a generated file including each families/<name>_cuda.cu: most of such a unit is shared,
// docs/build_time.md has the figures); this file alone is the family's whole CUDA unit too.
// Only this family's model halves are compiled by this file on its own (families/family.hpp).
#define GPT_FINEWEB_FAMILY_UNIT 1
#define GPT_FINEWEB_UNIT_llama 1

#include "../train/cuda_entry.cuh"

GPT_FINEWEB_CUDA_COMPOSITION(llama_family)
