// Tests that the CPU GEMM funnel's oneDNN products survive signals (core/linalg/detail/
// onednn_gemm.hpp). oneDNN before 3.11.2 runs its JIT fp32 GEMM kernels with the stack pointer in
// a heap workspace; a signal handled meanwhile writes its frame over the heap, and the process
// aborts later in free() — how gpt_fineweb.mpi_sigterm died with oneDNN fp32. Here a thread sends
// SIGUSR2 to the thread doing products every ~50 µs for half a second (thousands of signals) while
// it multiplies shapes with K > 84 (the kernels' heap-workspace case on AVX-512), allocating
// between products so glibc checks its chunks: without the signal guard this process aborts
// within the first few hundred products (planted: the guard removed, the test aborted with
// "corrupted size vs. prev_size while consolidating"). The products must stay right, the signals
// must still be handled (deferred, not lost), and the thread's signal mask must come back as it
// was. Its own program (ctest runs each test file apart), so an abort here takes no other test.
#include "trainkit/core/linalg/gemm_cpu.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <thread>
#include <vector>

#if defined(__unix__)
#include <pthread.h>
#include <signal.h>
#endif

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace k = trainkit::linalg;

namespace {

TEST(OnednnSignals, VersionsWithTheStackInTheHeap) {
  // oneDNN's fix (PR 4855) is in 3.11.2 and 3.12; Debian 12's 2.6.3 and every older one lack it.
  EXPECT_TRUE(k::detail::sgemm_moves_stack_into_heap(1, 8, 0));
  EXPECT_TRUE(k::detail::sgemm_moves_stack_into_heap(2, 6, 3));
  EXPECT_TRUE(k::detail::sgemm_moves_stack_into_heap(3, 10, 9));
  EXPECT_TRUE(k::detail::sgemm_moves_stack_into_heap(3, 11, 1));
  EXPECT_FALSE(k::detail::sgemm_moves_stack_into_heap(3, 11, 2));
  EXPECT_FALSE(k::detail::sgemm_moves_stack_into_heap(3, 12, 0));
  EXPECT_FALSE(k::detail::sgemm_moves_stack_into_heap(4, 0, 0));
}

#if defined(__unix__)

std::atomic<long> handled{0};
void count_signal(int) {
  handled.fetch_add(1, std::memory_order_relaxed);
}

bool blocked(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

TEST(OnednnSignals, TheGuardRestoresTheThreadsMask) {
  sigset_t usr1, saved;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, &saved);  // the caller's own choice: SIGUSR1 blocked
  {
    const k::detail::async_signals_blocked guard(true);
    EXPECT_TRUE(blocked(SIGUSR2));
    EXPECT_TRUE(blocked(SIGTERM));
    EXPECT_FALSE(blocked(SIGSEGV));  // faults stay deliverable
    EXPECT_FALSE(blocked(SIGBUS));
  }
  EXPECT_TRUE(blocked(SIGUSR1));
  EXPECT_FALSE(blocked(SIGUSR2));
  EXPECT_FALSE(blocked(SIGTERM));
  {
    const k::detail::async_signals_blocked inactive(false);
    EXPECT_FALSE(blocked(SIGUSR2));
  }
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

// Multiplies (M, K)·(K, N) products under `settings` on this thread for `seconds` while another
// thread sends it SIGUSR2 every ~50 µs; checks every product.
void products_under_a_signal_storm(const k::gemm_settings& settings, double seconds) {
  if (const std::string why = k::gemm_settings_problem(settings); !why.empty()) GTEST_SKIP() << why;
  const k::scoped_gemm_settings scope(settings);
  struct sigaction sa {};
  struct sigaction old {};
  sa.sa_handler = count_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  handled = 0;

  const k::index M = 96, N = 64, K = 768;
  std::vector<float> a(std::size_t(M * K)), b(std::size_t(K * N)), c(std::size_t(M * N));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 7) * 0.25f;  // bf16-exact values
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(i % 5) * 0.5f;
  // The exact product's first and last entries (small integers times powers of two: exact in
  // fp32 and in bf16 with fp32 sums).
  double first = 0, last = 0;
  for (k::index p = 0; p < K; ++p) {
    first += double(a[std::size_t(p)]) * b[std::size_t(p * N)];
    last += double(a[std::size_t((M - 1) * K + p)]) * b[std::size_t(p * N + N - 1)];
  }

  const pthread_t target = pthread_self();
  std::atomic<bool> done{false};
  std::thread storm([&] {
    while (!done.load()) {
      pthread_kill(target, SIGUSR2);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  long products = 0, wrong = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    std::fill(c.begin(), c.end(), -1.0f);
    if (settings.precision == k::gemm_precision::bf16)  // gemm_block is fp32: gemm() rounds
      k::gemm(c.data(), k::operand<float>{a.data(), K}, k::operand<float>{b.data(), N}, M, N, K,
              false, k::split::longer_side, [](k::index, k::index, k::index, k::index) {});
    else
      k::gemm_block(c.data(), N, k::operand<float>{a.data(), K}, k::operand<float>{b.data(), N}, M,
                    N, K, false);
    wrong += c.front() != float(first) || c.back() != float(last);
    std::vector<char> churn(std::size_t(512 + 37 * (products % 200)), 1);  // glibc checks chunks
    ++products;
  }
  done = true;
  storm.join();
  sigaction(SIGUSR2, &old, nullptr);
  EXPECT_EQ(wrong, 0) << "of " << products << " products";
  EXPECT_GT(products, 20);
  EXPECT_GT(handled.load(), 20) << "signals were lost, not deferred";
  EXPECT_FALSE(blocked(SIGUSR2)) << "the thread's mask was not restored";
}

#if defined(_OPENMP)
struct one_thread {
  int saved = omp_get_max_threads();
  one_thread() { omp_set_num_threads(1); }
  ~one_thread() { omp_set_num_threads(saved); }
};
#else
struct one_thread {};
#endif

TEST(OnednnSignals, Fp32ProductsSurviveASignalStorm) {
  const one_thread single;  // oneDNN's product on this thread, where the signals go
  products_under_a_signal_storm(
      {.precision = k::gemm_precision::fp32, .library = k::gemm_library::onednn}, 0.5);
}

TEST(OnednnSignals, Bf16ProductsSurviveASignalStorm) {
  const one_thread single;
  products_under_a_signal_storm(
      {.precision = k::gemm_precision::bf16, .library = k::gemm_library::onednn}, 0.5);
}

#endif  // __unix__

}  // namespace
