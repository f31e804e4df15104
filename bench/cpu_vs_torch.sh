#!/usr/bin/env bash
# bench/cpu_vs_torch.sh — issue 37's CPU benchmark: trainkit's CPU training step beside PyTorch's
# on the same shapes and threads, interleaved, each figure printed next to its goal.
#
#   bench/cpu_vs_torch.sh BUILD_DIR [ROUNDS] [STEPS] [CASES]
#
# BUILD_DIR holds bench/bench_cpu_phases (Release). PyTorch comes from $TORCH_PYTHON (default
# /work/torchenv/bin/python; torch + transformers). Each round runs, for every case, trainkit fp32,
# PyTorch eager fp32 and torch.compile fp32, and at d12 also trainkit bf16 and PyTorch eager
# under bf16 autocast — each a fresh process timing STEPS full steps (forward, backward, clip,
# AdamW) after warm-up — the order of the programs rotated every round, so a neighbour's load
# falls on all of them alike. The table gives medians over rounds and the ratios the goals are
# stated in:
#   fp32: trainkit ≥ 1.3× PyTorch eager, GPT-2 and Llama, d6 (B4 T64) and d12 (B4 T256);
#   bf16: trainkit --precision bf16 ≥ 1.3× PyTorch's bf16 autocast at d12.
# CASES (default "gpt2:d6:64 gpt2:d12:256 llama:d6:64 llama:d12:256") are arch:preset:T at B=4.
# Threads: $THREADS (default 2) for both (OMP_NUM_THREADS, torch.set_num_threads). $COMPILE
# (default "d6 d12") names the presets torch.compile runs at (its compilation takes minutes at d12
# on a loaded 2-core machine; "" skips it).
set -euo pipefail
build=${1:?usage: cpu_vs_torch.sh BUILD_DIR [ROUNDS] [STEPS] [CASES]}
rounds=${2:-3}
steps=${3:-3}
cases=${4:-"gpt2:d6:64 gpt2:d12:256 llama:d6:64 llama:d12:256"}
py=${TORCH_PYTHON:-/work/torchenv/bin/python}
threads=${THREADS:-2}
compile=${COMPILE-"d6 d12"}
here=$(cd "$(dirname "$0")" && pwd)
tk=$build/bench/bench_cpu_phases
[[ -x $tk ]] || { echo "cpu_vs_torch.sh: $tk not found (build bench_cpu_phases)" >&2; exit 2; }
"$py" -c "import torch, transformers" 2>/dev/null ||
  { echo "cpu_vs_torch.sh: $py cannot import torch and transformers (set TORCH_PYTHON)" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export OMP_NUM_THREADS=$threads

run() {  # run LABEL COMMAND...: appends "case label tok/s" (or "nan" when it failed)
  local key=$1 label=$2
  shift 2
  local rate
  rate=$("$@" 2>/dev/null | sed -n 's/.*(tok\/s \([0-9.]*\)).*/\1/p' | tail -1)
  echo "$key $label ${rate:-nan}" >>"$out"
}

for ((r = 0; r < rounds; ++r)); do
  for c in $cases; do
    IFS=: read -r arch model T <<<"$c"
    key="$arch-$model-T$T"
    common=(--arch "$arch" --model "$model" --batch 4 --seq "$T" --steps "$steps")
    jobs=("trainkit_fp32" "torch_eager")
    [[ " $compile " == *" $model "* ]] && jobs+=("torch_compile")
    [[ $model == d12 ]] && jobs+=("trainkit_bf16" "torch_autocast")
    n=${#jobs[@]}
    for ((j = 0; j < n; ++j)); do
      job=${jobs[$(((j + r) % n))]}
      case $job in
        trainkit_fp32) run "$key" "$job" "$tk" "${common[@]}" --step-only ;;
        trainkit_bf16) run "$key" "$job" "$tk" "${common[@]}" --step-only --bf16 ;;
        torch_eager) run "$key" "$job" "$py" "$here/cpu_phases_torch.py" "${common[@]}" \
          --threads "$threads" --no-profile ;;
        torch_compile) run "$key" "$job" "$py" "$here/cpu_phases_torch.py" "${common[@]}" \
          --threads "$threads" --no-profile --compile ;;
        torch_autocast) run "$key" "$job" "$py" "$here/cpu_phases_torch.py" "${common[@]}" \
          --threads "$threads" --no-profile --bf16 ;;
      esac
    done
  done
  echo "round $((r + 1))/$rounds done" >&2
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16|amx_tile)$' | tr '\n' ' ')
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$out" "$rounds" "$steps" "$threads" "$cpu" "$flags" "$commit" <<'EOF'
import collections, math, statistics, sys
path, rounds, steps, threads, cpu, flags, commit = sys.argv[1:]
rates = collections.defaultdict(list)
for line in open(path):
    key, label, rate = line.split()
    if rate != "nan":
        rates[(key, label)].append(float(rate))
med = {k: statistics.median(v) for k, v in rates.items()}
print(f"CPU: {cpu} [{flags.strip()}], {threads} threads, commit {commit}, "
      f"{rounds} rounds x {steps} steps, medians (tok/s)")
print(f"{'case':18} {'trainkit':>9} {'eager':>8} {'compile':>8} {'tk/eager':>9} {'goal':>6}  "
      f"{'tk bf16':>8} {'autocast':>9} {'bf16/ac':>8} {'goal':>6}")
keys = sorted({k for k, _ in med}, key=lambda k: (k.split("-")[0], int(k.split("-")[1][1:])))
def f(x): return f"{x:.1f}" if x and not math.isnan(x) else "-"
for key in keys:
    g = lambda label: med.get((key, label), float("nan"))
    tk, ea, co, tb, ac = (g(x) for x in ("trainkit_fp32", "torch_eager", "torch_compile",
                                         "trainkit_bf16", "torch_autocast"))
    r32, r16 = tk / ea, tb / ac
    v32 = "met" if r32 >= 1.3 else "NOT met"
    v16 = "" if math.isnan(r16) else ("met" if r16 >= 1.3 else "NOT met")
    print(f"{key:18} {f(tk):>9} {f(ea):>8} {f(co):>8} {r32:>8.2f}x {'>=1.3':>6} {v32:8} "
          f"{f(tb):>8} {f(ac):>9} {'' if math.isnan(r16) else f'{r16:.2f}x':>8} "
          f"{'' if math.isnan(r16) else '>=1.3':>6} {v16}")
EOF
