// trainkit/optim/clip_scale.hpp — how the clipping step hands its factor to the optimizer.
//
// The trainer clips by global norm as a step of its own, over the gradient buckets, before the
// optimizer's update (optim/grad_clip.hpp on the host, optim/device_grad_clip.hpp on a device).
// The factor reaches the update where it was computed: a number on the host, a pointer into
// device memory on a device (so the update reads it without a host round trip).
#pragma once

#include "trainkit/core/memory_space.hpp"

namespace trainkit::optim {

template <class Space>
struct clip_scale;

/// The host factor: gradients are multiplied by `factor` inside the update (1 = unclipped).
template <>
struct clip_scale<host_memory> {
  double factor = 1.0;
};

/// The device factor: `norm_and_factor` points at two device floats {‖g‖, factor}, written by
/// the clipping step earlier on the same stream as the update.
template <>
struct clip_scale<device_memory> {
  const float* norm_and_factor = nullptr;
};

}  // namespace trainkit::optim
