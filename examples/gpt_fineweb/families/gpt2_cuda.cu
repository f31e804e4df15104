// families/gpt2_cuda.cu — the gpt2 family's CUDA training composition in one translation unit
// (nvcc: train/cuda_entry.cuh), compiled apart from the other families and from main.cpp
// (train/entry.hpp says why); docs/build_time.md has the figures.
// Only this family's model halves are compiled here (families/family.hpp).
#define GPT_FINEWEB_FAMILY_UNIT 1
#define GPT_FINEWEB_UNIT_gpt2 1

#include "../train/cuda_entry.cuh"

GPT_FINEWEB_CUDA_COMPOSITION(gpt2_family)
