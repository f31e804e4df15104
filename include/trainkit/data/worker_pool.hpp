// trainkit/data/worker_pool.hpp — a fixed set of threads running tasks in submission order.
//
// For data preparation that parallelises over chunks (tokenising text into shards): submit()
// returns a future per task, so the caller consumes results in its own order — the order that
// makes the output independent of the thread count — and an exception in a task is re-thrown by
// that task's future.get(), not lost on a worker thread. The destructor lets queued tasks finish,
// then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "trainkit/core/error.hpp"

namespace trainkit::data {

/// `threads` workers taking tasks FIFO; each task yields a Result through its future.
template <class Result>
class worker_pool {
 public:
  /// Starts `threads` (>= 1) workers; config_error otherwise.
  explicit worker_pool(int threads) {
    if (threads < 1)
      throw config_error("worker_pool: threads must be >= 1, got " + std::to_string(threads));
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  /// Runs the queued tasks to the end, then joins the workers.
  ~worker_pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (auto& t : workers_) t.join();
  }

  /// Queues `fn`; its result (or exception) arrives through the returned future.
  std::future<Result> submit(std::function<Result()> fn) {
    std::packaged_task<Result()> task(std::move(fn));
    auto future = task.get_future();
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
    return future;
  }

  int threads() const noexcept { return int(workers_.size()); }

 private:
  void work() {
    for (;;) {
      std::packaged_task<Result()> task;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping and drained
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<Result()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace trainkit::data
