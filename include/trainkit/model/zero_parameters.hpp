// trainkit/model/zero_parameters.hpp — the constructor tag for a model whose parameters start at
// zero (no random draws), e.g. before they are loaded from a file.
//
// Its own header so that code which builds a model from a file (gpt2/llmc_file.hpp) can name the
// tag without including the model's definition (gpt2/cpu.hpp brings Eigen).
#pragma once

namespace trainkit::model {

/// Constructor tag: all parameters zero, no random draws (e.g. before loading a model file).
struct zero_parameters_t {
  explicit zero_parameters_t() = default;
};
inline constexpr zero_parameters_t zero_parameters{};

}  // namespace trainkit::model
