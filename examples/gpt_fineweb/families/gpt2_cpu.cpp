// families/gpt2_cpu.cpp — the gpt2 family's whole CPU composition in one translation unit: CPU
// training with every optimizer family, reducer and checkpointer, sampling, eval and the Hugging
// Face conversions (train/host_entry.hpp). Compiled apart from the other families and from
// main.cpp (train/entry.hpp says why); docs/build_time.md has the figures.
// Only this family's model halves are compiled here (families/family.hpp); its hot code (the
// model, the optimizers' updates) is compiled at -O3 in families/gpt2_cpu_model.cpp and only
// called from here (train/host_hot_code.hpp).
#define GPT_FINEWEB_FAMILY_UNIT 1
#define GPT_FINEWEB_UNIT_gpt2 1

#include "../train/host_entry.hpp"

GPT_FINEWEB_HOST_COMPOSITION(gpt2_family, trainkit::model::basic_gpt2_cpu,
                             trainkit::model::gpt2_cpu_block)
