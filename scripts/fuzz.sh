#!/usr/bin/env bash
# scripts/fuzz.sh — builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and runs
# each for a bounded time over a copy of its committed seed corpus.
#
#   scripts/fuzz.sh [--cpu] [SECONDS_PER_TARGET=20] [TARGET...]
#
# Without --cpu each target runs for SECONDS of wall-clock time (libFuzzer's -max_total_time). With
# --cpu it runs until the fuzzer process has consumed SECONDS of CPU time (utime + stime from
# /proc/PID/stat, polled every 2 s, then SIGUSR1: libFuzzer's graceful stop, final stats, exit 0),
# so that a budget means the same on a loaded machine as on a quiet one; the wall time is printed
# beside it.
# Targets: every tests/fuzz/fuzz_*.cpp (all by default). Binaries go to build-fuzz/ and the growing
# corpora to build-fuzz/corpus/<target> (the committed seeds in tests/fuzz/corpus/<target> are read,
# never written). A crash stops the script with exit 1 and leaves the input as
# build-fuzz/crash-<target>-*: fix the bug, then commit that input under
# tests/fuzz/regressions/<target>/, which every run replays first. The GPT-2 vocabulary comes from
# $TRAINKIT_GPT2_VOCAB, else the bundled vocab/gpt2 (the tokenizer targets need it).
set -euo pipefail
cd "$(dirname "$0")/.."
cpu_budget=0
if [ "${1:-}" = --cpu ]; then
  cpu_budget=1
  shift
fi
seconds=${1:-20}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
vocab=${TRAINKIT_GPT2_VOCAB:-$(pwd)/vocab/gpt2}
CXX_FUZZ=${CXX_FUZZ:-clang++}
out=build-fuzz
mkdir -p "$out/corpus"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# CPU seconds (user + system, all threads) that process $1 has consumed so far; fields 14 and 15
# of /proc/PID/stat are in clock ticks. The command name (field 2) may hold spaces, so count the
# fields after its closing parenthesis.
cpu_seconds_of() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  read -r -a fields <<<"$stat"
  echo $(((fields[11] + fields[12]) / $(getconf CLK_TCK)))
}

# Runs the fuzzer "$@" in the background until it exits or has used $seconds CPU seconds; prints
# the CPU seconds it used on fd 3 and returns the fuzzer's exit status.
run_for_cpu_seconds() {
  "$@" &
  local pid=$! used=0
  while kill -0 "$pid" 2>/dev/null; do
    used=$(cpu_seconds_of "$pid") || break
    if [ "$used" -ge "$seconds" ]; then
      kill -USR1 "$pid" 2>/dev/null || true
      break
    fi
    sleep 2
  done
  local rc=0
  wait "$pid" || rc=$?
  echo "$used" >&3
  return $rc
}

SECONDS=0
for t in "${targets[@]}"; do
  src=tests/fuzz/$t.cpp
  [ -f "$src" ] || { echo "fuzz.sh: no target $src" >&2; exit 2; }
  if [ ! -x "$out/$t" ] || [ -n "$(find include examples/gpt_fineweb "$src" -newer "$out/$t" -print -quit)" ]; then
    # -O1 -g1: the sanitizers' cost is in compile time here (nlohmann_json, the tokenizer).
    "$CXX_FUZZ" -std=c++20 -O1 -g1 -fno-omit-frame-pointer \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -Iinclude -Iexamples/gpt_fineweb -isystem /usr/include/eigen3 -DTRAINKIT_FUZZ_VOCAB_DIR="\"$vocab\"" \
      "$src" -o "$out/$t" -lutf8proc -pthread
  fi
  mkdir -p "$out/corpus/$t"
  # Regression inputs (crashes found and fixed) are replayed first; each must pass.
  if [ -d "tests/fuzz/regressions/$t" ] && [ -n "$(ls -A "tests/fuzz/regressions/$t")" ]; then
    "$out/$t" -runs=0 "tests/fuzz/regressions/$t"/* >"$out/$t.regressions.log" 2>&1 ||
      { cat "$out/$t.regressions.log" >&2; echo "fuzz.sh: $t fails a regression input" >&2; exit 1; }
  fi
  start=$SECONDS
  fuzzer=("$out/$t" -timeout=10 -rss_limit_mb=2048 -max_len=65536
    -artifact_prefix="$out/crash-$t-" -print_final_stats=1 "$out/corpus/$t" "tests/fuzz/corpus/$t")
  rc=0
  cpu=?
  if [ $cpu_budget -eq 1 ]; then
    run_for_cpu_seconds "${fuzzer[@]}" >"$out/$t.log" 2>&1 3>"$out/$t.cpu" || rc=$?
    cpu=$(cat "$out/$t.cpu")
  else
    "${fuzzer[@]}" -max_total_time="$seconds" >"$out/$t.log" 2>&1 || rc=$?
  fi
  if [ $rc -ne 0 ]; then
    tail -n 60 "$out/$t.log" >&2
    echo "fuzz.sh: $t crashed; input saved as $out/crash-$t-*" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log" | tail -1)
  printf 'fuzz.sh: %-22s %5d s wall, %s CPU s, %s inputs, no crash\n' "$t" $((SECONDS - start)) \
    "$cpu" "${runs:-?}"
done
echo "fuzz.sh: ${#targets[@]} targets in ${SECONDS} s"
