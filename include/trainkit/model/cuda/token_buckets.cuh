// trainkit/model/cuda/token_buckets.cuh — the embedding backward's token buckets built on the
// device, so the deterministic step needs no host round trip for its token ids.
//
// Produces exactly make_token_buckets(tokens, V).packed() (model/detail/token_buckets.hpp) in
// device memory: [U, tokens…, offsets…, rows…]. Rows are sorted by token with CUB's radix sort,
// which is stable, so each token's rows stay ascending (the order the bucket kernel sums them in);
// out-of-range tokens sort last under the key V and are left out, as on the host. U is known
// only on the device: encoder_backward_buckets is launched for the upper bound N and its blocks
// past U return at once. CUB's scratch is sized once per capacity (reserve), never during a step.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, reductions, launch checks

// keys[i] = tokens[i], or V for a token outside [0, V); rows[i] = i; counts[i] = 0 (i ≤ N).
template <class = void>
__global__ void token_bucket_keys_kernel(std::int32_t* keys, std::int32_t* rows,
                                         std::int32_t* counts, const std::int32_t* tokens, int N,
                                         int V) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > N) return;
  counts[i] = 0;
  if (i == N) return;
  const std::int32_t t = tokens[i];
  keys[i] = (t >= 0 && t < V) ? t : V;
  rows[i] = i;
}

// packed = [U, unique[0..U), offsets[0..U], sorted_rows[0..offsets[U])], dropping the run of the
// out-of-range key V (always the last run when present).
template <class = void>
__global__ void token_bucket_pack_kernel(std::int32_t* packed, const std::int32_t* unique,
                                         const std::int32_t* offsets, const std::int32_t* rows,
                                         const std::int32_t* runs, int N, int V) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > N) return;
  const int all = *runs;
  const int U = (all > 0 && unique[all - 1] == V) ? all - 1 : all;
  if (i == 0) packed[0] = U;
  if (i < U) packed[1 + i] = unique[i];
  if (i <= U) packed[1 + U + i] = offsets[i];
  if (i < offsets[U]) packed[2 + 2 * U + i] = rows[i];
}

class device_token_buckets {
 public:
  /// Scratch for batches of up to `capacity` tokens (needs a device: CUB sizes its scratch).
  void reserve(std::size_t capacity, int V) {
    if (capacity <= capacity_ && V == vocab_) return;
    const int n = int(capacity);
    const int end_bit = std::bit_width(unsigned(V));  // keys are 0..V
    std::size_t sort = 0, rle = 0, scan = 0;
    TRAINKIT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, sort, static_cast<const std::int32_t*>(nullptr),
        static_cast<std::int32_t*>(nullptr), static_cast<const std::int32_t*>(nullptr),
        static_cast<std::int32_t*>(nullptr), n, 0, end_bit));
    TRAINKIT_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(
        nullptr, rle, static_cast<const std::int32_t*>(nullptr),
        static_cast<std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr),
        static_cast<std::int32_t*>(nullptr), n));
    TRAINKIT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan,
                                                      static_cast<const std::int32_t*>(nullptr),
                                                      static_cast<std::int32_t*>(nullptr), n + 1));
    const std::size_t temp = std::max(sort, std::max(rle, scan));
    temp_ = cuda::device_buffer<std::byte>(std::max<std::size_t>(temp, 1));
    // keys, sorted keys, rows, sorted rows, unique, counts (N + 1), offsets (N + 1), runs (1).
    ints_ = cuda::device_buffer<std::int32_t>(7 * capacity + 3);
    capacity_ = capacity;
    vocab_ = V;
    end_bit_ = end_bit;
  }

  /// Writes make_token_buckets(tokens[0..N), V).packed() to `packed` (3N + 2 ints), all
  /// enqueued on `s`. reserve(≥ N, V) first.
  void build(std::int32_t* packed, const std::int32_t* tokens, int N, int V, cudaStream_t s) {
    require(std::size_t(N) <= capacity_ && V == vocab_, "device_token_buckets",
            "reserve() the batch size and vocabulary first");
    std::int32_t* keys = ints_.data();
    std::int32_t* keys_sorted = keys + capacity_;
    std::int32_t* rows = keys_sorted + capacity_;
    std::int32_t* rows_sorted = rows + capacity_;
    std::int32_t* unique = rows_sorted + capacity_;
    std::int32_t* counts = unique + capacity_;       // N + 1
    std::int32_t* offsets = counts + capacity_ + 1;  // N + 1
    std::int32_t* runs = offsets + capacity_ + 1;    // 1
    constexpr int threads = 256;
    const unsigned blocks = ceil_div(std::size_t(N) + 1, threads);
    token_bucket_keys_kernel<><<<blocks, threads, 0, s>>>(keys, rows, counts, tokens, N, V);
    TRAINKIT_CUDA_CHECK_LAUNCH("token_bucket_keys_kernel");
    std::size_t bytes = temp_.size();
    TRAINKIT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.data(), bytes, keys, keys_sorted,
                                                        rows, rows_sorted, N, 0, end_bit_, s));
    bytes = temp_.size();
    TRAINKIT_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp_.data(), bytes, keys_sorted, unique,
                                                           counts, runs, N, s));
    // Counts past the last run stay 0, so the scan over N + 1 gives every offset up to U.
    bytes = temp_.size();
    TRAINKIT_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(temp_.data(), bytes, counts, offsets, N + 1, s));
    token_bucket_pack_kernel<>
        <<<blocks, threads, 0, s>>>(packed, unique, offsets, rows_sorted, runs, N, V);
    TRAINKIT_CUDA_CHECK_LAUNCH("token_bucket_pack_kernel");
  }

 private:
  cuda::device_buffer<std::byte> temp_;
  cuda::device_buffer<std::int32_t> ints_;
  std::size_t capacity_ = 0;
  int vocab_ = 0;
  int end_bit_ = 0;
};

}  // namespace trainkit::model::kernels
