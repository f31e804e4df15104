// Tests for --calibrate: the Eigen sgemm measurement, the model hook, and the trainer carrying
// the measured rate into every step's metrics and the report.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include <trainkit/trainer/calibrate.hpp>
#include <trainkit/trainkit.hpp>

namespace tk = trainkit;

TEST(Calibrate, CpuSgemmMeasuresAPlausibleRate) {
  const auto c = tk::calibrate_cpu_sgemm(128, 3);
  EXPECT_EQ(c.n, 128);
  EXPECT_GT(c.best_ms, 0);
  EXPECT_NEAR(c.tflops, 2.0 * 128 * 128 * 128 / (c.best_ms / 1e3) / 1e12, 1e-12);
  // Between 10 MFLOP/s and 100 TFLOP/s: catches unit slips (ms vs s, TFLOP vs GFLOP), not speed.
  EXPECT_GT(c.tflops, 1e-5);
  EXPECT_LT(c.tflops, 100);
  EXPECT_THROW(tk::calibrate_cpu_sgemm(0, 1), tk::config_error);
  // It times the library the models' products use (core/linalg/gemm_cpu.hpp's settings).
  const bool onednn =
      tk::linalg::current_gemm_settings().library == tk::linalg::gemm_library::onednn;
  EXPECT_EQ(c.what.rfind(onednn ? "oneDNN sgemm 128^3 (f32" : "Eigen sgemm 128^3 (f32", 0), 0u)
      << c.what;
  {
    const tk::linalg::scoped_gemm_settings eigen({.library = tk::linalg::gemm_library::eigen});
    EXPECT_EQ(tk::calibrate_cpu_sgemm(64, 1).what.rfind("Eigen sgemm 64^3", 0), 0u);
  }
}

namespace {
struct model_with_calibration {
  double calibrate_tflops() { return 123.0; }
};
struct model_with_full_record {
  double calibrate_tflops() { return 1.0; }  // the richer hook wins
  tk::gemm_calibration calibrate_gemm() { return {.tflops = 7.0, .what = "test gemm"}; }
};
struct model_without_calibration {};
}  // namespace

TEST(Calibrate, ModelHooks) {
  model_with_calibration m;
  EXPECT_DOUBLE_EQ(tk::calibrate_for(m).tflops, 123.0);
  model_with_full_record f;
  EXPECT_EQ(tk::calibrate_for(f).what, "test gemm");
  model_without_calibration none;
  EXPECT_EQ(tk::calibrate_for(none).tflops, 0.0);
  static_assert(tk::calibratable_model<tk::model::gpt2_cpu>);
  static_assert(!tk::calibratable_model<model_without_calibration>);
}

TEST(Calibrate, TrainerReportsMfuAgainstTheMeasuredRate) {
  tk::trainer_config cfg;
  cfg.steps = 4;
  cfg.mfu.calibrate = true;
  std::ostringstream out;
  tk::trainer<tk::data::synthetic_source, tk::prefetch::synchronous, tk::model::gpt2_cpu,
              tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint>
      t(cfg,
        tk::data::synthetic_source({.batch_size = 2,
                                    .seq_len = 8,
                                    .vocab_size = 100,
                                    .alphabet = 16,
                                    .branching = 2,
                                    .seed = 3}),
        std::nullopt,
        tk::model::gpt2_cpu({.max_seq_len = 8,
                             .vocab_size = 100,
                             .padded_vocab_size = 128,
                             .num_layers = 1,
                             .num_heads = 2,
                             .channels = 16},
                            1),
        tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{}, out);
  const auto r = t.run();
  ASSERT_GT(r.calibration.tflops, 0);
  const bool onednn =
      tk::linalg::current_gemm_settings().library == tk::linalg::gemm_library::onednn;
  EXPECT_NE(
      out.str().find(onednn ? "calibrate: oneDNN sgemm 1024^3" : "calibrate: Eigen sgemm 1024^3"),
      std::string::npos)
      << out.str();
  for (const auto& m : r.steps)
    EXPECT_NEAR(m.mfu_calibrated, m.tflops / r.calibration.tflops, 1e-12) << m.step;
  EXPECT_NEAR(r.summary.calibrated_tflops, r.calibration.tflops, 1e-9);
  EXPECT_NE(tk::format_summary(r.summary).find("of the measured GEMM rate"), std::string::npos);
  // Calibration happens before step 1, so it is not billed to the first step's phases.
  EXPECT_NEAR(r.steps.front().phases_ms() + r.steps.front().other_ms, r.steps.front().dt_ms,
              0.02 * r.steps.front().dt_ms);
}
