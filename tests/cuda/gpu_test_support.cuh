// tests/cuda/gpu_test_support.cuh — helpers shared by the .cu GPU tests: skipping without a
// device (gpu_test_env.hpp), random bf16-representable inputs, poisoned device buffers, and the
// error measures the tolerances are stated in. Uploads and poisoning are ordered on a stream and
// finished before they return, so a kernel on any stream (the model's are non-blocking) sees them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "gpu_test_env.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/device.hpp"

namespace trainkit::test_gpu {

using fvec = std::vector<float>;
using bf16_t = cuda::bf16_t;

inline float round_bf16(float x) {
  return bf16::from_float(x).to_float();
}

/// n draws of N(mean, stddev) rounded to bf16, so host and device see the same values.
inline fvec random_bf16(std::size_t n, std::mt19937_64& rng, float stddev = 1.0f,
                        float mean = 0.0f) {
  std::normal_distribution<float> d(mean, stddev);
  fvec v(n);
  for (auto& x : v) x = round_bf16(d(rng));
  return v;
}

inline std::vector<std::int32_t> random_tokens(std::size_t n, int V, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int32_t> d(0, V - 1);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// n token ids with P(rank r) ∝ 1/(r + 1)^s, ranks shuffled over [0, V): real text's shape, where
/// a few tokens (",", "the") fill a large share of a batch.
inline std::vector<std::int32_t> zipf_tokens(std::size_t n, int V, std::mt19937_64& rng,
                                             double s = 1.1) {
  std::vector<double> w(static_cast<std::size_t>(V));
  for (int r = 0; r < V; ++r) w[std::size_t(r)] = 1.0 / std::pow(r + 1.0, s);
  std::discrete_distribution<int> rank(w.begin(), w.end());
  std::vector<std::int32_t> id(static_cast<std::size_t>(V));
  for (int v = 0; v < V; ++v) id[std::size_t(v)] = v;
  std::shuffle(id.begin(), id.end(), rng);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = id[std::size_t(rank(rng))];
  return t;
}

/// A device bf16 copy of host floats, complete on return (copied on `s`, then `s` synchronised).
inline cuda::device_buffer<bf16> to_device(const fvec& host, cudaStream_t s = nullptr) {
  std::vector<bf16> b(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) b[i] = bf16::from_float(host[i]);
  cuda::device_buffer<bf16> d(host.size());
  cuda::copy_to_device(d.data(), std::span<const bf16>(b), s);
  return d;
}

template <class T>
cuda::device_buffer<T> to_device_raw(const std::vector<T>& host, cudaStream_t s = nullptr) {
  cuda::device_buffer<T> d(host.size());
  cuda::copy_to_device(d.data(), std::span<const T>(host), s);
  return d;
}

/// Every byte of `d` set to 0xff on `s`, finished on return.
template <class T>
void poison(cuda::device_buffer<T>& d, cudaStream_t s = nullptr) {
  d.fill_bytes_async(0xff, s);
  TRAINKIT_CUDA_CHECK(cudaStreamSynchronize(s));
}

/// n bf16 of device memory filled with NaN (0xffff): unwritten outputs show up.
inline cuda::device_buffer<bf16> poisoned(std::size_t n, cudaStream_t s = nullptr) {
  cuda::device_buffer<bf16> d(n);
  poison(d, s);
  return d;
}
inline cuda::device_buffer<float> poisoned_f32(std::size_t n, cudaStream_t s = nullptr) {
  cuda::device_buffer<float> d(n);
  poison(d, s);
  return d;
}

inline fvec to_host(const cuda::device_buffer<bf16>& d, std::size_t n = std::size_t(-1)) {
  TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
  if (n == std::size_t(-1)) n = d.size();
  std::vector<bf16> b(n);
  cuda::copy_to_host(std::span<bf16>(b), d.data());
  fvec out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = b[i].to_float();
  return out;
}
template <class T>
std::vector<T> to_host_raw(const cuda::device_buffer<T>& d) {
  TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> out(d.size());
  cuda::copy_to_host(std::span<T>(out), d.data());
  return out;
}

inline bf16_t* dev(cuda::device_buffer<bf16>& b) {
  return cuda::as_device_bf16(b.data());
}

/// ‖a − b‖ / ‖b‖; NaN anywhere (an unwritten poisoned output) gives infinity.
inline double relative_error(const fvec& a, const fvec& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += double(a[i] - b[i]) * (a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

inline double cosine(const fvec& a, const fvec& b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return -INFINITY;
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::max(std::sqrt(aa * bb), 1e-30);
}

}  // namespace trainkit::test_gpu
