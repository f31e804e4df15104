// train_cuda_host.cpp — the g++ half of gpt_fineweb's CUDA training: llm.c model files in and out
// (llmc_file.hpp includes Eigen, which stays out of train_cuda.cu).
#include <trainkit/model/llmc_file.hpp>

#include "train_cuda.hpp"

namespace gpt_fineweb {

llmc_weights read_llmc_weights(const std::string& path) {
  llmc_weights w;
  w.config = trainkit::model::read_llmc_header(path);
  w.params.resize(w.config.num_parameters());
  trainkit::model::read_llmc_parameters<float>(path, w.config, std::span<float>(w.params));
  return w;
}

void write_llmc_weights(const std::string& path, const trainkit::model::gpt2_config& config,
                        std::span<const float> params) {
  trainkit::model::write_llmc_parameters<float>(path, config, params);
}

}  // namespace gpt_fineweb
