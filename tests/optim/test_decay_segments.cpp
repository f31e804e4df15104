// Tests for include/trainkit/optim/decay_segments.hpp and core/tensor_role.hpp: the ranges an
// optimizer decays cover the buffer exactly, follow the roles in the config (llm.c's rule by
// default on GPT-2), and a layout that leaves the buffer or overlaps itself is refused by name.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "trainkit/core/tensor.hpp"
#include "trainkit/core/tensor_role.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/optim/adamw_config.hpp"
#include "trainkit/optim/decay_segments.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;

namespace {

// The decayed element ranges of a GPT-2 layout, by tensor name.
std::vector<std::string> decayed_tensors(const tk::model::gpt2_config& cfg,
                                         tk::tensor_role_set roles) {
  const auto layout = tk::model::gpt2_parameter_layout(cfg);
  const auto segs = to::decay_segments(layout, cfg.num_parameters(), roles, "test");
  std::vector<std::string> out;
  for (const auto& s : segs) {
    if (!s.decay) continue;
    for (const auto& t : layout)
      if (t.offset == s.begin && t.offset + t.numel() == s.end) out.push_back(t.name);
  }
  return out;
}

}  // namespace

TEST(DecaySegments, DefaultRolesDecayGpt2MatricesAndBothEmbeddingsAsLlmc) {
  const tk::model::gpt2_config cfg = tk::model::gpt2_config::preset("d2");
  // llm.c decays every 2-D tensor: wte, wpe and the four matrices, never biases or LayerNorms.
  const std::vector<std::string> expected{"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"};
  EXPECT_EQ(decayed_tensors(cfg, to::adamw_config{}.decay_roles), expected);
  EXPECT_EQ(decayed_tensors(cfg, {tk::tensor_role::norm}),
            (std::vector<std::string>{"ln1w", "ln1b", "ln2w", "ln2b", "lnfw", "lnfb"}));
  EXPECT_TRUE(decayed_tensors(cfg, {}).empty());
}

TEST(DecaySegments, CoverTheBufferInOrderWithGapsUndecayed) {
  // Given out of order, with a gap before "b" and padding after it.
  const std::vector<tk::tensor_info> layout{{"b", {4}, 10, tk::tensor_role::bias},
                                            {"w", {2, 3}, 0, tk::tensor_role::matrix},
                                            {"e", {2}, 6, tk::tensor_role::embedding}};
  const auto segs =
      to::decay_segments(layout, 20, {tk::tensor_role::matrix, tk::tensor_role::bias}, "t");
  const std::vector<to::decay_segment> expected{
      {0, 6, true}, {6, 8, false}, {8, 10, false}, {10, 14, true}, {14, 20, false}};
  EXPECT_EQ(segs, expected);
}

TEST(DecaySegments, RefusesTensorsOutsideTheBufferOrOverlapping) {
  const std::vector<tk::tensor_info> outside{{"big", {30}, 0, tk::tensor_role::matrix}};
  try {
    to::decay_segments(outside, 20, {}, "my_optim");
    ADD_FAILURE() << "a tensor past the end was accepted";
  } catch (const tk::config_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("my_optim: tensor 'big'"), std::string::npos) << what;
  }
  const std::vector<tk::tensor_info> overlap{{"a", {10}, 0, tk::tensor_role::norm},
                                             {"b", {10}, 5, tk::tensor_role::norm}};
  EXPECT_THROW(to::decay_segments(overlap, 20, {}, "t"), tk::config_error);
}

TEST(TensorRoleSet, ContainsWhatItWasGivenAndPrintsInRoleOrder) {
  const tk::tensor_role_set s{tk::tensor_role::norm, tk::tensor_role::embedding};
  EXPECT_TRUE(s.contains(tk::tensor_role::norm));
  EXPECT_TRUE(s.contains(tk::tensor_role::embedding));
  EXPECT_FALSE(s.contains(tk::tensor_role::matrix));
  EXPECT_FALSE(s.contains(tk::tensor_role::bias));
  EXPECT_EQ(s.to_string(), "embedding,norm");
  EXPECT_EQ(tk::tensor_role_set{}.to_string(), "none");
  EXPECT_NE(s, tk::tensor_role_set{tk::tensor_role::norm});
}
