#!/usr/bin/env bash
# bench/side_by_side.sh — the CPU benchmarks of two builds, run alternately in one session, so that a
# refactor can be shown to cost no speed on a noisy machine: each round runs both builds (the order
# swapped every round), and the table gives each benchmark's median and the ratio new ÷ old.
#
#   bench/side_by_side.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS] [FILTER]
#
# OLD_BUILD_DIR/NEW_BUILD_DIR hold bench/bench_model and bench/bench_optim (built in Release, e.g.
# an older commit's worktree next to this one). FILTER is a Google Benchmark regex (default: the
# training steps and AdamW). Rates (tok/s, GB/s) are compared when a benchmark reports one,
# otherwise real time per iteration. A ratio within the machine's noise (±15% here) is "same".
set -euo pipefail
old=${1:?usage: side_by_side.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS] [FILTER]}
new=${2:?usage: side_by_side.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS] [FILTER]}
rounds=${3:-3}
filter=${4:-'bench_train_step|bench_forward_backward|BM_adamw_cpu_step|BM_stream_baseline'}
for dir in "$old" "$new"; do
  for prog in bench_model bench_optim; do
    [[ -x $dir/bench/$prog ]] || { echo "side_by_side.sh: $dir/bench/$prog not found (build it)" >&2; exit 2; }
  done
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < rounds; ++r)); do
  order=(old new)
  ((r % 2)) && order=(new old)
  for which in "${order[@]}"; do
    dir=$old
    [[ $which == new ]] && dir=$new
    for prog in bench_model bench_optim; do
      "$dir/bench/$prog" --benchmark_filter="$filter" --benchmark_out_format=json \
        --benchmark_out="$out/$which.$prog.$r.json" >/dev/null 2>&1 || true
    done
  done
  echo "round $((r + 1))/$rounds done" >&2
done
python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys, glob, os
out, rounds = sys.argv[1], int(sys.argv[2])
figures = {}  # (benchmark, which) -> [values]
kind = {}
for path in glob.glob(os.path.join(out, "*.json")):
    which = os.path.basename(path).split(".")[0]
    try:
        doc = json.load(open(path))
    except (OSError, ValueError):
        continue
    for b in doc.get("benchmarks", []):
        name = b["name"]
        rate = next((b[k] for k in ("tok/s", "GB/s", "MB/s", "items_per_second") if k in b), None)
        if rate:
            figures.setdefault((name, which), []).append(float(rate)); kind[name] = "rate"
        else:
            figures.setdefault((name, which), []).append(float(b["real_time"])); kind[name] = b.get("time_unit", "ns")
print(f"{'benchmark':44} {'old (median)':>14} {'new (median)':>14} {'new/old':>8}  verdict")
for name in sorted(kind):
    o, n = figures.get((name, "old")), figures.get((name, "new"))
    if not o or not n:
        print(f"{name:44} {'-':>14} {'-':>14} {'-':>8}  missing in one build"); continue
    mo, mn = statistics.median(o), statistics.median(n)
    speed = mn / mo if kind[name] == "rate" else mo / mn  # > 1: the new build is faster
    verdict = "same (within ±15%)" if 0.85 <= speed <= 1.15 else ("faster" if speed > 1 else "SLOWER")
    unit = "/s" if kind[name] == "rate" else " " + kind[name]
    print(f"{name:44} {mo:>12.4g}{unit:2} {mn:>12.4g}{unit:2} {speed:>8.3f}  {verdict}")
print(f"({rounds} rounds, order alternated; new/old is the speed ratio: above 1 the new build is faster)")
EOF
