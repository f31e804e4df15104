// trainkit/core/device_info.hpp — the dense peak FLOP/s table behind honest MFU, in one place.
//
// MFU is achieved FLOP/s over the peak of the device that ran, for the dtype the matmuls use.
// A constant for all devices is how an H200 run printed "MFU 150%" (an A100's 312 TFLOP/s used as
// the peak for a 989 TFLOP/s part). The trainer (trainer/throughput.hpp), the CUDA device query
// (core/cuda/device.hpp) and `gpt_fineweb report` (report/run_analysis.hpp) all read this table,
// and nothing else holds a peak. Figures are the vendors' dense (no 2:4 sparsity) tensor-core
// peaks from the product datasheets: bf16 (fp16 for the V100, which has no bf16; fp16 with fp32
// accumulate for GeForce cards, which run it at half the fp16-accumulate rate); f32 is the
// non-tensor-core rate. A CPU has no datasheet row: "cpu" is whatever CPU runs, so its peak is
// worked out on it (cpu_peak below): cores × the FLOP per cycle its vector units can retire for
// the dtype (from CPUID: AVX2/AVX-512 width, AVX512_BF16, AMX-BF16, AMD Zen 4's half-width
// datapath) × the core clock measured on it. `mfu_settings.peak_tflops` (trainer/config.hpp)
// still overrides it.
//
// Names are matched forgivingly, as people and tools write them: case and separators do not
// matter ("h100", "H100-SXM5-80GB", "NVIDIA H100 80GB HBM3" as nvidia-smi prints it, "Tesla
// V100-SXM2-32GB", "AMD Instinct MI300X", "rtx4090"); a model number matches a whole word, so
// "L4" is not an "L40S"; a variant ("PCIe", "NVL") picks its own row before the model's default.
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainkit/core/cpu_features.hpp"

#if defined(__linux__)
#include <sched.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

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
    {"cpu", 0.0, 0.0, "CPU"},  // the running CPU's, worked out on it: cpu_peak, this_cpu_peak()
}};

/// A CPU's dense peak, worked out from what it is rather than looked up: `cores` × FLOP per cycle
/// per core × `ghz`.
struct cpu_peak {
  int cores = 0;                 // physical cores the run uses
  double ghz = 0;                // measured core clock (measure_core_ghz)
  int f32_flops_per_cycle = 0;   // per core: FMA units × fp32 lanes × 2
  int bf16_flops_per_cycle = 0;  // per core: AMX tiles, VDPBF16PS, or the fp32 rate without them
  double f32_tflops = 0, bf16_tflops = 0;
  std::string basis;  // "2 cores x 64 f32 FLOP/cycle (AVX-512, 2 FMA units) x 4.5 GHz"

  double tflops(compute_dtype dt) const {
    return dt == compute_dtype::bf16 ? bf16_tflops : f32_tflops;
  }
};

/// The peak of `cores` cores of a CPU with `f` at `ghz`. Per core and cycle: AVX-512, two 512-bit
/// FMA units (Intel's server cores, AMD Zen 5) 64 fp32 FLOP; AMD Zen 4 (family 0x19) runs AVX-512
/// on 256-bit units, 32; AVX2 with FMA, two 256-bit units, 32; AVX 16; SSE 8. bf16: AMX-BF16
/// 1024 (one TDPBF16PS, 16·16·32 multiply-adds, per 16 cycles), AVX512_BF16 twice the fp32 rate
/// (VDPBF16PS: two products per fp32 lane), otherwise the fp32 rate (emulated bf16 is no faster).
/// Where a part has fewer FMA units than its family (some Xeon Silver/Bronze, client cores), the
/// figure is an upper bound: MFU reads low, never above 100%.
inline cpu_peak estimate_cpu_peak(const cpu_features& f, int cores, double ghz) {
  cpu_peak p;
  p.cores = cores;
  p.ghz = ghz;
  const bool zen4 = f.vendor == "AuthenticAMD" && f.family == 0x19;
  std::string unit;
  if (f.avx512f && !zen4) {
    p.f32_flops_per_cycle = 64;
    unit = "AVX-512, 2 FMA units";
  } else if (f.avx512f) {
    p.f32_flops_per_cycle = 32;
    unit = "AVX-512 on Zen 4's 256-bit units";
  } else if (f.avx2 && f.fma) {
    p.f32_flops_per_cycle = 32;
    unit = "AVX2, 2 FMA units";
  } else if (f.avx2) {
    p.f32_flops_per_cycle = 16;
    unit = "AVX";
  } else {
    p.f32_flops_per_cycle = 8;
    unit = "SSE";
  }
  std::string bf16_unit;
  if (f.amx_bf16) {
    p.bf16_flops_per_cycle = 1024;
    bf16_unit = "AMX-BF16";
  } else if (f.avx512_bf16) {
    p.bf16_flops_per_cycle = 2 * p.f32_flops_per_cycle;
    bf16_unit = "AVX512_BF16";
  } else {
    p.bf16_flops_per_cycle = p.f32_flops_per_cycle;
    bf16_unit = "no bf16 instructions";
  }
  const double hz = cores > 0 && ghz > 0 ? double(cores) * ghz * 1e9 : 0.0;
  p.f32_tflops = hz * p.f32_flops_per_cycle / 1e12;
  p.bf16_tflops = hz * p.bf16_flops_per_cycle / 1e12;
  char text[256];
  std::snprintf(text, sizeof text,
                "%d core%s x %d f32 / %d bf16 FLOP/cycle (%s; %s) x %.2f GHz (measured)", cores,
                cores == 1 ? "" : "s", p.f32_flops_per_cycle, p.bf16_flops_per_cycle, unit.c_str(),
                bf16_unit.c_str(), ghz);
  p.basis = text;
  return p;
}

namespace detail {

/// Physical cores among the CPUs this process may run on (Linux: its affinity mask, hyperthread
/// siblings counted once by their package and core ids); 1 where that cannot be told.
inline int physical_cores_available() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  std::set<std::pair<std::string, std::string>> cores;
  int logical = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    ++logical;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream package(dir + "physical_package_id"), core(dir + "core_id");
    std::string p, c;
    if (!(package >> p) || !(core >> c)) return logical > 0 ? CPU_COUNT(&set) : 1;
    cores.emplace(p, c);
  }
  return std::max(1, int(cores.size()));
#else
  return 1;
#endif
}

}  // namespace detail

/// The peak of the CPU this process runs on, over the cores it uses: the physical cores it may
/// run on, at most the OpenMP team (a run with --threads 2 on a 64-core machine uses 2). The
/// clock is measured once per process (~30 ms); the rest is asked at each call.
inline cpu_peak this_cpu_peak() {
  static const double ghz = measure_core_ghz();
  int cores = detail::physical_cores_available();
#if defined(_OPENMP)
  cores = std::min(cores, omp_get_max_threads());
#endif
  return estimate_cpu_peak(this_cpu(), cores, ghz);
}

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

/// The dense peak in TFLOP/s for a device name, or nullopt when the name is not in the table (or
/// names the CPU, and its clock could not be measured). "cpu" is the CPU this process runs on
/// (this_cpu_peak()).
inline std::optional<double> peak_tflops(std::string_view device_name, compute_dtype dt) {
  const device_peak* e = find_device_peak(device_name);
  if (!e) return std::nullopt;
  if (e->match == "cpu") {
    const double p = this_cpu_peak().tflops(dt);
    return p > 0 ? std::optional<double>(p) : std::nullopt;
  }
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
