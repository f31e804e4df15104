// Must not compile: an optimizer whose state is sharded over ranks (ZeRO-1, as zero1_adamw_cuda)
// saved through host_staged_checkpointer around the asynchronous asio_checkpointer, whose writer
// thread cannot join the ranks' collectives: the adapter forwards sharded saves only when the
// checkpointer it wraps has them. With TRAINKIT_MNC_VALID it wraps sync_checkpointer (what
// gpt_fineweb --reducer nccl-zero1 --ckpt-mode sync uses) and the composition compiles. Mock
// policies in host memory: the check looks at types only (a g++ unit; the adapter needs the CUDA
// runtime's headers, not a device).
#include <trainkit/checkpoint/asio_checkpointer.hpp>
#include <trainkit/checkpoint/host_staged_checkpointer.hpp>
#include <trainkit/checkpoint/sync_checkpointer.hpp>
#include <trainkit/trainkit.hpp>

#include "mock_policies.hpp"

namespace tk = trainkit;
namespace ck = trainkit::checkpoint;

namespace mnc {

/// mock_optimizer with a sharded state, as the ZeRO-1 optimizers have.
struct mock_sharded_optimizer : mock_optimizer<tk::host_memory> {
  using mock_optimizer<tk::host_memory>::mock_optimizer;
  ck::optimizer_shard sharded_state() { return {}; }
};
static_assert(ck::sharded_optimizer<mock_sharded_optimizer>);

}  // namespace mnc

#ifdef TRAINKIT_MNC_VALID
using inner = ck::sync_checkpointer;
#else
using inner = ck::asio_checkpointer;
#endif

using broken = tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>,
                           mnc::mock_model<tk::host_memory>, mnc::mock_sharded_optimizer,
                           ck::host_staged_checkpointer<inner>>;

int main() {
  return sizeof(broken) > 0 ? 0 : 1;
}
