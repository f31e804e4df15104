#!/usr/bin/env bash
# bench/ckpt_stall.sh — what checkpoints cost a real training run: gpt_fineweb on the CPU at d12
# (B=1, T=64, a checkpoint every 4 steps), run with --ckpt-mode none, sync and async in turn, the
# three modes alternating RUNS times so that drifting load hits them alike. From each run's
# --metrics file it prints, beside the goals of issue 14:
#   1. async stall / sync stall: the summed ckpt_stall_ms (the time the loop was blocked by the
#      checkpointer: save itself, and for async the wait before the next optimizer update);
#   2. wall-clock overhead against no checkpointing, async / sync: the summed dt_ms of each mode
#      minus the none run's, medians over the runs;
#   3. async stall per checkpoint / a plain memcpy of the state (bench_checkpoint's BM_memcpy at
#      the size of the run's tensors.bin), for the checkpoints after the first (the first also
#      allocates the staging memory), valid when the step after a save computes for longer than
#      that memcpy (printed, so a reader sees whether the condition held).
# Per-checkpoint stalls are printed too: a save's own stall plus the next step's (for async, the
# wait in before_update).
# Steps 1..STEPS-1 are counted: the last step holds the end-of-run save, which for sync is in the
# step and for async in the wait after the loop, and is not an every-4-steps checkpoint.
#
# Usage: bench/ckpt_stall.sh [BUILD_DIR]   (default build; needs gpt_fineweb and bench_checkpoint)
# Environment: RUNS (3), STEPS (14), EVERY (4), MODEL (d12), BATCH (1), SEQ (64), THREADS (0 =
# OpenMP's default), CKPT_ROOT (a fresh directory under $TMPDIR; put it on the disk you train on).
set -euo pipefail

build=${1:-build}
runs=${RUNS:-3}
steps=${STEPS:-14}
every=${EVERY:-4}
model=${MODEL:-d12}
batch=${BATCH:-1}
seq=${SEQ:-64}
threads=${THREADS:-0}
exe="$build/examples/gpt_fineweb/gpt_fineweb"
bench="$build/bench/bench_checkpoint"
for f in "$exe" "$bench"; do
  [[ -x $f ]] || { echo "ckpt_stall.sh: $f not built (cmake --build $build --target $(basename "$f"))" >&2; exit 2; }
done
root=${CKPT_ROOT:-$(mktemp -d "${TMPDIR:-/tmp}/trainkit_ckpt_stall.XXXXXX")}
mkdir -p "$root"
trap 'rm -rf "$root"/run_*' EXIT

echo "ckpt_stall: $model B=$batch T=$seq, $steps steps, checkpoint every $every, $runs alternating runs, in $root"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= runs; r++)); do
  for mode in none sync async; do
    dir="$root/run_${mode}_$r"
    rm -rf "$dir" && mkdir -p "$dir"
    args=(--device cpu --model "$model" --batch "$batch" --seq "$seq" --steps "$steps"
          --eval-every 0 --eval-batches 1 --log-every 1000 --no-progress
          --metrics "$dir/metrics.jsonl" --chart "$dir/chart.svg" --ckpt-mode "$mode")
    [[ $threads != 0 ]] && args+=(--threads "$threads")
    [[ $mode != none ]] && args+=(--ckpt-dir "$dir/ckpt" --ckpt-every "$every" --ckpt-keep 2)
    start=$(date +%s.%N)
    "$exe" "${args[@]}" > "$dir/out.txt" 2>&1 || { cat "$dir/out.txt" >&2; exit 1; }
    end=$(date +%s.%N)
    echo "$start $end" > "$dir/wall"
    if [[ $mode == sync && ! -f $root/state_bytes ]]; then
      stat -c %s "$(ls -d "$dir"/ckpt/step_* | tail -1)/tensors.bin" > "$root/state_bytes"
    fi
    # The staging copies and checkpoint files of this run are not needed any more.
    rm -rf "$dir/ckpt"
    echo "  run $r $mode: $(awk '{printf "%.1f s", $2 - $1}' "$dir/wall")"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

state_bytes=$(cat "$root/state_bytes")
mib=$(awk -v b="$state_bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
memcpy_ms=$(TRAINKIT_BENCH_CKPT_MIB=$mib TRAINKIT_BENCH_CKPT_DIR="$root/bench" \
  "$bench" --benchmark_filter=BM_memcpy 2>/dev/null |
  awk '/plain memcpy of the state/ { for (i = 1; i <= NF; ++i) if ($(i + 1) == "ms") { print $i; exit } }')

python3 - "$root" "$runs" "$steps" "$every" "$state_bytes" "$memcpy_ms" <<'PY'
import json, statistics, sys
root, runs, steps, every, state_bytes, memcpy_ms = sys.argv[1:]
runs, steps, every, state_bytes, memcpy_ms = int(runs), int(steps), int(every), int(state_bytes), float(memcpy_ms)
counted = steps - 1  # the last step holds the end-of-run save

def load(mode, r):
    with open(f"{root}/run_{mode}_{r}/metrics.jsonl") as f:
        lines = [json.loads(l) for l in f if l.strip()]
    return [m for m in lines if "step" in m and m["step"] <= counted]

rows = {mode: [load(mode, r) for r in range(1, runs + 1)] for mode in ("none", "sync", "async")}
def total(ms, key): return sum(m[key] for m in ms)
wall = {mode: [total(ms, "dt_ms") for ms in rows[mode]] for mode in rows}
saves = list(range(every, counted, every))  # checkpoints whose next step is counted too

# Per checkpoint: the stall of the save step plus that of the next step (async: before_update).
def per_checkpoint(ms):
    by_step = {m["step"]: m for m in ms}
    return [by_step[k]["ckpt_stall_ms"] + by_step[k + 1]["ckpt_stall_ms"] for k in saves]
ckpt = {mode: [per_checkpoint(ms) for ms in rows[mode]] for mode in ("sync", "async")}

print(f"\nckpt_stall summary: state {state_bytes / 1e9:.2f} GB, checkpoints at steps "
      f"{', '.join(map(str, saves))}; steps 1..{counted} counted")
for mode in ("none", "sync", "async"):
    line = f"  {mode:5s}  loop time (sum dt_ms) " + ", ".join(f"{w / 1e3:7.2f} s" for w in wall[mode])
    if mode in ckpt:
        line += "   stall per checkpoint [" + "; ".join(
            " ".join(f"{s:.0f}" for s in run) for run in ckpt[mode]) + "] ms"
    print(line)

def verdict(ok): return "MET" if ok else "NOT MET"
med = statistics.median
ratio = med([sum(r) for r in ckpt["async"]]) / med([sum(r) for r in ckpt["sync"]])
print(f"  1. async stall / sync stall (medians)       = {100 * ratio:6.2f}%   goal: <= 5%    {verdict(ratio <= 0.05)}")
if len(saves) > 1:
    later = med([sum(r[1:]) for r in ckpt["async"]]) / med([sum(r[1:]) for r in ckpt["sync"]])
    print(f"     the same without the first checkpoint   = {100 * later:6.2f}%   (the first one allocates "
          f"and faults in the {state_bytes / 1e9:.2f} GB staging buffer)")

over = {mode: [w - n for w, n in zip(wall[mode], wall["none"])] for mode in ("sync", "async")}
print("     overhead vs none, per run: sync " + ", ".join(f"{o / 1e3:+.2f} s" for o in over["sync"]) +
      "; async " + ", ".join(f"{o / 1e3:+.2f} s" for o in over["async"]))
sync_over, async_over = med(over["sync"]), med(over["async"])
if sync_over > 0:
    r2 = async_over / sync_over
    print(f"  2. wall overhead async / sync (medians)     = {100 * r2:6.2f}%   goal: <= 30%   {verdict(r2 <= 0.30)}")
else:
    print("  2. wall overhead async / sync: sync showed no overhead over none (noise); no figure")

# Goal 3 is about the steady state (staging memory allocated): checkpoints after the first.
steady = [s for run in ckpt["async"] for s in (run[1:] if len(run) > 1 else run)]
compute_after = [m["compute_ms"] for ms in rows["async"] for m in ms
                 if m["step"] - 1 in saves[1 if len(saves) > 1 else 0:]]
stall_one = med(steady)
print(f"     async stall per checkpoint after the first: median {stall_one:.1f} ms; plain memcpy of "
      f"the state {memcpy_ms:.1f} ms; compute of the step after a save: median {med(compute_after):.0f} ms "
      f"({'longer' if med(compute_after) > memcpy_ms else 'NOT longer'} than the memcpy)")
r3 = stall_one / memcpy_ms
print(f"  3. async stall per checkpoint / memcpy      = {r3:6.3f}    goal: <= 0.1   {verdict(r3 <= 0.1)}")
PY
