// Tests for trainkit/optim/schedule.hpp: warmup values, cosine end points and midpoint, the three
// WSD phases, monotonicity, parsing and validation. Expected values are computed here from the
// schedule formulas, not taken from the implementation.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <type_traits>

#include "trainkit/optim/schedule.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;

static_assert(std::is_aggregate_v<to::lr_schedule>);

TEST(Schedule, ParseKnownKindsAndNameTheBadOne) {
  EXPECT_EQ(to::parse_schedule_kind("constant"), to::schedule_kind::constant);
  EXPECT_EQ(to::parse_schedule_kind("cosine"), to::schedule_kind::cosine);
  EXPECT_EQ(to::parse_schedule_kind("wsd"), to::schedule_kind::wsd);
  try {
    to::parse_schedule_kind("linear");
    ADD_FAILURE() << "'linear' was accepted";
  } catch (const tk::config_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'linear'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("constant, cosine, wsd"), std::string::npos) << msg;
  }
  EXPECT_THROW(to::parse_schedule_kind("Cosine"), tk::config_error);
}

TEST(Schedule, LinearWarmupIsOneBasedLikeLlmc) {
  for (auto kind :
       {to::schedule_kind::constant, to::schedule_kind::cosine, to::schedule_kind::wsd}) {
    const to::lr_schedule s{.kind = kind, .max_lr = 1e-3f, .warmup_steps = 4, .total_steps = 100};
    EXPECT_FLOAT_EQ(s.at(0), 0.25e-3f);
    EXPECT_FLOAT_EQ(s.at(1), 0.50e-3f);
    EXPECT_FLOAT_EQ(s.at(2), 0.75e-3f);
    EXPECT_FLOAT_EQ(s.at(3), 1.00e-3f);
    EXPECT_FLOAT_EQ(s.at(4), 1.00e-3f) << "first step after warmup is at the peak";
  }
}

TEST(Schedule, ConstantHoldsThePeak) {
  const to::lr_schedule s{.kind = to::schedule_kind::constant, .max_lr = 3e-4f, .total_steps = 50};
  for (int step : {0, 1, 25, 49, 50, 1000}) EXPECT_EQ(s.at(step), 3e-4f) << step;
}

TEST(Schedule, CosineEndPointsAndMidpoint) {
  const float peak = 6e-4f;
  const float frac = 0.1f;
  const to::lr_schedule s{.kind = to::schedule_kind::cosine,
                          .max_lr = peak,
                          .warmup_steps = 10,
                          .total_steps = 110,
                          .final_lr_frac = frac};
  const double floor = double(peak) * frac;
  EXPECT_FLOAT_EQ(s.at(10), peak);
  EXPECT_FLOAT_EQ(s.at(60), float((peak + floor) / 2)) << "halfway through the decay";
  EXPECT_FLOAT_EQ(s.at(110), float(floor));
  EXPECT_FLOAT_EQ(s.at(5000), float(floor)) << "past the plan stays at the floor";
  // A quarter of the way: floor + (peak - floor)·(1 + cos(π/4))/2.
  const double quarter = floor + (peak - floor) * 0.5 * (1 + std::cos(std::numbers::pi / 4));
  EXPECT_FLOAT_EQ(s.at(35), float(quarter));
  for (int step = 10; step < 120; ++step) EXPECT_LE(s.at(step + 1), s.at(step)) << step;
  for (int step = 0; step < 9; ++step) EXPECT_LT(s.at(step), s.at(step + 1)) << step;
}

TEST(Schedule, CosineWithoutWarmupStartsAtPeakAndReachesZero) {
  const to::lr_schedule s{.max_lr = 1.0f, .total_steps = 8};
  EXPECT_EQ(s.kind, to::schedule_kind::cosine);
  EXPECT_FLOAT_EQ(s.at(0), 1.0f);
  EXPECT_FLOAT_EQ(s.at(4), 0.5f);
  EXPECT_NEAR(s.at(8), 0.0f, 1e-7f);
}

TEST(Schedule, WsdWarmupStableThenLinearDecay) {
  const float peak = 1e-3f;
  const to::lr_schedule s{.kind = to::schedule_kind::wsd,
                          .max_lr = peak,
                          .warmup_steps = 10,
                          .total_steps = 100,
                          .final_lr_frac = 0.0f,
                          .decay_frac = 0.2f};
  EXPECT_EQ(s.decay_start(), 80);
  EXPECT_LT(s.at(5), peak);
  for (int step = 10; step < 80; ++step) EXPECT_EQ(s.at(step), peak) << "stable phase " << step;
  // Decay: linear from the peak at step 80 to 0 at step 100.
  for (int step = 80; step <= 100; ++step) {
    const double expected = peak * (1.0 - (step - 80) / 20.0);
    EXPECT_NEAR(s.at(step), expected, 1e-9) << step;
  }
  for (int step = 80; step < 100; ++step) EXPECT_LT(s.at(step + 1), s.at(step)) << step;
}

TEST(Schedule, WsdDecaysToTheFinalFraction) {
  const to::lr_schedule s{.kind = to::schedule_kind::wsd,
                          .max_lr = 2.0f,
                          .total_steps = 40,
                          .final_lr_frac = 0.25f,
                          .decay_frac = 0.5f};
  EXPECT_EQ(s.at(19), 2.0f);
  EXPECT_FLOAT_EQ(s.at(30), 1.25f);  // halfway between 2 and 0.5
  EXPECT_FLOAT_EQ(s.at(40), 0.5f);
}

TEST(Schedule, WsdDecayNeverStartsInsideWarmup) {
  const to::lr_schedule s{.kind = to::schedule_kind::wsd,
                          .max_lr = 1.0f,
                          .warmup_steps = 9,
                          .total_steps = 10,
                          .decay_frac = 0.5f};
  EXPECT_EQ(s.decay_start(), 9);
  for (int step = 0; step < 9; ++step) EXPECT_FLOAT_EQ(s.at(step), (step + 1) / 9.0f);
}

TEST(Schedule, WarmupLongerThanTheRunKeepsWarmingUp) {
  for (auto kind :
       {to::schedule_kind::constant, to::schedule_kind::cosine, to::schedule_kind::wsd}) {
    const to::lr_schedule s{.kind = kind, .max_lr = 1.0f, .warmup_steps = 10, .total_steps = 5};
    EXPECT_NO_THROW(s.validate());
    for (int step = 0; step < 5; ++step) EXPECT_FLOAT_EQ(s.at(step), (step + 1) / 10.0f) << step;
  }
}

TEST(Schedule, ValidateNamesTheBadField) {
  struct bad_case {
    to::lr_schedule s;
    std::string field;
  };
  const bad_case cases[] = {
      {{.max_lr = -1.0f}, "max_lr"},
      {{.max_lr = NAN}, "max_lr"},
      {{.total_steps = 0}, "total_steps"},
      {{.warmup_steps = -1, .total_steps = 10}, "warmup_steps"},
      {{.final_lr_frac = 1.5f}, "final_lr_frac must be in [0,1]: 1.5"},
      {{.decay_frac = -0.1f}, "decay_frac"},
  };
  for (const auto& c : cases) {
    try {
      c.s.validate();
      ADD_FAILURE() << "accepted a schedule with a bad " << c.field;
    } catch (const tk::config_error& e) {
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(to::lr_schedule{}.validate());
}
