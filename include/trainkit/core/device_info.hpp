// trainkit/core/device_info.hpp — the dense peak FLOP/s table behind honest MFU, in one place.
//
// MFU is achieved FLOP/s over the peak of the device that ran, for the dtype the matmuls use.
// A constant for all devices is how an H200 run printed "MFU 150%" (an A100's 312 TFLOP/s used as
// the peak for a 989 TFLOP/s part). The trainer (trainer/throughput.hpp), the CUDA device query
// (core/cuda/device.hpp) and `gpt_fineweb report` (report/run_analysis.hpp) all read this table,
// and nothing else holds a peak. Figures are the vendors' dense (no 2:4 sparsity) tensor-core
// peaks from the product datasheets: bf16 (fp16 for the V100, which has no bf16; fp16 with fp32
// accumulate for GeForce cards, which run it at half the fp16-accumulate rate); f32 is the
// non-tensor-core rate. The CPU figure is a nominal placeholder that `mfu_settings.peak_tflops`
// (trainer/config.hpp) or calibration should replace.
//
// Names are matched forgivingly, as people and tools write them: case and separators do not
// matter ("h100", "H100-SXM5-80GB", "NVIDIA H100 80GB HBM3" as nvidia-smi prints it, "Tesla
// V100-SXM2-32GB", "AMD Instinct MI300X", "rtx4090"); a model number matches a whole word, so
// "L4" is not an "L40S"; a variant ("PCIe", "NVL") picks its own row before the model's default.
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainkit {

enum class compute_dtype { f32, bf16 };

struct device_peak {
  std::string_view match;   // model word and optional variant: "h100 pcie", "a100", "rtx 4090"
  double bf16_tflops;       // dense tensor-core bf16
  double f32_tflops;        // dense fp32 (non tensor-core)
  std::string_view name{};  // how reports name it: "H100 PCIe"
};

// Order matters: a variant ("h100 pcie") before its model's default row ("h100").
inline constexpr std::array<device_peak, 33> device_peak_table{{
    {"h100 pcie", 756.0, 51.0, "H100 PCIe"},
    {"h100 nvl", 835.0, 60.0, "H100 NVL"},
    {"h100", 989.0, 67.0, "H100 SXM"},  // "H100 80GB HBM3" is the SXM part
    {"h800 pcie", 756.0, 51.0, "H800 PCIe"},
    {"h800", 989.0, 67.0, "H800 SXM"},
    {"h200 nvl", 835.0, 60.0, "H200 NVL"},
    {"h200", 989.0, 67.0, "H200"},
    {"h20", 148.0, 44.0, "H20"},
    {"gh200", 989.0, 67.0, "GH200"},
    {"gb200", 2500.0, 80.0, "GB200"},  // per GPU
    {"b200", 2250.0, 80.0, "B200"},
    {"b100", 1750.0, 60.0, "B100"},
    {"a100", 312.0, 19.5, "A100"},  // SXM and PCIe share the figure
    {"a800", 312.0, 19.5, "A800"},
    {"a10g", 70.0, 31.2, "A10G"},
    {"a10", 125.0, 31.2, "A10"},
    {"a6000", 154.8, 38.7, "RTX A6000"},
    {"l40s", 362.0, 91.6, "L40S"},
    {"l40", 181.0, 90.5, "L40"},
    {"l4", 121.0, 30.3, "L4"},
    {"rtx 3090", 71.0, 35.6, "RTX 3090"},
    {"rtx 4090", 165.2, 82.6, "RTX 4090"},
    // The 5090's dense fp16/bf16 figure: llm.c measured 171 TFLOP/s of model FLOPs on one
    // (sm120, d12), which rules out a half-rate 209.5 for fp32 accumulation.
    {"rtx 5090", 419.0, 104.8, "RTX 5090"},
    {"v100s", 130.0, 16.4, "V100S"},
    {"v100 pcie", 112.0, 14.0, "V100 PCIe"},
    {"v100", 125.0, 15.7, "V100"},  // fp16 tensor cores; the V100 has no bf16
    {"t4", 65.0, 8.1, "T4"},        // fp16
    {"mi250x", 383.0, 47.9, "MI250X"},
    {"mi250", 362.1, 45.3, "MI250"},
    {"mi300x", 1307.4, 163.4, "MI300X"},
    {"mi325x", 1307.4, 163.4, "MI325X"},
    {"mi300a", 980.6, 122.6, "MI300A"},
    {"cpu", 0.2, 0.2, "CPU"},  // ~200 GFLOP/s sgemm on a 2-core AVX2 machine (see bench/)
}};

namespace detail {

/// Lower-case words of a device name (letters and digits; every other character separates).
inline std::vector<std::string> device_words(std::string_view s) {
  std::vector<std::string> out;
  std::string word;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += char(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      out.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

/// Whether the words of a name hold `model` as a word: equal, or a word that starts with it
/// and goes on with a letter ("h100sxm5"), or ends with it after a letter ("rtx4090"); never a
/// longer model number ("l40s" is not "l4", "a1000" not "a100").
inline bool has_model_word(const std::vector<std::string>& words, std::string_view model) {
  const bool ends_digit = !model.empty() && std::isdigit(static_cast<unsigned char>(model.back()));
  for (const auto& w : words) {
    if (w == model) return true;
    if (w.size() > model.size() && w.starts_with(model) &&
        (!ends_digit || !std::isdigit(static_cast<unsigned char>(w[model.size()]))) &&
        std::isalpha(static_cast<unsigned char>(w[model.size()])))
      return true;
    if (w.size() > model.size() && w.ends_with(model) &&
        std::isalpha(static_cast<unsigned char>(w[w.size() - model.size() - 1])) &&
        std::isdigit(static_cast<unsigned char>(model.front())))
      return true;
  }
  return false;
}

/// Whether `words` name the table row `match` ("rtx 4090": the family word may be missing or
/// joined; "h100 pcie": the model word and the variant, the variant as a prefix: "sxm5").
inline bool names_row(const std::vector<std::string>& words, std::string_view match) {
  const auto row = device_words(match);
  if (row.empty()) return false;
  if (row.size() == 2 && row[0] == "rtx") return has_model_word(words, row[1]);
  if (!has_model_word(words, row[0])) return false;
  for (std::size_t i = 1; i < row.size(); ++i) {
    bool found = false;
    for (const auto& w : words) found = found || w.starts_with(row[i]);
    for (std::size_t k = 0; !found && k < words.size(); ++k)  // joined: "h100pcie"
      found = words[k].starts_with(row[0]) && words[k].ends_with(row[i]);
    if (!found) return false;
  }
  return true;
}

}  // namespace detail

/// The table row a device name matches, or nullptr when none does.
inline const device_peak* find_device_peak(std::string_view device_name) {
  const auto words = detail::device_words(device_name);
  for (const auto& e : device_peak_table)
    if (detail::names_row(words, e.match)) return &e;
  return nullptr;
}

/// The dense peak in TFLOP/s for a device name, or nullopt when the name is not in the table.
inline std::optional<double> peak_tflops(std::string_view device_name, compute_dtype dt) {
  const device_peak* e = find_device_peak(device_name);
  if (!e) return std::nullopt;
  return dt == compute_dtype::bf16 ? e->bf16_tflops : e->f32_tflops;
}

/// The devices the table knows, for messages: "H100 PCIe, H100 NVL, H100 SXM, ...".
inline std::string known_devices() {
  std::string out;
  for (const auto& e : device_peak_table)
    if (e.match != "cpu") out += (out.empty() ? "" : ", ") + std::string(e.name);
  return out;
}

}  // namespace trainkit
