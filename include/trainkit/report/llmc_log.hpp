// trainkit/report/llmc_log.hpp — reads the console log of llm.c's train_gpt2.cu into a run_log.
//
// The lines, as karpathy/llm.c train_gpt2.cu (commit f1e2ace) prints them:
//   line 1872  printf0("step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms
//                       | %.1f%% bf16 MFU | %.0f tok/s\n", ...)
//              (before commit 569f9f1: "step %4d/%d | train loss %7.6f | norm %6.4f | lr %.2e |
//              %.2f ms | %.1f%% bf16 MFU | %.0f tok/s"; both are read)
//   line 1728  printf0("val loss %f\n", val_loss);
//   line 1318  printf0("Writing checkpoint at step %d\n", step);
//   lines 1524-1639  the "| key | value |" table: device, peak TFlops, sequence length T, total
//              batch size, max_sequence_length T, num_layers L, num_heads NH, channels C,
//              num_parameters, num_processes.
// What the numbers mean: the printed step is the count of steps done; its ms are CUDA-event
// times of the training section alone (cudaEventRecord, lines 1827-1854), so the evaluation and
// checkpoint save printed before the next step line are in no step's time; the MFU
// (gpt2_estimate_mfu, line 1126) counts 6·N + 6·L·C·T FLOPs per token with N every parameter
// (position embedding included, attention halved for causality) against llmc/mfu.h's peak for the
// device name, and prints -100.0% for a device that table lacks. tok/s is an exponential moving
// average over all processes; the MFU is one process's tokens against one device's peak, so
// per device.
// Other generations, read too: train_gpt2.cu of April-May 2024 printed, in turn,
//   fdd6608 (2024-04-18)  printf("step %d/%d: train loss %f (%f ms)\n", ...)
//   e55ed0a (2024-04-21)  printf("step %4d/%d: train loss %f (%f ms, %d tok/s)\n", ...)
//   d49e830 (2024-04-22)  printf("step %4d/%d: train loss %f (acc %f) (%f ms, %d tok/s)\n", ...)
//   bc58cd1 (2024-05-19)  printf0("step %4d/%d: train loss %f norm %.4f (%.2f ms, %.0f tok/s)\n")
//   661975c (2024-05-23)  printf0("step %4d/%d: train loss %f norm %.4f lr %.2e (%.2f ms, %.0f
//                         tok/s)\n", ...)
//   90a745c (2024-05-25)  "step %4d/%d | train loss %7.4f | norm %6.4f | lr %.2e | %.2f ms |
//                         %.1f%% A100 fp16 MFU | %.0f tok/s" (read by the '|' rule above)
// tok/s is one process's in e55ed0a and until a00a3a8 (2024-04-26, inside the "(acc)" era), all
// processes' after; the form without "(acc)" and norm is scaled to all processes, the others are
// taken as printed (a multi-GPU "(acc)" log of 22-26 April 2024 reads a tok/s N times low, which
// only the cross-check uses). "num_parameters: %zu ==> bytes: %zu" (d49e830..bc58cd1) is read
// like the later "=>". The CPU trainer train_gpt2.c prints
//   printf("step %d: train loss %f (took %f ms)\n", step, model.mean_loss, ms);
// The start prints "batch_size B=%d * seq_len T=%d * num_processes=%d and total_batch_size=%d"
// and "num_parameters: %zu => bytes: %zu" (read like the table's rows). The end of a run adds
// "total average iteration time: %f ms" and, with -h 1,
// "HellaSwag: %d/%d = %f" after each evaluation (an evaluation event, untimed like val loss).
#pragma once

#include <cmath>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/report/detail/log_lines.hpp"
#include "trainkit/report/detail/log_scan.hpp"
#include "trainkit/report/run_log.hpp"

namespace trainkit::report {

/// True when `line` is an llm.c step line (sniffing).
inline bool is_llmc_step_line(std::string_view line) {
  detail::scanner sc{line};
  if (!sc.lit("step ") || !sc.whole()) return false;
  if (sc.lit("/"))
    return sc.whole() && (sc.lit("|") || sc.lit(": train loss")) &&
           line.find(" ms") != std::string_view::npos;
  return sc.lit(":") && sc.lit("train loss ") && sc.number() && sc.lit("(took ");
}

namespace detail {

/// Fields of one llm.c step line after "step N/M", split on '|'.
struct llmc_fields {
  std::optional<double> loss, norm, lr, ms, mfu, tok_per_s;
};

inline llmc_fields parse_llmc_fields(std::string_view rest) {
  llmc_fields f;
  while (!rest.empty()) {
    const auto bar = rest.find('|');
    const std::string_view field = trim(rest.substr(0, bar));
    rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
    scanner sc{field};
    if (sc.lit("train loss ") || sc.lit("loss ")) {
      f.loss = sc.number();
    } else if (sc = {field}; sc.lit("norm ")) {
      f.norm = sc.number();
    } else if (sc = {field}; sc.lit("lr ")) {
      f.lr = sc.number();
    } else if (field.ends_with(" ms")) {
      f.ms = to_number(trim(field.substr(0, field.size() - 3)));
    } else if (field.ends_with("MFU")) {
      sc = {field};
      if (auto v = sc.number(); v && sc.lit("%")) f.mfu = v;
    } else if (field.ends_with("tok/s")) {
      f.tok_per_s = to_number(trim(field.substr(0, field.size() - 5)));
    }
  }
  return f;
}

}  // namespace detail

/// llm.c's log (already normalised) as a run_log; lines of no rule are counted in `skipped`.
inline run_log parse_llmc_log(const detail::normalised_log& log, const std::string& source) {
  run_log run;
  run.format = log_format::llmc;
  run.source = source;
  run.lines = log.total;
  run.other_ranks = log.other_ranks;
  run.rank = log.rank;
  run.facts.rank_tags = log.ranks_seen;
  bool tok_per_process = false;  // April 2024's "(%f ms, %d tok/s)" counts one process
  for (std::size_t n = 0; n < log.lines.size(); ++n) {
    const std::string_view line = log.lines[n].text;
    detail::scanner sc{line};
    if (sc.lit("step ")) {
      auto step = sc.whole();
      std::optional<double> loss, ms, tok;
      detail::llmc_fields f;
      bool ok = false;
      if (step && sc.lit("/") && sc.whole()) {
        if (sc.lit("|")) {
          f = detail::parse_llmc_fields(sc.rest());
          ok = f.ms && std::isfinite(*f.ms) && *f.ms >= 0;
        } else if (sc.lit(":") && sc.lit("train loss ") && (loss = sc.number())) {
          // April-May 2024: "train loss %f" [" (acc %f)"] [" norm %.4f"] [" lr %.2e"]
          // " (%f ms" [", %d tok/s"] ")"; see the header for the commits.
          bool acc = false;
          if (auto at = sc; sc.lit("(acc") && sc.number() && sc.lit(")"))
            acc = true;
          else
            sc = at;
          if (sc.lit("norm ")) f.norm = sc.number();
          if (sc.lit("lr ")) f.lr = sc.number();
          if (sc.lit("(") && (ms = sc.number()) && sc.lit("ms") && std::isfinite(*ms) && *ms >= 0) {
            if (sc.lit(")")) {
              ok = true;  // fdd6608..e55ed0a: no tok/s yet
            } else if (sc.lit(",") && (tok = sc.number()) && sc.lit("tok/s")) {
              f.tok_per_s = tok;
              // e55ed0a's and d49e830's tok/s is one process's; from a00a3a8 (inside the
              // "(acc)" era) it is all processes', so only the form without "(acc)" is scaled.
              if (!acc && !f.norm) tok_per_process = true;
              ok = true;
            }
          }
          if (ok) {
            f.loss = loss;
            f.ms = ms;
          }
        }
      } else if (sc = {line}; sc.lit("step ") && (step = sc.whole()) && sc.lit(":") &&
                              sc.lit("train loss ") && (loss = sc.number()) && sc.lit("(took ") &&
                              (ms = sc.number()) && sc.lit("ms)") && std::isfinite(*ms) &&
                              *ms >= 0) {
        f.loss = loss;  // train_gpt2.c on the CPU
        f.ms = ms;
        ok = true;
        if (run.facts.device.empty()) run.facts.device = "cpu";
      }
      if (ok) {
        if (detail::is_rank_repeat(run, *step, f.loss.value_or(NAN), n)) continue;
        logged_step s;
        s.line = log.lines[n].line;
        s.m.step = *step;
        s.m.dt_ms = *f.ms;
        s.m.loss = f.loss.value_or(NAN);
        s.m.grad_norm = f.norm.value_or(0);
        s.m.lr = f.lr.value_or(0);
        s.log_mfu = f.mfu && *f.mfu >= 0 ? *f.mfu / 100 : NAN;  // -100.0%: device unknown
        s.log_tok_per_s = f.tok_per_s.value_or(NAN);
        if (log.lines[n].ms) s.stamp_ms = double(*log.lines[n].ms);
        detail::push_step(run, s, n);
        continue;
      }
      ++run.skipped;
      continue;
    }
    sc = {line};
    // printf0("batch_size B=%d * seq_len T=%d * num_processes=%d and total_batch_size=%d\n")
    if (sc.lit("batch_size B=")) {
      const auto b = sc.whole();
      std::optional<std::uint64_t> t, procs, total;
      if (b && sc.lit("*") && sc.lit("seq_len T=") && (t = sc.whole()) && sc.lit("*") &&
          sc.lit("num_processes=") && (procs = sc.whole()) && sc.lit("and total_batch_size=") &&
          (total = sc.whole()) && *t >= 1 && *t < 1u << 30 && *procs >= 1 && *procs < 1u << 20 &&
          *total >= 1) {
        run.facts.seq = int(*t);
        run.facts.devices = int(*procs);
        run.facts.devices_from = "llm.c's num_processes";
        run.facts.tokens_per_step = *total;
        continue;
      }
    }
    sc = {line};
    if (sc.lit("num_parameters:")) {  // printf0("num_parameters: %zu => bytes: %zu\n", ...)
      if (const auto n = sc.whole(); n && *n > 0 && (sc.lit("=>") || sc.lit("==>"))) {
        run.facts.parameters = *n;
        continue;
      }
    }
    sc = {line};
    if (sc.lit("total average iteration time:")) {
      if (const auto v = sc.number(); v && sc.lit("ms")) {
        run.facts.average_ms = *v;
        continue;
      }
    }
    sc = {line};
    if (sc.lit("HellaSwag:")) {
      const auto right = sc.number();
      if (right && sc.lit("/") && sc.number() && sc.lit("=") && sc.number()) {
        // train_gpt2.cu evaluates HellaSwag on the same steps as the validation loss, right
        // after it: one evaluation pass, not two.
        const std::uint64_t now = run.steps.empty() ? 0 : run.steps.back().m.step;
        if (!run.events.empty() && run.events.back().kind == log_event::kind_t::eval &&
            run.events.back().step == now && run.events.back().what.empty()) {
          run.events.back().what = "validation loss + HellaSwag";
          continue;
        }
        log_event e;
        e.kind = log_event::kind_t::eval;
        e.step = now;
        e.line = log.lines[n].line;
        e.what = "HellaSwag";
        run.events.push_back(e);
        continue;
      }
    }
    sc = {line};
    if (sc.lit("val loss ")) {
      if (const auto v = sc.number()) {
        log_event e;
        e.kind = log_event::kind_t::eval;
        e.step = run.steps.empty() ? 0 : run.steps.back().m.step;  // after that many steps
        e.line = log.lines[n].line;
        e.val_loss = *v;
        run.events.push_back(e);  // timed in no step: the step timer covers training alone
        if (!run.steps.empty()) run.steps.back().m.val_loss = *v;
        continue;
      }
    }
    sc = {line};
    if (sc.lit("Writing checkpoint at step ")) {
      if (const auto step = sc.whole()) {
        log_event e;
        e.kind = log_event::kind_t::checkpoint;
        e.step = *step;
        e.line = log.lines[n].line;
        run.events.push_back(e);
        continue;
      }
    }
    // The configuration table: "| num_layers L          | 48          |".
    sc = {line};
    if (sc.lit("|")) {
      const std::string_view key = sc.until('|');
      if (sc.lit("|")) {
        const std::string_view value = sc.until('|');
        const auto num = detail::to_number(value);
        const auto as_int = [&](int& field) {
          if (num && *num > 0 && *num < 1 << 30) field = int(*num);
        };
        if (key == "device") {
          run.facts.device = std::string(value);
        } else if (key == "peak TFlops") {
          if (num && *num > 0) run.facts.peak_tflops = *num;
        } else if (key == "sequence length T") {
          as_int(run.facts.seq);
        } else if (key == "max_sequence_length T") {
          as_int(run.facts.max_seq);
        } else if (key == "num_layers L") {
          as_int(run.facts.layers);
        } else if (key == "num_heads NH") {
          as_int(run.facts.heads);
        } else if (key == "channels C") {
          as_int(run.facts.width);
        } else if (key == "num_processes") {
          as_int(run.facts.devices);
          run.facts.devices_from = "llm.c's num_processes";
        } else if (key == "num_parameters" || key == "total batch size") {
          if (num && *num > 0 && *num < 1e18)
            (key == "num_parameters" ? run.facts.parameters : run.facts.tokens_per_step) =
                std::uint64_t(*num);
        }
        continue;  // other rows of the table are known and not needed
      }
    }
    ++run.skipped;
  }
  if (tok_per_process && run.facts.devices > 1)  // make tok/s all processes' like the later form
    for (auto& s : run.steps) s.log_tok_per_s *= run.facts.devices;
  return run;
}

/// llm.c's log from raw lines.
inline run_log parse_llmc_log(std::span<const std::string> lines, const std::string& source) {
  return parse_llmc_log(detail::normalise_log(lines), source);
}

}  // namespace trainkit::report
