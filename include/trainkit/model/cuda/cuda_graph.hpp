// trainkit/model/cuda/cuda_graph.hpp — owned CUDA graphs for a captured micro-step: a stream
// capture that always ends, and an instantiated graph that launches with one API call.
//
// A micro-step of gpt2_cuda is a few hundred kernel launches (about 25 per layer); each costs the
// host a few microseconds, and at small models the GPU waits for them. Captured once into a graph
// and replayed, the whole sequence is one launch. Capture records, it does not run: everything the
// captured code calls must be legal during capture (no cudaMalloc, no synchronisation, no host read
// of device results), which the model guarantees by running each shape once eagerly first
// (docs/cuda.md, "CUDA graphs"). Thread-local capture mode: another thread's CUDA calls (a
// prefetcher's copies, a checkpoint stager) neither break the capture nor get captured.
// Host-compilable (cuda_runtime.h only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "trainkit/core/cuda/check.hpp"

namespace trainkit::model::kernels {

/// An instantiated graph (cudaGraphExec_t). Movable, not copyable.
class graph_exec {
 public:
  graph_exec() = default;
  /// Instantiates `graph` (the caller keeps and destroys it); an empty graph launches nothing.
  explicit graph_exec(cudaGraph_t graph) {
    TRAINKIT_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes_));
    if (nodes_ > 0) TRAINKIT_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph, 0));
  }
  graph_exec(graph_exec&& o) noexcept
      : exec_(std::exchange(o.exec_, nullptr)), nodes_(std::exchange(o.nodes_, 0)) {}
  graph_exec& operator=(graph_exec&& o) noexcept {
    if (this != &o) {
      reset();
      exec_ = std::exchange(o.exec_, nullptr);
      nodes_ = std::exchange(o.nodes_, 0);
    }
    return *this;
  }
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  ~graph_exec() { reset(); }

  /// Enqueues the whole graph on `s` (work before it on `s` happens first, work after it later).
  void launch(cudaStream_t s) const {
    if (exec_) TRAINKIT_CUDA_CHECK(cudaGraphLaunch(exec_, s));
  }
  /// Kernels, memsets and copies in the graph.
  std::size_t nodes() const noexcept { return nodes_; }

 private:
  void reset() noexcept {
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  cudaGraphExec_t exec_ = nullptr;
  std::size_t nodes_ = 0;
};

/// Records the work enqueued on `s` between construction and end() into a graph instead of
/// running it. If end() is never reached (an exception in the captured code), the destructor
/// ends the capture and discards what was recorded, so the stream is usable again.
class stream_capture {
 public:
  explicit stream_capture(cudaStream_t s) : stream_(s) {
    TRAINKIT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    active_ = true;
  }
  stream_capture(const stream_capture&) = delete;
  stream_capture& operator=(const stream_capture&) = delete;
  ~stream_capture() {
    if (!active_) return;
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(stream_, &g);
    if (g) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();  // clears the invalidated capture's (non-sticky) error
  }

  /// Ends the capture and instantiates what it recorded. Throws cuda_error when something in the
  /// captured region was illegal during capture (cudaErrorStreamCaptureInvalidated and kin).
  graph_exec end() {
    active_ = false;
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &g);
    struct owned {
      cudaGraph_t g;
      ~owned() {
        if (g) (void)cudaGraphDestroy(g);
      }
    } keep{g};
    TRAINKIT_CUDA_CHECK(ended);
    return graph_exec(g);
  }

 private:
  cudaStream_t stream_;
  bool active_ = false;
};

}  // namespace trainkit::model::kernels
