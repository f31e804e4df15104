// Instantiates every flash-attention kernel (model/cuda/flash_attention.cuh) at every head size
// the launchers build, so `nvcc --resource-usage` reports each one's registers and spills;
// check.cmake compiles it and holds those figures, the blocks per SM they allow, and the dynamic
// shared memory below to the table in docs/cuda.md. The expected shared-memory bytes arrive as
// -D definitions taken from that table, so a layout change that the table does not follow stops
// the compile here.
#include "trainkit/model/cuda/flash_attention.cuh"

namespace k = trainkit::model::kernels;

#if defined(TRAINKIT_SMEM_FORWARD_64) && defined(TRAINKIT_SMEM_FORWARD_128) && \
    defined(TRAINKIT_SMEM_BACKWARD_64) && defined(TRAINKIT_SMEM_BACKWARD_128)
static_assert(k::flash::forward_smem<64>::bytes == TRAINKIT_SMEM_FORWARD_64,
              "forward<64>: shared memory differs from docs/cuda.md");
static_assert(k::flash::forward_smem<128>::bytes == TRAINKIT_SMEM_FORWARD_128,
              "forward<128>: shared memory differs from docs/cuda.md");
static_assert(k::flash::backward_smem<64>::bytes == TRAINKIT_SMEM_BACKWARD_64,
              "backward<64>: shared memory differs from docs/cuda.md");
static_assert(k::flash::backward_smem<128>::bytes == TRAINKIT_SMEM_BACKWARD_128,
              "backward<128>: shared memory differs from docs/cuda.md");
#endif

void* trainkit_flash_kernels[] = {
    reinterpret_cast<void*>(&k::flash_attention_forward_kernel<64, false>),
    reinterpret_cast<void*>(&k::flash_attention_forward_kernel<128, false>),
    reinterpret_cast<void*>(&k::flash_attention_backward_kernel<64, false>),
    reinterpret_cast<void*>(&k::flash_attention_backward_kernel<128, false>),
    // The sliding-window instantiations (a window > 0 and < T): rows `window_forward<64>` ...
    reinterpret_cast<void*>(&k::flash_attention_forward_kernel<64, true>),
    reinterpret_cast<void*>(&k::flash_attention_forward_kernel<128, true>),
    reinterpret_cast<void*>(&k::flash_attention_backward_kernel<64, true>),
    reinterpret_cast<void*>(&k::flash_attention_backward_kernel<128, true>),
    reinterpret_cast<void*>(&k::flash_attention_delta_kernel<64>),
    reinterpret_cast<void*>(&k::flash_attention_delta_kernel<128>),
    reinterpret_cast<void*>(&k::flash_attention_dq_kernel<float>),
};
