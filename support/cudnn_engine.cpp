// support/cudnn_engine.cpp — the cuDNN attention engine (model/cuda/cudnn_attention.hpp) compiled
// once, by g++ (cudnn-frontend takes minutes under nvcc), for trainkit's own programs: the GPU
// tests, bench_gpu_attention and gpt_fineweb link this object (CMake: trainkit_cudnn_engine), and
// its static initialiser registers the engine with gpt2_cuda. It is also the check that the
// header compiles on its own (the header check skips the headers that need cudnn-frontend).
// A program of yours does the same in one .cpp of its own (docs/cuda.md).
#include "trainkit/model/cuda/cudnn_attention.hpp"
