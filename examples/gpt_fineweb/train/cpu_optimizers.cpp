// train/cpu_optimizers.cpp — the CPU optimizers' model-independent members (their state, AdamW's
// loops, Muon's Newton–Schulz GEMMs), compiled once at -O3 for every model family by explicit
// instantiation; the families' compositions declare them extern (train/host_hot_code.hpp).
#include "host_hot_code.hpp"

GPT_FINEWEB_HOST_OPTIMIZERS()
