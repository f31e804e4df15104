#!/usr/bin/env bash
# bench/cpu_vs_torch.sh — issue 37's CPU benchmark: trainkit's CPU training step beside PyTorch's
# on the same shapes and threads, interleaved, each figure printed next to its goal.
#
#   bench/cpu_vs_torch.sh BUILD_DIR [ROUNDS] [STEPS] [CASES]
#
# BUILD_DIR holds bench/bench_cpu_phases (Release). PyTorch comes from $TORCH_PYTHON (default
# /work/torchenv/bin/python; torch + transformers). Each round runs, for every case, trainkit fp32
# with oneDNN's GEMMs (the default where the build has oneDNN) and with Eigen's (--eigen), trainkit
# bf16 (--bf16), PyTorch eager fp32, torch.compile fp32 and PyTorch eager under bf16 autocast —
# each a fresh process timing STEPS full steps (forward, backward, clip, AdamW) after warm-up —
# the order of the programs rotated every round, so a neighbour's load falls on all of them
# alike. The table gives, per case and program, the median tokens/s over rounds with the spread
# (min–max), and the ratios the goals are stated in:
#   fp32: trainkit ≥ 1.3× PyTorch eager, GPT-2 and Llama, d6 (B4 T64) and d12 (B4 T256);
#   bf16: trainkit bf16 ≥ 1.3× PyTorch's bf16 autocast at d12 (d6 printed, no goal).
# CASES (default "gpt2:d6:64 gpt2:d12:256 llama:d6:64 llama:d12:256") are arch:preset:T at B=4.
# Threads: $THREADS (default 2) for both (OMP_NUM_THREADS, torch.set_num_threads). $COMPILE
# (default "d6 d12") names the presets torch.compile runs at (its compilation takes minutes at d12
# on a loaded 2-core machine; "" skips it). The header names the CPU (brand string, family/model),
# its vector flags, the commit, and the load average before and after.
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
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
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
    jobs=("trainkit_fp32" "trainkit_eigen" "torch_eager" "trainkit_bf16" "torch_autocast")
    [[ " $compile " == *" $model "* ]] && jobs+=("torch_compile")
    n=${#jobs[@]}
    for ((j = 0; j < n; ++j)); do
      job=${jobs[$(((j + r) % n))]}
      case $job in
        trainkit_fp32) run "$key" "$job" "$tk" "${common[@]}" --step-only ;;
        trainkit_eigen) run "$key" "$job" "$tk" "${common[@]}" --step-only --eigen ;;
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
family=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
cpumodel=$(grep -m1 '^model\s*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
  grep -E '^(avx2|fma|avx512f|avx512_bf16|amx_bf16|amx_tile)$' | tr '\n' ' ')
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$out" "$rounds" "$steps" "$threads" "$cpu (family $family model $cpumodel)" "$flags" \
  "$commit" "$load_before" "$load_after" <<'EOF'
import collections, math, statistics, sys
path, rounds, steps, threads, cpu, flags, commit, load0, load1 = sys.argv[1:]
rates = collections.defaultdict(list)
for line in open(path):
    key, label, rate = line.split()
    if rate != "nan":
        rates[(key, label)].append(float(rate))
print(f"CPU: {cpu} [{flags.strip()}], {threads} threads, commit {commit}, "
      f"{rounds} rounds x {steps} steps; load average {load0} before, {load1} after")
print("tokens/s: median over rounds [min-max]; ratios of medians")
names = [("trainkit_fp32", "trainkit fp32 (oneDNN)"), ("trainkit_eigen", "trainkit fp32 (Eigen)"),
         ("torch_eager", "PyTorch eager fp32"), ("torch_compile", "torch.compile fp32"),
         ("trainkit_bf16", "trainkit bf16"), ("torch_autocast", "PyTorch bf16 autocast")]
keys = sorted({k for k, _ in rates}, key=lambda k: (k.split("-")[0], int(k.split("-")[1][1:])))
def med(key, label):
    v = rates.get((key, label))
    return statistics.median(v) if v else float("nan")
for key in keys:
    print(f"\n{key}")
    for label, text in names:
        v = rates.get((key, label))
        if not v:
            continue
        print(f"  {text:24} {statistics.median(v):9.1f}  [{min(v):.1f}-{max(v):.1f}]  (n={len(v)})")
    d12 = key.split("-")[1] == "d12"
    for num, den, goal, text in (
            ("trainkit_fp32", "torch_eager", 1.3, "fp32 oneDNN / eager"),
            ("trainkit_eigen", "torch_eager", 1.3, "fp32 Eigen / eager"),
            ("trainkit_fp32", "torch_compile", None, "fp32 oneDNN / compile"),
            ("trainkit_bf16", "torch_autocast", 1.3 if d12 else None, "bf16 / autocast"),
            ("trainkit_bf16", "trainkit_fp32", None, "trainkit bf16 / fp32")):
        r = med(key, num) / med(key, den)
        if math.isnan(r):
            continue
        verdict = "" if goal is None else (f"goal >= {goal}x: " + ("met" if r >= goal else "NOT met"))
        print(f"  {text:24} {r:8.2f}x  {verdict}")
EOF
