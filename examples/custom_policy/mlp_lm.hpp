// examples/custom_policy/mlp_lm.hpp — a user-written Model: a small MLP character language model.
//
// Bengio et al. (2003)'s neural language model, with a hand-written backward pass in plain C++:
// the last K tokens are embedded (D numbers each), concatenated, passed through one tanh layer of
// H units and projected to a score per vocabulary entry. It exists to show what
// trainkit::model::model asks of a model — flat parameter and gradient buffers described by named
// tensors (with the roles the shipped AdamW decides weight decay from), micro-steps that *add*
// scaled gradients and keep the step's loss, gradient buckets published as backward finishes them
// (three: backward runs layer by layer over the whole batch, so the output layer's gradients are
// final before the hidden layer's, and those before the embeddings'), a FLOP count per token and
// the tensors a checkpoint must hold — and that such a model trains with the library's prefetcher,
// optimizer and checkpointer without touching include/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <trainkit/core/batch.hpp>
#include <trainkit/core/error.hpp>
#include <trainkit/core/execution_context.hpp>
#include <trainkit/core/memory_space.hpp>
#include <trainkit/core/tensor.hpp>
#include <trainkit/model/concepts.hpp>

namespace custom_policy {

struct mlp_lm_config {
  int vocab = 128;   // V
  int context = 8;   // K: tokens the model sees before the one it predicts
  int embed = 16;    // D
  int hidden = 128;  // H

  friend bool operator==(const mlp_lm_config&, const mlp_lm_config&) = default;
};

class mlp_lm {
 public:
  using memory_space = trainkit::host_memory;  // batches, parameters and gradients in host RAM
  using parameter_type = float;                // what the optimizer must update

  mlp_lm(mlp_lm_config config, std::uint64_t seed) : config_(config) {
    const auto& c = config_;
    if (c.vocab < 2 || c.context < 1 || c.embed < 1 || c.hidden < 1)
      throw trainkit::config_error("mlp_lm: vocab >= 2, context, embed and hidden >= 1 required");
    const auto V = std::int64_t(c.vocab), K = std::int64_t(c.context);
    const auto D = std::int64_t(c.embed), H = std::int64_t(c.hidden);
    // AdamW's default decays the embedding and the matrices, not the biases (llm.c's rule).
    add_tensor("emb", {V, D}, trainkit::tensor_role::embedding);
    add_tensor("w1", {K * D, H}, trainkit::tensor_role::matrix);
    add_tensor("b1", {H}, trainkit::tensor_role::bias);
    add_tensor("w2", {H, V}, trainkit::tensor_role::matrix);
    add_tensor("b2", {V}, trainkit::tensor_role::bias);
    params_.assign(size_, 0.0f);
    grads_.assign(size_, 0.0f);
    // The buckets in the order backward finishes them; each is one contiguous range, because
    // the layout keeps a layer's weight and bias side by side.
    const auto range = [&](int first, int last) {
      const auto& a = layout_[std::size_t(first)];
      const auto& b = layout_[std::size_t(last)];
      return trainkit::model::gradient_range{a.offset, b.offset + b.numel() - a.offset};
    };
    buckets_ = {{"output", {range(w2_, b2_)}},
                {"hidden", {range(w1_, b1_)}},
                {"embedding", {range(emb_, emb_)}}};
    trainkit::model::check_buckets_tile(buckets_, size_, "mlp_lm");

    // Embeddings ~ N(0, 1); each matrix scaled by 1/sqrt(fan-in) so tanh starts unsaturated; the
    // output layer starts small so the first loss is close to ln(V), the loss of guessing.
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto fill = [&](int index, float scale) {
      const auto& t = layout_[std::size_t(index)];
      for (std::size_t i = 0; i < t.numel(); ++i) params_[t.offset + i] = scale * normal(rng);
    };
    fill(emb_, 1.0f);
    fill(w1_, 1.0f / std::sqrt(float(K * D)));
    fill(w2_, 0.1f / std::sqrt(float(H)));
  }

  /// One micro-step of the trainer's step protocol: adds grad_scale·∂loss/∂θ to the gradients,
  /// adds the batch's mean loss to the step's, and on the last micro-step publishes each bucket
  /// as soon as backward has finished it.
  void forward_backward(trainkit::batch_view<trainkit::host_memory> batch,
                        const trainkit::model::micro_step& micro, trainkit::host_context&) {
    if (micro.first()) loss_sum_ = 0.0;
    const trainkit::model::bucket_observer none{};
    loss_sum_ += run(batch, micro.grad_scale, true, micro.last() ? micro.on_bucket : none);
    loss_count_ = micro.count;
  }

  /// The mean loss of the current step's micro-steps.
  double step_loss() const { return loss_sum_ / loss_count_; }

  /// output (w2, b2), hidden (w1, b1), embedding (emb): backward's order.
  std::span<const trainkit::model::gradient_bucket> gradient_buckets() const { return buckets_; }

  /// Mean cross-entropy over the batch's B·T targets; adds grad_scale·∂loss/∂θ to the gradients.
  float forward_backward(trainkit::batch_view<trainkit::host_memory> batch, float grad_scale) {
    return run(batch, grad_scale, true, {});
  }

  /// The same loss without touching the gradients (evaluation).
  float forward(trainkit::batch_view<trainkit::host_memory> batch) {
    return run(batch, 0.0f, false, {});
  }

  void zero_grad(trainkit::host_context&) { zero_grad(); }
  void zero_grad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

  /// 2 FLOPs per multiply-add of the two matrix products, times 3 for forward + backward (the
  /// backward pass computes two products per forward one), as the 6·N rule counts a transformer.
  /// The embedding lookup is a copy, not a product, so it is not counted.
  double flops_per_token(int /*seq_len: an MLP's cost does not grow with it*/) const {
    const double K = config_.context, D = config_.embed, H = config_.hidden, V = config_.vocab;
    return 6.0 * (K * D * H + H * V);
  }

  std::span<const trainkit::tensor_info> parameter_layout() const { return layout_; }
  std::span<float> parameters() { return params_; }
  std::span<float> gradients() { return grads_; }
  std::size_t num_parameters() const { return size_; }

  /// The parameters, one tensor each; the optimizer adds its moments to the checkpoint.
  std::vector<trainkit::state_tensor> state() {
    std::vector<trainkit::state_tensor> out;
    for (const auto& t : layout_)
      out.push_back(trainkit::make_state_tensor(
          "model." + t.name, std::span<float>(params_.data() + t.offset, t.numel()), t.shape));
    return out;
  }

  const mlp_lm_config& config() const noexcept { return config_; }

 private:
  void add_tensor(std::string name, std::vector<std::int64_t> shape, trainkit::tensor_role role) {
    trainkit::tensor_info t{std::move(name), std::move(shape), size_, role};
    size_ += t.numel();
    layout_.push_back(std::move(t));
  }

  float* p(int index) { return params_.data() + layout_[std::size_t(index)].offset; }
  float* g(int index) { return grads_.data() + layout_[std::size_t(index)].offset; }

  // Forward over every token of the batch, then backward one layer at a time over all of them:
  // a layer's gradients are final when its pass ends, and `publish` is told so (bucket indices
  // as in buckets_). Each gradient element still receives its tokens' contributions in token
  // order, so the result does not depend on whether anyone listens.
  float run(trainkit::batch_view<trainkit::host_memory> batch, float grad_scale, bool backward,
            trainkit::model::bucket_observer publish) {
    const int B = batch.batch_size, T = batch.seq_len;
    const int V = config_.vocab, K = config_.context, D = config_.embed, H = config_.hidden;
    const float* emb = p(emb_);
    const float* w1 = p(w1_);
    const float* b1 = p(b1_);
    const float* w2 = p(w2_);
    const float* b2 = p(b2_);
    const auto n = std::size_t(B) * std::size_t(T);
    const auto kd = static_cast<std::size_t>(K * D), hs = static_cast<std::size_t>(H);
    const auto vs = static_cast<std::size_t>(V);
    // Kept for backward, one row per token.
    ctx_.resize(n * std::size_t(K));     // (B·T, K)
    x_.resize(n * kd);                   // (B·T, K·D)
    h_.resize(n * hs);                   // (B·T, H)
    dl_.resize(backward ? n * vs : vs);  // (B·T, V): dlogits; forward only: one row of logits
    const float inv_n = 1.0f / float(n);
    double loss_sum = 0;

    for (std::size_t i = 0; i < n; ++i) {
      const auto b = i / std::size_t(T);
      const int t = int(i % std::size_t(T));
      const std::int32_t* in = batch.inputs + b * T;   // (T)
      const std::int32_t* tg = batch.targets + b * T;  // (T)
      int* ctx = ctx_.data() + i * std::size_t(K);
      float* x = x_.data() + i * kd;
      float* h = h_.data() + i * hs;
      float* logits = dl_.data() + (backward ? i * vs : 0);
      // Context: the K tokens ending at position t; before the row starts, token 0 (NUL, which
      // text never contains) stands for "nothing yet".
      for (int j = 0; j < K; ++j) {
        const int s = t - K + 1 + j;
        const int tok = s >= 0 ? in[s] : 0;
        if (tok < 0 || tok >= V || tg[t] < 0 || tg[t] >= V)
          throw trainkit::config_error("mlp_lm: token out of range [0, " + std::to_string(V) +
                                       ") at row " + std::to_string(b) + ", position " +
                                       std::to_string(t));
        ctx[j] = tok;
        std::copy_n(emb + std::size_t(tok) * D, D, x + std::size_t(j) * D);
      }
      // h = tanh(x·w1 + b1)                                          // (H)
      std::copy_n(b1, H, h);
      for (int k = 0; k < K * D; ++k) {
        const float xk = x[k];
        const float* row = w1 + std::size_t(k) * H;
        for (int u = 0; u < H; ++u) h[u] += xk * row[u];
      }
      for (int u = 0; u < H; ++u) h[u] = std::tanh(h[u]);
      // logits = h·w2 + b2                                           // (V)
      std::copy_n(b2, V, logits);
      for (int u = 0; u < H; ++u) {
        const float hu = h[u];
        const float* row = w2 + std::size_t(u) * V;
        for (int v = 0; v < V; ++v) logits[v] += hu * row[v];
      }
      // Softmax with the maximum subtracted, so exp never overflows.
      const float mx = *std::max_element(logits, logits + V);
      double z = 0;
      for (int v = 0; v < V; ++v) z += std::exp(double(logits[v] - mx));
      const int target = tg[t];
      loss_sum += std::log(z) - double(logits[target] - mx);
      if (!backward) continue;
      // dlogits = (softmax - onehot(target)) · grad_scale / (B·T), in place.
      const float scale = grad_scale * inv_n;
      for (int v = 0; v < V; ++v) logits[v] = float(std::exp(double(logits[v] - mx)) / z) * scale;
      logits[target] -= scale;
    }
    if (!backward) return float(loss_sum / double(n));

    // Output layer: gw2, gb2, and dh through tanh (d tanh = 1 - tanh²), kept in h_.
    float* gw2 = g(w2_);
    float* gb2 = g(b2_);
    for (std::size_t i = 0; i < n; ++i) {
      const float* dl = dl_.data() + i * vs;
      float* h = h_.data() + i * hs;
      for (int v = 0; v < V; ++v) gb2[v] += dl[v];
      for (int u = 0; u < H; ++u) {
        const float hu = h[u];
        const float* row = w2 + std::size_t(u) * V;
        float* grow = gw2 + std::size_t(u) * V;
        float acc = 0;
        for (int v = 0; v < V; ++v) {
          grow[v] += hu * dl[v];
          acc += row[v] * dl[v];
        }
        h[u] = acc * (1.0f - hu * hu);  // h_ now holds dh
      }
    }
    publish(0);  // output

    // Hidden layer: gw1, gb1, and dx, kept in x_ once the row's x is no longer needed.
    float* gw1 = g(w1_);
    float* gb1 = g(b1_);
    std::vector<float> dx(kd);
    for (std::size_t i = 0; i < n; ++i) {
      const float* dh = h_.data() + i * hs;
      float* x = x_.data() + i * kd;
      for (int u = 0; u < H; ++u) gb1[u] += dh[u];
      for (int k = 0; k < K * D; ++k) {
        const float xk = x[k];
        const float* row = w1 + std::size_t(k) * H;
        float* grow = gw1 + std::size_t(k) * H;
        float acc = 0;
        for (int u = 0; u < H; ++u) {
          grow[u] += xk * dh[u];
          acc += row[u] * dh[u];
        }
        dx[std::size_t(k)] = acc;
      }
      std::copy(dx.begin(), dx.end(), x);  // x_ now holds dx
    }
    publish(1);  // hidden

    // Embedding: scatter dx into the rows of the context's tokens.
    float* gemb = g(emb_);
    for (std::size_t i = 0; i < n; ++i) {
      const int* ctx = ctx_.data() + i * std::size_t(K);
      const float* dx_row = x_.data() + i * kd;
      for (int j = 0; j < K; ++j)
        for (int d = 0; d < D; ++d)
          gemb[std::size_t(ctx[j]) * D + d] += dx_row[std::size_t(j) * D + d];
    }
    publish(2);  // embedding
    return float(loss_sum / double(n));
  }

  // Indices into layout_, in the order the constructor adds them.
  static constexpr int emb_ = 0, w1_ = 1, b1_ = 2, w2_ = 3, b2_ = 4;

  mlp_lm_config config_;
  std::vector<trainkit::tensor_info> layout_;
  std::size_t size_ = 0;
  std::vector<float> params_;
  std::vector<float> grads_;
  std::vector<trainkit::model::gradient_bucket> buckets_;
  double loss_sum_ = 0.0;  // Σ micro-step losses of the current step
  int loss_count_ = 1;
  std::vector<int> ctx_;  // scratch of run(), kept to avoid reallocating per call
  std::vector<float> x_, h_, dl_;
};

static_assert(trainkit::model::model<mlp_lm>);

}  // namespace custom_policy
