// trainkit/reduce/single.hpp — the gradient reducer of a single process: nothing to reduce.
//
// The seam the data-parallel reducers fill: the trainer calls it exactly as it would call an
// all-reduce, so a single-process run goes through the same step protocol as a multi-rank one.
// Its gradients are its own, whole (gradient_layout::replicated), and its clipping step is the
// plain global norm over the buckets: optim::host_grad_clip for a host model,
// optim::device_grad_clip for a device one.
//
// One `single` serves both memory spaces, so the clipping step, which keeps buffers (device ones
// on a device), is made by `attach` for the attached model's space and held behind a void
// pointer: this header stays free of CUDA, and a translation unit compiled by nvcc and one
// compiled by the host compiler see the same class. A device trainer's unit includes
// optim/device_grad_clip.hpp (trainer/trainer.hpp does under nvcc).
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/grad_clip.hpp"
#include "trainkit/reduce/concepts.hpp"

namespace trainkit::reduce {

class single {
  // The memory space whose step runs on Context (the declared return type keeps a concept check
  // from instantiating the body, which needs the device step's definition).
  template <class Context>
  using space_of =
      std::conditional_t<std::same_as<Context, host_context>, host_memory, device_memory>;

 public:
  static constexpr gradient_layout delivered_gradients = gradient_layout::replicated;

  /// Makes the clipping step of the model's memory space.
  template <class M, class Context>
  void attach(M&, Context&) {
    using step = optim::grad_clip_t<typename M::memory_space>;
    clip_step_ = std::make_shared<step>();
    on_device_ = std::same_as<typename M::memory_space, device_memory>;
    norm_of_ = [](const void* s) { return static_cast<const step*>(s)->norm(); };
  }
  void bucket_ready(std::size_t) noexcept {}
  void finish() noexcept {}

  /// The plain global norm over the buckets and its clipping factor (optim::clip_factor).
  template <class T, class Context>
  optim::clip_scale<space_of<Context>> clip(std::span<const T> grads,
                                            std::span<const model::gradient_bucket> buckets,
                                            double max_norm, Context& ctx) {
    using space = space_of<Context>;
    if (!clip_step_ || on_device_ != std::same_as<space, device_memory>)
      throw config_error(
          "reduce::single: clip() before attach(), or for another memory space "
          "than the attached model's");
    auto& step = *static_cast<optim::grad_clip_t<space>*>(clip_step_.get());
    return step(grads, buckets, max_norm, ctx);
  }

  /// The norm before clipping of the last clip() (on a device: once the context is synchronised).
  double norm() const { return clip_step_ ? norm_of_(clip_step_.get()) : 0.0; }

  int rank() const noexcept { return 0; }
  int world_size() const noexcept { return 1; }
  void sum(std::span<double>) noexcept {}
  double average(double x) noexcept { return x; }
  bool any(bool flag) noexcept { return flag; }

 private:
  std::shared_ptr<void> clip_step_;  // optim::grad_clip_t<the attached model's space>
  double (*norm_of_)(const void*) = nullptr;
  bool on_device_ = false;
};

static_assert(rank_aware<single>);

}  // namespace trainkit::reduce
