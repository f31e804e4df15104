// trainkit/report/build_nanogpt_log.hpp — reads the log of Karpathy's build-nanogpt train_gpt2.py.
//
// The lines, as karpathy/build-nanogpt train_gpt2.py (the final commit of the video's series,
// 2024) prints them from the master process:
//   print(f"step {step:5d} | loss: {loss_accum.item():.6f} | lr {lr:.4e} | norm: {norm:.4f} |
//         dt: {dt*1000:.2f}ms | tok/sec: {tokens_per_sec:.2f}")
//   print(f"validation loss: {val_loss_accum.item():.4f}")
//   print(f"HellaSwag accuracy: {num_correct_norm}/{num_total}={acc_norm:.4f}")
//   print(f"total desired batch size: {total_batch_size}")
//   print(f"=> calculated gradient accumulation steps: {grad_accum_steps}")
// Earlier cuts of the same file (the video's chapters) print fewer fields: commits 5265b20 to
// 7230096 (2024-06-07)
//   print(f"step {i}, loss: {loss.item()}, dt: {dt:.2f}ms, tok/sec: {tokens_per_sec:.2f}")
// (commas, the loss at full precision: the form most people pasted while following the video),
// 5215868 "step {i:4d} | loss: ... | dt: ...ms | tok/sec: ..." and 105f117 with "| norm: ...";
// the "key: value" fields between the commas or bars are read. What the numbers mean: t0 is taken
// at the top of the loop, before the evaluation, HellaSwag and sampling of that step, so a step's
// dt includes them (like nanoGPT); tok/sec counts every process (B·T·grad_accum·world size / dt);
// checkpoints are written without a message (inside the validation step's time).
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

namespace detail {

/// The fields of a build-nanogpt step line after "step N": loss, lr, norm, dt (ms), tok/sec.
struct bng_fields {
  std::optional<double> loss, lr, norm, ms, tok;
};

inline bng_fields parse_bng_fields(std::string_view rest, char sep = '|') {
  bng_fields f;
  while (!rest.empty()) {
    const auto bar = rest.find(sep);
    const std::string_view field = trim(rest.substr(0, bar));
    rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
    scanner sc{field};
    if (sc.lit("loss:")) {
      f.loss = sc.number();
    } else if (sc = {field}; sc.lit("lr:") || sc.lit("lr ")) {
      f.lr = sc.number();
    } else if (sc = {field}; sc.lit("norm:")) {
      f.norm = sc.number();
    } else if (sc = {field}; sc.lit("dt:")) {
      if (auto v = sc.number(); v && sc.lit("ms")) f.ms = v;
    } else if (sc = {field}; sc.lit("tok/sec:")) {
      f.tok = sc.number();
    }
  }
  return f;
}

}  // namespace detail

/// True when `line` is a build-nanogpt step line (sniffing).
inline bool is_build_nanogpt_step_line(std::string_view line) {
  detail::scanner sc{line};
  if (!(sc.lit("step ") && sc.whole())) return false;
  const char sep = sc.lit("|") ? '|' : sc.lit(",") ? ',' : '\0';
  if (sep == '\0') return false;
  const auto f = detail::parse_bng_fields(sc.rest(), sep);
  return f.loss.has_value() && f.ms.has_value();
}

/// build-nanogpt's log (already normalised) as a run_log; other lines counted in `skipped`.
inline run_log parse_build_nanogpt_log(const detail::normalised_log& log,
                                       const std::string& source) {
  run_log run;
  run.format = log_format::build_nanogpt;
  run.source = source;
  run.lines = log.total;
  run.other_ranks = log.other_ranks;
  run.rank = log.rank;
  run.facts.rank_tags = log.ranks_seen;
  std::vector<std::size_t> pending;  // evaluations printed before the step line that times them
  for (std::size_t n = 0; n < log.lines.size(); ++n) {
    const std::string_view line = log.lines[n].text;
    detail::scanner sc{line};
    if (sc.lit("step ")) {
      const auto step = sc.whole();
      const char sep = !step ? '\0' : sc.lit("|") ? '|' : sc.lit(",") ? ',' : '\0';
      if (sep != '\0') {
        const auto f = detail::parse_bng_fields(sc.rest(), sep);
        if (f.loss && f.ms && std::isfinite(*f.ms) && *f.ms >= 0) {
          if (detail::is_rank_repeat(run, *step, f.loss.value_or(NAN), n)) continue;
          logged_step s;
          s.line = log.lines[n].line;
          s.m.step = *step;
          s.m.loss = *f.loss;
          s.m.dt_ms = *f.ms;
          s.m.lr = f.lr.value_or(0);
          s.m.grad_norm = f.norm.value_or(0);
          s.log_tok_per_s = f.tok.value_or(NAN);
          if (log.lines[n].ms) s.stamp_ms = double(*log.lines[n].ms);
          detail::push_step(run, s, n);
          for (std::size_t e : pending) {
            run.events[e].step = *step;
            run.events[e].timed_in = run.steps.size() - 1;
            if (std::isfinite(run.events[e].val_loss))
              run.steps.back().m.val_loss = run.events[e].val_loss;
          }
          pending.clear();
          continue;
        }
      }
      ++run.skipped;
      continue;
    }
    sc = {line};
    if (sc.lit("validation loss:") || (sc = {line}, sc.lit("HellaSwag accuracy:"))) {
      const bool hs = line.starts_with("HellaSwag");
      if (const auto v = sc.number()) {
        // train_gpt2.py runs both at the same steps (step % 250 == 0 or the last), validation
        // first: a HellaSwag line after a validation one is the same evaluation pass.
        if (hs && !pending.empty() && run.events[pending.back()].what.empty()) {
          run.events[pending.back()].what = "validation loss + HellaSwag";
          continue;
        }
        log_event e;
        e.kind = log_event::kind_t::eval;
        e.line = log.lines[n].line;
        if (hs)
          e.what = "HellaSwag";
        else
          e.val_loss = *v;
        run.events.push_back(e);
        pending.push_back(run.events.size() - 1);
        continue;
      }
    }
    sc = {line};
    if (sc.lit("total desired batch size:")) {
      if (const auto t = sc.whole(); t && *t > 0) {
        run.facts.tokens_per_step = *t;
        continue;
      }
    }
    sc = {line};
    if (sc.lit("=> calculated gradient accumulation steps:") || sc.lit("using device:") ||
        sc.lit("num decayed parameter tensors") || sc.lit("num non-decayed parameter tensors") ||
        sc.lit("using fused AdamW") || sc.lit("loaded ") || sc.lit("found ") ||
        sc.lit("1 epoch =")) {  // DataLoaderLite: f"1 epoch = {...} batches"
      continue;                 // known lines the report does not need
    }
    ++run.skipped;
  }
  return run;
}

/// build-nanogpt's log from raw lines.
inline run_log parse_build_nanogpt_log(std::span<const std::string> lines,
                                       const std::string& source) {
  return parse_build_nanogpt_log(detail::normalise_log(lines), source);
}

}  // namespace trainkit::report
