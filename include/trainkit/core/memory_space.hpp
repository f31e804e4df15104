// trainkit/core/memory_space.hpp — tags naming where a policy's data lives.
//
// Every policy that produces or consumes batches or parameters names its memory space; the
// trainer's constraints compare them so that, e.g., a host-only prefetcher feeding a model that
// wants device memory is rejected at compile time rather than crashing at run time.
#pragma once

#include <concepts>

namespace trainkit {

/// Ordinary pageable or pinned host memory: CPU models read it directly.
struct host_memory {
  static constexpr const char* name = "host";
};

/// CUDA device global memory.
struct device_memory {
  static constexpr const char* name = "device";
};

/// Requires: `M::name` names the space for messages.
template <class M>
concept memory_space_tag = std::same_as<M, host_memory> || std::same_as<M, device_memory>;

}  // namespace trainkit
