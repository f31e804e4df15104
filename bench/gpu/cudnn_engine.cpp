// bench/gpu/cudnn_engine.cpp — links cuDNN's fused attention into bench_gpu_attention: its static
// initialiser registers the engine (model/cuda/attention_engine.hpp). g++ compiles it.
#include <trainkit/model/cuda/cudnn_attention.hpp>
