// trainkit/core/linalg/gemm_cublaslt.cuh — bf16 GEMMs through cuBLASLt, with fused epilogues.
//
// The device counterpart of gemm_cpu.hpp: the CUDA GPT-2's matrix products come here, and so can an
// optimizer's (nothing here depends on a model). Products are written in row-major terms (the
// model's buffers are row-major, as llm.c's): D (M, N) = α·op(A) (M, K) · op(B) (K, N) + β·D.
// cuBLASLt is column-major, so the call computes Dᵀ = op(B)ᵀ·op(A)ᵀ: a row-major (r, c) array is a
// column-major (c, r) array with the same leading dimension, and A and B swap places.
// In those column-major terms the epilogues mean, for the row-major caller:
//  - bias:          D[i, j] += bias[j]                      (bias of length N);
//  - gelu_aux_bias: aux = D + bias (pre-activation, kept for backward), D = gelu(aux);
//  - dgelu:         D = D ⊙ gelu'(aux)                      (aux: the forward's pre-activation);
//  - bgradb:        bias_grad[i] = Σ_k op(A)[i, k]          (length M; cuBLASLt's "B" is our A).
//    With A = dout stored (K, M) and trans_a, that is the bias gradient of a linear layer,
//    computed by the weight-gradient GEMM for free. It overwrites bias_grad (no accumulation).
// Inputs are bf16, accumulation fp32 (CUBLAS_COMPUTE_32F), D is bf16 or fp32. Algorithms come
// from cuBLASLt's heuristic, with the alignment the pointers really have (the heuristic assumes
// 256-byte alignment unless told, and an algorithm chosen under that assumption faults on a T×T
// attention slice at an odd T), and are cached per shape. With autotuning on (the default), the
// first GEMM of each shape times the heuristic's top candidates (up to 8, 3 runs each after a
// warm-up, CUDA events) and keeps the fastest: a one-time host wait per shape, in the first step.
// Trials of a GEMM that accumulates (β ≠ 0) write to a scratch copy, so D is written once. When the
// heuristic offers no algorithm for a fused epilogue, the plain GEMM runs and small kernels apply
// the epilogue: slower, same result. Workspace: 32 MiB, what the cuBLAS documentation recommends
// for Hopper.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/gelu.cuh"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/linalg/detail/gemm_tuning.hpp"

namespace trainkit::linalg {

using cuda::bf16_t;

enum class epilogue : int { none, bias, gelu_aux_bias, dgelu, bgradb };

/// Host-side description of one (possibly batched) GEMM, row-major.
struct matmul_arguments {
  const bf16_t* a = nullptr;  // stored (M, K), or (K, M) when trans_a
  const bf16_t* b = nullptr;  // stored (K, N), or (N, K) when trans_b
  void* d = nullptr;          // (M, N), bf16 or fp32 (d_is_f32)
  bool trans_a = false, trans_b = false, d_is_f32 = false;
  int m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldd = 0;  // row-major leading dimensions (elements)
  int batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements between batch entries
  float alpha = 1.0f;
  float beta = 0.0f;  // 1: accumulate into d (gradients)
  epilogue ep = epilogue::none;
  const bf16_t* bias = nullptr;  // bias, gelu_aux_bias: (N)
  bf16_t* bias_grad = nullptr;   // bgradb: (M)
  bf16_t* aux = nullptr;         // gelu_aux_bias (written), dgelu (read): (M, N) with ld_aux
  std::int64_t ld_aux = 0;
};

// Epilogue fallbacks, used only when cuBLASLt offers no fused algorithm. Each kernel is a function
// template (`template <class = void>`, launched as `name<><<<...>>>`): a plain `__global__`
// function has external linkage, so two .cu files including this header would each define it and
// the link would fail; a template's instantiations are merged by the linker.
namespace detail {

template <class = void>
__global__ void add_bias_kernel(bf16_t* d, const bf16_t* bias, int m, int n, std::int64_t ldd) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // over m·n
  if (i >= std::int64_t(m) * n) return;
  const std::int64_t r = i / n, c = i % n;
  bf16_t* p = d + r * ldd + c;
  *p = __float2bfloat16(__bfloat162float(*p) + __bfloat162float(bias[c]));
}

template <class = void>
__global__ void gelu_from_aux_kernel(bf16_t* d, std::int64_t ldd, const bf16_t* aux,
                                     std::int64_t ld_aux, int m, int n, bool backward) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::int64_t(m) * n) return;
  const std::int64_t r = i / n, c = i % n;
  const float x = __bfloat162float(aux[r * ld_aux + c]);
  bf16_t* p = d + r * ldd + c;
  *p = __float2bfloat16(backward ? __bfloat162float(*p) * cuda::gelu_grad(x) : cuda::gelu(x));
}

// bias_grad[i] = Σ_k a[k, i] for a stored (K, M): one thread per column, rows in order.
template <class = void>
__global__ void column_sum_kernel(bf16_t* out, const bf16_t* a, int rows, int cols,
                                  std::int64_t lda) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int r = 0; r < rows; ++r) s += __bfloat162float(a[std::int64_t(r) * lda + c]);
  out[c] = __float2bfloat16(s);
}

}  // namespace detail

/// Owns the cuBLASLt handle, the workspace and the algorithm cache. One per model (not thread
/// safe: a model runs on one host thread and one stream).
class matmul_context {
 public:
  static constexpr std::size_t workspace_bytes = std::size_t(32) << 20;  // cuBLAS docs, Hopper

  matmul_context() : workspace_(workspace_bytes) {
    TRAINKIT_CUBLAS_CHECK(cublasLtCreate(&handle_));
  }
  matmul_context(const matmul_context&) = delete;
  matmul_context& operator=(const matmul_context&) = delete;
  ~matmul_context() {
    if (handle_) (void)cublasLtDestroy(handle_);
  }

  /// Number of GEMMs that ran an epilogue through the fallback kernels (tests and reports).
  int fallbacks() const noexcept { return fallbacks_; }

  /// One shape's autotuning: how many candidates were timed, the heuristic's first choice and the
  /// fastest, in milliseconds per GEMM.
  struct tuning_record {
    int m = 0, n = 0, k = 0, batch = 1;
    epilogue ep = epilogue::none;
    int candidates = 0;
    int chosen = 0;  // index into the heuristic's list; 0 = its own first choice; -1 = none ran
    int heuristic = 0;  // the first candidate that ran: 0 unless the heuristic's first one failed
    double heuristic_ms = 0, best_ms = 0;  // the times of `heuristic` and `chosen`
  };

  /// Time the heuristic's candidates on each new shape (default) or take its first choice.
  void set_autotune(bool on) noexcept { autotune_ = on; }
  bool autotune() const noexcept { return autotune_; }
  const std::vector<tuning_record>& tuning_log() const noexcept { return tuning_; }

  /// Checks the arguments; throws config_error naming what cannot work.
  static void can_implement(const matmul_arguments& x) {
    constexpr const char* who = "matmul";
    cuda::require(x.a && x.b && x.d, who, "null operand");
    cuda::require(x.m > 0 && x.n > 0 && x.k > 0 && x.batch > 0, who, [&] {
      return "empty shape m=" + std::to_string(x.m) + " n=" + std::to_string(x.n) +
             " k=" + std::to_string(x.k) + " batch=" + std::to_string(x.batch);
    });
    cuda::require(x.lda >= (x.trans_a ? x.m : x.k), who,
                  [&] { return "lda " + std::to_string(x.lda) + " too small"; });
    cuda::require(x.ldb >= (x.trans_b ? x.k : x.n), who,
                  [&] { return "ldb " + std::to_string(x.ldb) + " too small"; });
    cuda::require(x.ldd >= x.n, who, [&] { return "ldd " + std::to_string(x.ldd) + " too small"; });
    cuda::require(x.ep == epilogue::none || x.batch == 1, who, "epilogues are for unbatched GEMMs");
    cuda::require(!(x.d_is_f32 && x.ep != epilogue::none), who, "epilogues write bf16 outputs");
    if (x.ep == epilogue::bias || x.ep == epilogue::gelu_aux_bias)
      cuda::require(x.bias != nullptr, who, "bias epilogue without a bias");
    if (x.ep == epilogue::gelu_aux_bias || x.ep == epilogue::dgelu) {
      cuda::require(x.aux != nullptr, who, "GELU epilogue without its aux matrix");
      // cublasLt.h: the GELU aux leading dimension must be a multiple of 8.
      cuda::require(x.ld_aux >= x.n && x.ld_aux % 8 == 0, who, [&] {
        return "GELU aux leading dimension " + std::to_string(x.ld_aux) +
               " must be ≥ n and a multiple of 8";
      });
    }
    if (x.ep == epilogue::bgradb) {
      cuda::require(x.bias_grad != nullptr, who, "bgradb epilogue without a bias-gradient output");
      cuda::require(x.trans_a, who, "bgradb is used (and has a fallback) only with a transposed A");
    }
  }

  /// Enqueues the GEMM on `stream`. Throws config_error (bad arguments) or cuda_error.
  void run(const matmul_arguments& x, cudaStream_t stream) {
    can_implement(x);
    const bool fused = x.ep != epilogue::none;
    if (fused && try_run(x, x.ep, stream)) return;
    if (!fused) {
      if (!try_run(x, epilogue::none, stream))
        throw config_error("matmul: cuBLASLt has no algorithm for m=" + std::to_string(x.m) +
                           " n=" + std::to_string(x.n) + " k=" + std::to_string(x.k) +
                           " batch=" + std::to_string(x.batch));
      return;
    }
    run_with_fallback_epilogue(x, stream);
  }

 private:
  using cache_key = std::array<std::int64_t, 22>;

  // Runs the GEMM with epilogue `ep` if cuBLASLt has an algorithm for it; false if it has none.
  bool try_run(const matmul_arguments& x, epilogue ep, cudaStream_t stream) {
    const std::int64_t es_d = x.d_is_f32 ? 4 : 2;
    using detail::alignment_of;
    const std::int64_t al_a = alignment_of(x.b, x.batch > 1 ? x.stride_b * 2 : 0);  // cuBLAS A
    const std::int64_t al_b = alignment_of(x.a, x.batch > 1 ? x.stride_a * 2 : 0);  // cuBLAS B
    const std::int64_t al_d = alignment_of(x.d, x.batch > 1 ? x.stride_d * es_d : 0);
    // The epilogue's bias (or bias gradient) and aux matrix, each in its own slot.
    const auto al_e = detail::epilogue_alignments(
        ep == epilogue::bgradb ? static_cast<const void*>(x.bias_grad)
                               : static_cast<const void*>(x.bias),
        x.aux);
    const cache_key key{
        x.m,        x.n,     x.k,        x.lda,          x.ldb,      x.ldd,   x.trans_a, x.trans_b,
        x.d_is_f32, x.batch, x.stride_a, x.stride_b,     x.stride_d, int(ep), x.ld_aux,  al_a,
        al_b,       al_d,    al_e[0],    al_e[1],        x.beta != 0.0f, 0};

    // Column-major problem: D' (n × m) = op(A') (n × k) · op(B') (k × m), A' = b, B' = a.
    const cublasOperation_t op_a = x.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = x.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const std::uint64_t a_rows = x.trans_b ? x.k : x.n, a_cols = x.trans_b ? x.n : x.k;
    const std::uint64_t b_rows = x.trans_a ? x.m : x.k, b_cols = x.trans_a ? x.k : x.m;
    const cudaDataType d_type = x.d_is_f32 ? CUDA_R_32F : CUDA_R_16BF;

    layout la(CUDA_R_16BF, a_rows, a_cols, x.ldb, x.batch, x.stride_b);
    layout lb(CUDA_R_16BF, b_rows, b_cols, x.lda, x.batch, x.stride_a);
    layout ld(d_type, std::uint64_t(x.n), std::uint64_t(x.m), x.ldd, x.batch, x.stride_d);
    operation desc(op_a, op_b);
    if (ep != epilogue::none) {
      cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DEFAULT;
      switch (ep) {
        case epilogue::bias:
          e = CUBLASLT_EPILOGUE_BIAS;
          break;
        case epilogue::gelu_aux_bias:
          e = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
          break;
        case epilogue::dgelu:
          e = CUBLASLT_EPILOGUE_DGELU;
          break;
        case epilogue::bgradb:
          e = CUBLASLT_EPILOGUE_BGRADB;
          break;
        case epilogue::none:
          break;
      }
      desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, std::uint32_t(e));
      if (ep == epilogue::bias || ep == epilogue::gelu_aux_bias)
        desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(x.bias));
      if (ep == epilogue::bgradb)
        desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<void*>(x.bias_grad));
      if (ep != epilogue::bgradb) {
        const std::int32_t bias_type = CUDA_R_16BF;
        desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
      }
      if (ep == epilogue::gelu_aux_bias || ep == epilogue::dgelu) {
        desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(x.aux));
        desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, x.ld_aux);
        const std::int32_t aux_type = CUDA_R_16BF;
        desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, aux_type);
      }
    }

    auto found = cache_.find(key);
    if (found == cache_.end()) {
      cublasLtMatmulPreference_t pref = nullptr;
      TRAINKIT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
        TRAINKIT_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
      };
      try {
        set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t(workspace_bytes));
        set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, std::uint32_t(al_a));
        set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, std::uint32_t(al_b));
        set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, std::uint32_t(al_d));
        set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, std::uint32_t(al_d));
      } catch (...) {
        (void)cublasLtMatmulPreferenceDestroy(pref);
        throw;
      }
      std::array<cublasLtMatmulHeuristicResult_t, max_candidates> results{};
      int returned = 0;
      const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
          handle_, desc.get(), la.get(), lb.get(), ld.get(), ld.get(), pref,
          autotune_ ? max_candidates : 1, results.data(), &returned);
      (void)cublasLtMatmulPreferenceDestroy(pref);
      if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && returned == 0)) {
        cache_.emplace(key, std::nullopt);
        return false;
      }
      TRAINKIT_CUBLAS_CHECK(s);
      int best = 0;
      if (autotune_) {  // timed also when one candidate came back: the log lists every shape
        best = pick_fastest(x, desc, la, lb, ld, std::span(results.data(), std::size_t(returned)),
                            ep, stream);
      }
      if (best < 0) {  // no candidate could run the shape: as if the heuristic had none
        cache_.emplace(key, std::nullopt);
        return false;
      }
      found = cache_.emplace(key, results[std::size_t(best)].algo).first;
    }
    if (!found->second) return false;
    const float alpha = x.alpha, beta = x.beta;
    TRAINKIT_CUBLAS_CHECK(cublasLtMatmul(handle_, desc.get(), &alpha, x.b, la.get(), x.a, lb.get(),
                                         &beta, x.d, ld.get(), x.d, ld.get(), &*found->second,
                                         workspace_.data(), workspace_bytes, stream));
    return true;
  }

  void run_with_fallback_epilogue(const matmul_arguments& x, cudaStream_t stream) {
    ++fallbacks_;
    matmul_arguments plain = x;
    plain.ep = epilogue::none;
    constexpr int threads = 256;
    const std::size_t mn = std::size_t(x.m) * x.n;
    bf16_t* d = static_cast<bf16_t*>(x.d);
    switch (x.ep) {
      case epilogue::bias:
        run(plain, stream);
        detail::add_bias_kernel<>
            <<<cuda::ceil_div(mn, threads), threads, 0, stream>>>(d, x.bias, x.m, x.n, x.ldd);
        TRAINKIT_CUDA_CHECK_LAUNCH("add_bias_kernel");
        break;
      case epilogue::gelu_aux_bias:
        plain.d = x.aux;  // pre-activation first, then gelu(aux) into d
        plain.ldd = x.ld_aux;
        run(plain, stream);
        detail::add_bias_kernel<><<<cuda::ceil_div(mn, threads), threads, 0, stream>>>(
            x.aux, x.bias, x.m, x.n, x.ld_aux);
        TRAINKIT_CUDA_CHECK_LAUNCH("add_bias_kernel");
        detail::gelu_from_aux_kernel<><<<cuda::ceil_div(mn, threads), threads, 0, stream>>>(
            d, x.ldd, x.aux, x.ld_aux, x.m, x.n, false);
        TRAINKIT_CUDA_CHECK_LAUNCH("gelu_from_aux_kernel");
        break;
      case epilogue::dgelu:
        run(plain, stream);
        detail::gelu_from_aux_kernel<><<<cuda::ceil_div(mn, threads), threads, 0, stream>>>(
            d, x.ldd, x.aux, x.ld_aux, x.m, x.n, true);
        TRAINKIT_CUDA_CHECK_LAUNCH("gelu_from_aux_kernel");
        break;
      case epilogue::bgradb:
        run(plain, stream);
        detail::column_sum_kernel<>
            <<<cuda::ceil_div(std::size_t(x.m), threads), threads, 0, stream>>>(x.bias_grad, x.a,
                                                                                x.k, x.m, x.lda);
        TRAINKIT_CUDA_CHECK_LAUNCH("column_sum_kernel");
        break;
      case epilogue::none:
        break;
    }
  }

  // RAII wrappers for the cuBLASLt descriptors of one call.
  class layout {
   public:
    layout(cudaDataType t, std::uint64_t rows, std::uint64_t cols, std::int64_t ld, int batch,
           std::int64_t stride) {
      TRAINKIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&h_, t, rows, cols, ld));
      if (batch > 1) {
        const std::int32_t count = batch;
        set(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
        set(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
      }
    }
    layout(const layout&) = delete;
    layout& operator=(const layout&) = delete;
    ~layout() { (void)cublasLtMatrixLayoutDestroy(h_); }
    cublasLtMatrixLayout_t get() const noexcept { return h_; }

   private:
    template <class V>
    void set(cublasLtMatrixLayoutAttribute_t a, const V& v) {
      const cublasStatus_t s = cublasLtMatrixLayoutSetAttribute(h_, a, &v, sizeof(v));
      if (s != CUBLAS_STATUS_SUCCESS) {
        (void)cublasLtMatrixLayoutDestroy(h_);
        TRAINKIT_CUBLAS_CHECK(s);
      }
    }
    cublasLtMatrixLayout_t h_ = nullptr;
  };

  class operation {
   public:
    operation(cublasOperation_t op_a, cublasOperation_t op_b) {
      TRAINKIT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&h_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      try {
        set(CUBLASLT_MATMUL_DESC_TRANSA, std::int32_t(op_a));
        set(CUBLASLT_MATMUL_DESC_TRANSB, std::int32_t(op_b));
      } catch (...) {
        (void)cublasLtMatmulDescDestroy(h_);
        throw;
      }
    }
    operation(const operation&) = delete;
    operation& operator=(const operation&) = delete;
    ~operation() { (void)cublasLtMatmulDescDestroy(h_); }
    cublasLtMatmulDesc_t get() const noexcept { return h_; }
    template <class V>
    void set(cublasLtMatmulDescAttributes_t a, const V& v) {
      TRAINKIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(h_, a, &v, sizeof(v)));
    }

   private:
    cublasLtMatmulDesc_t h_ = nullptr;
  };

  static constexpr int max_candidates = 8;

  // Times each candidate (1 warm-up + 3 runs, events on `stream`, then a host wait) and returns
  // the index of the fastest (detail::pick_fastest), -1 if none ran; a candidate that fails to run
  // is skipped. β ≠ 0 reads D: the trials then write a scratch copy of it, so the caller's D is
  // untouched until the real run.
  int pick_fastest(const matmul_arguments& x, operation& desc, const layout& la, const layout& lb,
                   const layout& ld, std::span<const cublasLtMatmulHeuristicResult_t> candidates,
                   epilogue ep, cudaStream_t stream) {
    void* d = x.d;
    trainkit::cuda::device_buffer<std::byte> scratch;
    if (x.beta != 0.0f) {
      const std::size_t es = x.d_is_f32 ? 4 : 2;
      const std::size_t span_elems = std::size_t(x.batch - 1) * std::size_t(x.stride_d) +
                                     std::size_t(x.m - 1) * std::size_t(x.ldd) + std::size_t(x.n);
      scratch = trainkit::cuda::device_buffer<std::byte>(span_elems * es);
      scratch.fill_bytes_async(0, stream);
      d = scratch.data();
    }
    const float alpha = x.alpha, beta = x.beta;
    trainkit::cuda::event start, stop;
    constexpr int runs = 3;
    std::vector<float> ms(candidates.size(), -1.0f);  // -1: failed to run
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      auto launch = [&] {
        return cublasLtMatmul(handle_, desc.get(), &alpha, x.b, la.get(), x.a, lb.get(), &beta, d,
                              ld.get(), d, ld.get(), &candidates[c].algo, workspace_.data(),
                              workspace_bytes, stream);
      };
      if (launch() != CUBLAS_STATUS_SUCCESS) continue;  // this candidate cannot run the shape
      start.record(stream);
      bool ok = true;
      for (int r = 0; r < runs && ok; ++r) ok = launch() == CUBLAS_STATUS_SUCCESS;
      stop.record(stream);
      if (!ok) continue;
      ms[c] = trainkit::cuda::elapsed_ms(start, stop) / float(runs);
    }
    const detail::candidate_pick p = detail::pick_fastest(ms);
    tuning_.push_back({x.m, x.n, x.k, x.batch, ep, int(candidates.size()), p.chosen, p.first_ran,
                       p.first_ms, p.best_ms});
    return p.chosen;
  }

  cublasLtHandle_t handle_ = nullptr;
  trainkit::cuda::device_buffer<std::byte> workspace_;
  std::map<cache_key, std::optional<cublasLtMatmulAlgo_t>> cache_;
  std::vector<tuning_record> tuning_;
  bool autotune_ = true;
  int fallbacks_ = 0;
};

}  // namespace trainkit::linalg
