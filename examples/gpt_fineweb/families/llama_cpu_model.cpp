// families/llama_cpu_model.cpp — the llama family's CPU hot code, compiled once at -O3: the model
// (forward, backward, sampling's logits; its kernels and GEMMs) and every optimizer's update for
// it, by explicit instantiation. The family's composition (families/llama_cpu.cpp, compiled at
// -Og) declares the same instances extern and calls these (train/host_hot_code.hpp says why;
// docs/build_time.md has the figures).
#include <trainkit/model/llama/cpu.hpp>

#include "../train/host_hot_code.hpp"

GPT_FINEWEB_HOST_HOT_CODE(, trainkit::model::basic_llama_cpu, trainkit::model::llama_cpu_block)
