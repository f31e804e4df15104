// trainkit/report/nanogpt_log.hpp — reads the console log of nanoGPT's train.py into a run_log.
//
// The lines, as karpathy/nanoGPT train.py (commit 3adf61e) prints them:
//   line 327  print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu
//   {running_mfu*100:.2f}%") line 265  print(f"step {iter_num}: train loss {losses['train']:.4f},
//   val loss {losses['val']:.4f}") line 285  print(f"saving checkpoint to {out_dir}") line 206
//   print("compiling the model... (takes a ~minute)") line 102  print(f"tokens per iteration will
//   be: {tokens_per_iter:,}") model.py line 148  print("number of parameters: %.2fM" %
//   (self.get_num_params()/1e6,))
// and the configuration it echoes (configurator.py: the config file's text, "Overriding: k = v").
// What the numbers mean (train.py lines 251-329): `dt` runs from the end of one iteration to the
// end of the next, so iteration N's time includes the evaluation and the checkpoint save at the
// top of iteration N (and iteration 0's includes torch.compile); only every log_interval-th
// iteration is printed; "mfu" is an exponential moving average (0.9/0.1) started at the 5th
// iteration (-100.00% before), from model.py's estimate_mfu: 6·N + 12·L·H·Q·T FLOPs per token
// with N without the position embedding, against 312 TFLOP/s on every device. Under DDP the
// estimate counts one process's tokens (batch_size × gradient_accumulation_steps per process),
// so the printed MFU is per device; "tokens per iteration" counts all processes.
// Older generations are read too: before estimate_mfu was added (February 2023; the lines pasted
// in karpathy/nanoGPT#110 on 2023-02-02 have none) the line had no mfu ("iter %d: loss %.4f, time
// %.2fms"), and some forks keep that. The lines arrive through detail/log_lines.hpp (timestamps,
// rank tags, logging prefixes stripped; a timestamp kept).
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

/// True when `line` is a nanoGPT iteration line (sniffing).
inline bool is_nanogpt_step_line(std::string_view line) {
  detail::scanner sc{line};
  return sc.lit("iter ") && sc.whole() && sc.lit(":") && sc.lit("loss ") && sc.number() &&
         sc.lit(",") && sc.lit("time ") && sc.number() && sc.lit("ms");
}

/// nanoGPT's log (already normalised) as a run_log; lines of no rule are counted in `skipped`.
inline run_log parse_nanogpt_log(const detail::normalised_log& log, const std::string& source) {
  run_log run;
  run.format = log_format::nanogpt;
  run.source = source;
  run.lines = log.total;
  run.other_ranks = log.other_ranks;
  run.rank = log.rank;
  run.facts.rank_tags = log.ranks_seen;
  std::vector<std::size_t> pending;  // events waiting for the iteration line that times them
  std::uint64_t last_eval_step = 0;
  for (std::size_t n = 0; n < log.lines.size(); ++n) {
    const std::string_view line = log.lines[n].text;
    detail::scanner sc{line};
    // iter N: loss X, time Yms[, mfu Z%]
    if (sc.lit("iter ")) {
      const auto step = sc.whole();
      std::optional<double> loss, ms, mfu;
      if (step && sc.lit(":") && sc.lit("loss ") && (loss = sc.number()) && sc.lit(",") &&
          sc.lit("time ") && (ms = sc.number()) && sc.lit("ms") && std::isfinite(*ms) && *ms >= 0 &&
          (sc.done() || (sc.lit(",") && sc.lit("mfu ") && (mfu = sc.number()) && sc.lit("%")))) {
        if (detail::is_rank_repeat(run, *step, loss.value_or(NAN), n)) continue;
        logged_step s;
        s.line = log.lines[n].line;
        s.m.step = *step;
        s.m.loss = *loss;
        s.m.dt_ms = *ms;
        s.log_mfu = mfu && *mfu >= 0 ? *mfu / 100 : NAN;  // -100.00%: not estimated yet
        if (log.lines[n].ms) s.stamp_ms = double(*log.lines[n].ms);
        detail::push_step(run, s, n);
        for (std::size_t e : pending) {
          auto& ev = run.events[e];
          if (ev.step == *step) {
            ev.timed_in = run.steps.size() - 1;
            if (ev.kind == log_event::kind_t::eval) run.steps.back().m.val_loss = ev.val_loss;
          }
        }
        pending.clear();
        continue;
      }
      ++run.skipped;
      continue;
    }
    sc = {line};
    // step N: train loss X, val loss Y
    if (sc.lit("step ")) {
      const auto step = sc.whole();
      std::optional<double> train, val;
      if (step && sc.lit(":") && sc.lit("train loss ") && (train = sc.number()) && sc.lit(",") &&
          sc.lit("val loss ") && (val = sc.number())) {
        log_event e;
        e.kind = log_event::kind_t::eval;
        e.step = *step;
        e.line = log.lines[n].line;
        e.val_loss = *val;
        run.events.push_back(e);
        pending.push_back(run.events.size() - 1);
        last_eval_step = *step;
        continue;
      }
      ++run.skipped;
      continue;
    }
    sc = {line};
    if (sc.lit("saving checkpoint to ")) {
      log_event e;
      e.kind = log_event::kind_t::checkpoint;
      e.step = last_eval_step;  // train.py saves right after the evaluation at the same iteration
      e.line = log.lines[n].line;
      run.events.push_back(e);
      pending.push_back(run.events.size() - 1);
      continue;
    }
    if (line.starts_with("compiling the model")) {
      run.facts.compiled = true;
      continue;
    }
    sc = {line};
    if (sc.lit("tokens per iteration will be:")) {
      if (const auto t = sc.whole()) run.facts.tokens_per_step = *t;
      continue;
    }
    sc = {line};
    if (sc.lit("number of parameters:")) {
      if (const auto m = sc.number(); m && sc.lit("M") && *m > 0) {
        run.facts.parameters = std::uint64_t(std::llround(*m * 1e6));
        run.facts.parameters_exclude_wpe = true;  // get_num_params(non_embedding=True)
      }
      continue;
    }
    // The configuration train.py echoes: "n_layer = 48" or "Overriding: n_layer = 48".
    sc = {line};
    sc.lit("Overriding:");
    const std::string_view key = sc.until('=');
    if (sc.lit("=")) {
      const auto v = sc.whole();
      if (v && sc.done() && *v < 1u << 30) {
        if (key == "n_layer") run.facts.layers = int(*v);
        if (key == "n_head") run.facts.heads = int(*v);
        if (key == "n_embd") run.facts.width = int(*v);
        if (key == "block_size") run.facts.seq = int(*v);
        if (key == "n_layer" || key == "n_head" || key == "n_embd" || key == "block_size") continue;
      }
    }
    // DDP's world size where a fork prints it ("ddp_world_size = 8", "world_size: 8").
    sc = {line};
    if (sc.lit("ddp_world_size") || sc.lit("world_size") || sc.lit("world size")) {
      if (sc.lit("=") || sc.lit(":")) {
        const auto v = sc.whole();
        if (v && sc.done() && *v >= 1 && *v < 1u << 20) {
          run.facts.devices = int(*v);
          run.facts.devices_from = "the log's world size line";
          continue;
        }
      }
    }
    ++run.skipped;
  }
  return run;
}

/// nanoGPT's log from raw lines.
inline run_log parse_nanogpt_log(std::span<const std::string> lines, const std::string& source) {
  return parse_nanogpt_log(detail::normalise_log(lines), source);
}

}  // namespace trainkit::report
