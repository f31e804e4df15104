// examples/custom_policy/mlp_lm.hpp — a user-written Model: a small MLP character language model.
//
// Bengio et al. (2003)'s neural language model, with a hand-written backward pass in plain C++:
// the last K tokens are embedded (D numbers each), concatenated, passed through one tanh layer of
// H units and projected to a score per vocabulary entry. It exists to show what
// trainkit::model::model asks of a model — flat parameter and gradient buffers described by named
// tensors (with the roles the shipped AdamW decides weight decay from), micro-steps that *add*
// scaled gradients and keep the step's loss, gradient buckets published when backward has finished
// them (here one bucket: the whole buffer is final only at the end of backward), a FLOP count per
// token and the tensors a checkpoint must hold — and that such a model trains with the library's
// prefetcher, optimizer and checkpointer without touching include/.
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
    buckets_ = {{"all", {{0, size_}}}};

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
  /// adds the batch's mean loss to the step's, and on the last micro-step publishes the one bucket.
  void forward_backward(trainkit::batch_view<trainkit::host_memory> batch,
                        const trainkit::model::micro_step& micro, trainkit::host_context&) {
    if (micro.first()) loss_sum_ = 0.0;
    loss_sum_ += run(batch, micro.grad_scale, true);
    loss_count_ = micro.count;
    if (micro.last()) micro.on_bucket(0);
  }

  /// The mean loss of the current step's micro-steps.
  double step_loss() const { return loss_sum_ / loss_count_; }

  /// One bucket holding every gradient (an MLP this small has nothing to overlap).
  std::span<const trainkit::model::gradient_bucket> gradient_buckets() const { return buckets_; }

  /// Mean cross-entropy over the batch's B·T targets; adds grad_scale·∂loss/∂θ to the gradients.
  float forward_backward(trainkit::batch_view<trainkit::host_memory> batch, float grad_scale) {
    return run(batch, grad_scale, true);
  }

  /// The same loss without touching the gradients (evaluation).
  float forward(trainkit::batch_view<trainkit::host_memory> batch) {
    return run(batch, 0.0f, false);
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

  float run(trainkit::batch_view<trainkit::host_memory> batch, float grad_scale, bool backward) {
    const int B = batch.batch_size, T = batch.seq_len;
    const int V = config_.vocab, K = config_.context, D = config_.embed, H = config_.hidden;
    const float* emb = p(emb_);
    const float* w1 = p(w1_);
    const float* b1 = p(b1_);
    const float* w2 = p(w2_);
    const float* b2 = p(b2_);
    const auto kd = static_cast<std::size_t>(K * D), hs = static_cast<std::size_t>(H);
    std::vector<int> ctx(static_cast<std::size_t>(K));
    std::vector<float> x(kd), h(hs), logits(static_cast<std::size_t>(V));  // for one token
    std::vector<float> dh(hs), dx(kd);
    const float inv_n = 1.0f / float(std::size_t(B) * T);
    double loss_sum = 0;

    for (int b = 0; b < B; ++b) {
      const std::int32_t* in = batch.inputs + std::size_t(b) * T;   // (T)
      const std::int32_t* tg = batch.targets + std::size_t(b) * T;  // (T)
      for (int t = 0; t < T; ++t) {
        // Context: the K tokens ending at position t; before the row starts, token 0 (NUL, which
        // text never contains) stands for "nothing yet".
        for (int j = 0; j < K; ++j) {
          const int s = t - K + 1 + j;
          const int tok = s >= 0 ? in[s] : 0;
          if (tok < 0 || tok >= V || tg[t] < 0 || tg[t] >= V)
            throw trainkit::config_error("mlp_lm: token out of range [0, " + std::to_string(V) +
                                         ") at row " + std::to_string(b) + ", position " +
                                         std::to_string(t));
          ctx[std::size_t(j)] = tok;
          std::copy_n(emb + std::size_t(tok) * D, D, x.data() + std::size_t(j) * D);
        }
        // h = tanh(x·w1 + b1)                                          // (H)
        std::copy_n(b1, H, h.data());
        for (int i = 0; i < K * D; ++i) {
          const float xi = x[std::size_t(i)];
          const float* row = w1 + std::size_t(i) * H;
          for (int n = 0; n < H; ++n) h[std::size_t(n)] += xi * row[n];
        }
        for (float& v : h) v = std::tanh(v);
        // logits = h·w2 + b2                                           // (V)
        std::copy_n(b2, V, logits.data());
        for (int n = 0; n < H; ++n) {
          const float hn = h[std::size_t(n)];
          const float* row = w2 + std::size_t(n) * V;
          for (int v = 0; v < V; ++v) logits[std::size_t(v)] += hn * row[v];
        }
        // Softmax with the maximum subtracted, so exp never overflows.
        const float mx = *std::max_element(logits.begin(), logits.end());
        double z = 0;
        for (float& l : logits) z += std::exp(double(l - mx));
        const int target = tg[t];
        loss_sum += std::log(z) - double(logits[std::size_t(target)] - mx);
        if (!backward) continue;

        // dlogits = (softmax - onehot(target)) · grad_scale / (B·T), in place.
        const float scale = grad_scale * inv_n;
        for (int v = 0; v < V; ++v)
          logits[std::size_t(v)] = float(std::exp(double(logits[std::size_t(v)] - mx)) / z) * scale;
        logits[std::size_t(target)] -= scale;
        const float* dl = logits.data();
        float* gw2 = g(w2_);
        float* gb2 = g(b2_);
        for (int v = 0; v < V; ++v) gb2[v] += dl[v];
        for (int n = 0; n < H; ++n) {
          const float hn = h[std::size_t(n)];
          const float* row = w2 + std::size_t(n) * V;
          float* grow = gw2 + std::size_t(n) * V;
          float acc = 0;
          for (int v = 0; v < V; ++v) {
            grow[v] += hn * dl[v];
            acc += row[v] * dl[v];
          }
          dh[std::size_t(n)] = acc * (1.0f - hn * hn);  // through tanh: d tanh = 1 - tanh²
        }
        float* gw1 = g(w1_);
        float* gb1 = g(b1_);
        for (int n = 0; n < H; ++n) gb1[n] += dh[std::size_t(n)];
        for (int i = 0; i < K * D; ++i) {
          const float xi = x[std::size_t(i)];
          const float* row = w1 + std::size_t(i) * H;
          float* grow = gw1 + std::size_t(i) * H;
          float acc = 0;
          for (int n = 0; n < H; ++n) {
            grow[n] += xi * dh[std::size_t(n)];
            acc += row[n] * dh[std::size_t(n)];
          }
          dx[std::size_t(i)] = acc;
        }
        float* gemb = g(emb_);
        for (int j = 0; j < K; ++j)
          for (int d = 0; d < D; ++d)
            gemb[std::size_t(ctx[std::size_t(j)]) * D + d] += dx[std::size_t(j) * D + d];
      }
    }
    return float(loss_sum / (double(B) * T));
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
};

static_assert(trainkit::model::model<mlp_lm>);

}  // namespace custom_policy
