// tests/cuda/cudnn_engine.cpp — the cuDNN attention engine compiled once (g++) for the GPU tests
// that use it; linking this unit registers it with gpt2_cuda (model/cuda/cudnn_attention.hpp).
// It is also the check that the header compiles on its own (the header check skips the headers
// that need cudnn-frontend).
#include "trainkit/model/cuda/cudnn_attention.hpp"
