// Tests of the step protocol (core/step_protocol.hpp) on the CPU policies: buckets published in
// backward's order, each once and only when its gradients are final; the step's loss kept by the
// model; the clipping step over buckets equal to the whole-buffer norm bit for bit; the reducer
// seam called exactly as documented; and the trainer's results equal to a hand-written loop of the
// one-call-per-micro-batch API (the loop before the protocol), bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <trainkit/trainkit.hpp>

namespace tk = trainkit;

namespace {

tk::model::gpt2_config tiny() {
  return {.max_seq_len = 16,
          .vocab_size = 100,
          .padded_vocab_size = 128,
          .num_layers = 3,
          .num_heads = 2,
          .channels = 16};
}

tk::data::synthetic_source source(int B = 2, int T = 8) {
  return tk::data::synthetic_source({.batch_size = B,
                                     .seq_len = T,
                                     .vocab_size = 100,
                                     .alphabet = 20,
                                     .branching = 2,
                                     .seed = 9});
}

tk::host_batch next_batch(tk::data::synthetic_source& s) {
  tk::host_batch b;
  s.next(b);
  return b;
}

/// Records each bucket's gradients at the moment it is published.
struct recorder {
  tk::model::gpt2_cpu* model = nullptr;
  std::vector<std::size_t> order;
  std::vector<std::vector<float>> at_publication;
  static void ready(void* self, std::size_t i) {
    auto& r = *static_cast<recorder*>(self);
    r.order.push_back(i);
    r.at_publication.push_back(r.copy(i));
  }
  std::vector<float> copy(std::size_t i) const {
    std::vector<float> out;
    const auto g = model->gradients();
    for (const auto& range : model->gradient_buckets()[i].ranges)
      out.insert(out.end(), g.begin() + std::ptrdiff_t(range.offset),
                 g.begin() + std::ptrdiff_t(range.offset + range.count));
    return out;
  }
};

}  // namespace

TEST(StepProtocol, Gpt2BucketsTileTheGradientsInBackwardOrder) {
  const auto cfg = tiny();
  const auto buckets = tk::model::gpt2_gradient_buckets(cfg);
  ASSERT_EQ(buckets.size(), std::size_t(cfg.num_layers) + 2);
  EXPECT_EQ(buckets.front().name, "lnf");
  EXPECT_EQ(buckets[tk::model::gpt2_layer_bucket(cfg, cfg.num_layers - 1)].name, "layer 2");
  EXPECT_EQ(buckets[tk::model::gpt2_layer_bucket(cfg, 0)].name, "layer 0");
  EXPECT_EQ(buckets.back().name, "embeddings");
  EXPECT_NO_THROW(tk::model::check_buckets_tile(buckets, cfg.num_parameters(), "test"));
  std::size_t total = 0;
  for (const auto& b : buckets) total += b.numel();
  EXPECT_EQ(total, cfg.num_parameters());
  // A layer's bucket is one range in each of the 12 per-layer tensors.
  EXPECT_EQ(buckets[1].ranges.size(), 12u);

  auto broken = buckets;
  broken[1].ranges[3].count -= 1;
  EXPECT_THROW(tk::model::check_buckets_tile(broken, cfg.num_parameters(), "test"),
               tk::config_error);
}

TEST(StepProtocol, BucketsArePublishedOnceWhenFinalAndOnlyOnTheLastMicroStep) {
  tk::model::gpt2_cpu m(tiny(), 3);
  auto src = source();
  const tk::host_batch b1 = next_batch(src), b2 = next_batch(src);
  tk::host_context ctx;
  recorder rec{&m, {}, {}};
  m.zero_grad(ctx);
  tk::model::micro_step micro{0.5f, 0, 2, {&rec, &recorder::ready}};
  m.forward_backward(tk::view_of(b1), micro, ctx);
  EXPECT_TRUE(rec.order.empty()) << "gradients are not final before the last micro-step";
  micro.index = 1;
  m.forward_backward(tk::view_of(b2), micro, ctx);

  const std::size_t n = m.gradient_buckets().size();
  ASSERT_EQ(rec.order.size(), n);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(rec.order[i], i) << "publication order";
  // Final when published: the values seen then are the values after backward.
  for (std::size_t i = 0; i < n; ++i)
    EXPECT_EQ(rec.at_publication[i], rec.copy(i)) << m.gradient_buckets()[i].name;
  // And not published early: when the last layer was published, layer 0 was still unfinished.
  tk::model::gpt2_cpu fresh(tiny(), 3);
  recorder early{&fresh, {}, {}};
  struct probe {
    recorder* r;
    std::vector<float> layer0_when_top_published;
    static void ready(void* self, std::size_t i) {
      auto& p = *static_cast<probe*>(self);
      recorder::ready(p.r, i);
      if (i == 1)
        p.layer0_when_top_published = p.r->copy(p.r->model->gradient_buckets().size() - 2);
    }
  } pr{&early, {}};
  fresh.zero_grad(ctx);
  fresh.forward_backward(tk::view_of(b1), {1.0f, 0, 1, {&pr, &probe::ready}}, ctx);
  EXPECT_NE(pr.layer0_when_top_published, early.copy(fresh.gradient_buckets().size() - 2));
}

TEST(StepProtocol, StepLossIsTheMeanOfTheMicroStepLosses) {
  tk::model::gpt2_cpu a(tiny(), 4), b(tiny(), 4);
  auto src = source();
  const tk::host_batch b1 = next_batch(src), b2 = next_batch(src);
  tk::host_context ctx;
  a.zero_grad(ctx);
  a.forward_backward(tk::view_of(b1), {0.5f, 0, 2, {}}, ctx);
  a.forward_backward(tk::view_of(b2), {0.5f, 1, 2, {}}, ctx);
  b.zero_grad();
  const float l1 = b.forward_backward(tk::view_of(b1), 0.5f);
  const float l2 = b.forward_backward(tk::view_of(b2), 0.5f);
  EXPECT_EQ(a.step_loss(), (double(l1) + double(l2)) / 2);
  const auto ga = a.gradients(), gb = b.gradients();
  EXPECT_TRUE(std::equal(ga.begin(), ga.end(), gb.begin())) << "same gradients either way";
  // index 0 restarts the accumulation.
  a.forward_backward(tk::view_of(b1), {1.0f, 0, 1, {}}, ctx);
  EXPECT_EQ(a.step_loss(), double(l1));
}

TEST(StepProtocol, ClippingOverBucketsEqualsTheWholeBufferNormBitForBit) {
  // Long enough for several norm chunks, with bucket boundaries that do not fall on the grid.
  const std::size_t n = 5 * tk::optim::norm_chunk_elements + 77;
  std::vector<float> g(n);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : g) x = normal(rng);
  const std::vector<tk::model::gradient_bucket> buckets = {
      {"b", {{40000, 60000}, {n - 10, 10}}}, {"a", {{0, 40000}}}, {"c", {{100000, n - 100010}}}};
  tk::model::check_buckets_tile(buckets, n, "test");
  tk::optim::host_grad_clip clip;
  tk::host_context ctx;
  const auto scale = clip(std::span<const float>(g), buckets, 1.0, ctx);
  const double whole = tk::optim::global_norm(std::span<const float>(g));
  EXPECT_EQ(clip.norm(), whole);
  EXPECT_EQ(scale.factor, tk::optim::clip_factor(whole, 1.0));
  EXPECT_LT(scale.factor, 1.0);
  EXPECT_EQ(clip(std::span<const float>(g), buckets, 0.0, ctx).factor, 1.0) << "0 = off";
  // Part of the buffer: only the covered elements count.
  const std::vector<tk::model::gradient_bucket> part = {{"a", {{0, 40000}}}};
  clip(std::span<const float>(g), part, 1.0, ctx);
  EXPECT_EQ(clip.norm(), tk::optim::global_norm(std::span<const float>(g.data(), 40000)));
}

namespace {

struct reducer_log {
  int attached = 0, finished = 0;
  std::vector<std::size_t> buckets;
  std::vector<int> finished_after;  // buckets seen when finish() was called
};

/// A reducer that records how the trainer drives the seam (one process: single's clipping step).
struct recording_reducer : tk::reduce::single {
  explicit recording_reducer(reducer_log* l) : log(l) {}
  reducer_log* log;
  template <class M, class Context>
  void attach(M& m, Context& ctx) {
    single::attach(m, ctx);
    ++log->attached;
  }
  void bucket_ready(std::size_t i) { log->buckets.push_back(i); }
  void finish() {
    ++log->finished;
    log->finished_after.push_back(int(log->buckets.size()));
  }
};

}  // namespace

TEST(StepProtocol, TrainerDrivesTheReducerSeamOncePerBucketPerStep) {
  static_assert(tk::reduce::gradient_reducer_for<tk::reduce::single, tk::model::gpt2_cpu>);
  static_assert(tk::reduce::gradient_reducer_for<recording_reducer, tk::model::gpt2_cpu>);
  tk::trainer_config cfg;
  cfg.steps = 3;
  cfg.output.console.quiet = true;
  cfg.total_batch_tokens = 3 * 2 * 8;  // three micro-steps
  reducer_log log;
  tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
              tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint, recording_reducer>
      t(cfg, source(), std::nullopt, tk::model::gpt2_cpu(tiny(), 1), tk::optim::adamw_config{},
        tk::checkpoint::no_checkpoint{}, recording_reducer{&log});
  t.run();
  const std::size_t per_step = t.model().gradient_buckets().size();
  EXPECT_EQ(log.attached, 1);
  EXPECT_EQ(log.finished, 3);
  ASSERT_EQ(log.buckets.size(), 3 * per_step) << "published on the last micro-step only";
  for (std::size_t i = 0; i < log.buckets.size(); ++i) EXPECT_EQ(log.buckets[i], i % per_step);
  for (int s = 0; s < 3; ++s)
    EXPECT_EQ(log.finished_after[std::size_t(s)], int((s + 1) * per_step));
}

TEST(StepProtocol, TrainerEqualsTheOneCallPerMicroBatchLoopBitForBit) {
  // The loop the trainer ran before the protocol: zero_grad, forward_backward(batch, 1/accum)
  // per micro-batch, then the clipping step and adamw's update (clip_then_update).
  constexpr int steps = 4, accum = 2;
  tk::trainer_config cfg;
  cfg.steps = steps;
  cfg.output.console.quiet = true;
  cfg.total_batch_tokens = accum * 2 * 8;
  cfg.schedule.kind = tk::optim::schedule_kind::constant;
  cfg.schedule.max_lr = 3e-3f;
  cfg.grad_clip = 0.5f;  // small: clipping acts on every step
  const tk::optim::adamw_config ac{};
  tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
              tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint>
      t(cfg, source(), std::nullopt, tk::model::gpt2_cpu(tiny(), 7), ac,
        tk::checkpoint::no_checkpoint{});
  const auto r = t.run();

  tk::model::gpt2_cpu m(tiny(), 7);
  tk::optim::adamw_cpu opt(m, ac);
  tk::optim::clip_then_update<tk::host_memory> clipped_update(0.5);
  auto src = source();
  for (int s = 0; s < steps; ++s) {
    m.zero_grad();
    double loss = 0;
    for (int k = 0; k < accum; ++k) {
      const tk::host_batch b = next_batch(src);
      loss += m.forward_backward(tk::view_of(b), 1.0f / float(accum));
    }
    const float norm = clipped_update(opt, m, 3e-3f);
    EXPECT_EQ(r.steps[std::size_t(s)].loss, loss / accum) << "step " << s + 1;
    EXPECT_EQ(float(r.steps[std::size_t(s)].grad_norm), norm) << "step " << s + 1;
    EXPECT_GT(norm, 0.5f) << "clipping must be active for the comparison to mean something";
  }
  const auto pa = t.model().parameters(), pb = m.parameters();
  EXPECT_TRUE(std::equal(pa.begin(), pa.end(), pb.begin())) << "parameters after the run";
}
