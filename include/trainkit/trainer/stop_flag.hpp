// trainkit/trainer/stop_flag.hpp — a process-wide "stop after this step" request.
//
// Signal handlers may only touch lock-free atomics, so SIGINT/SIGTERM set this flag and the
// trainer polls it at step boundaries: it then saves a final checkpoint, waits for any save in
// flight and returns normally, so an interrupted run resumes exactly where it stopped.
#pragma once

#include <atomic>
#include <csignal>

namespace trainkit {

inline std::atomic<int>& stop_signal() noexcept {
  static std::atomic<int> signal{0};
  static_assert(std::atomic<int>::is_always_lock_free);
  return signal;
}

inline void request_stop(int signal_number = SIGTERM) noexcept {
  stop_signal().store(signal_number, std::memory_order_relaxed);
}

inline bool stop_requested() noexcept { return stop_signal().load(std::memory_order_relaxed) != 0; }

/// Installs SIGINT and SIGTERM handlers that call request_stop (programs call this, not libraries).
inline void install_stop_handlers() noexcept {
  auto handler = [](int sig) { request_stop(sig); };
  std::signal(SIGINT, handler);
  std::signal(SIGTERM, handler);
}

}  // namespace trainkit
