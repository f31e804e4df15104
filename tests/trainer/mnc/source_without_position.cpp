// Must not compile: a data source that cannot report its position (so resume could not be exact).
// With TRAINKIT_MNC_VALID it has position()/seek() and the composition compiles.
#include <trainkit/trainkit.hpp>

namespace tk = trainkit;

struct counting_source {
  void next(tk::host_batch& b) {
    b = tk::host_batch(2, 8);
    for (auto& t : b.inputs) t = int(n_++ % 100);
    b.targets = b.inputs;
  }
  int batch_size() const { return 2; }
  int seq_len() const { return 8; }
  int vocab_size() const { return 100; }
#ifdef TRAINKIT_MNC_VALID
  tk::source_position position() const { return {0, 0, n_, 0}; }
  void seek(const tk::source_position& p) { n_ = p.offset; }
#endif
  std::uint64_t n_ = 0;
};

using broken = tk::trainer<counting_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
                           tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint>;

int main() { return sizeof(broken) > 0 ? 0 : 1; }
