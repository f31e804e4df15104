#!/usr/bin/env bash
# scripts/fuzz.sh — builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and runs
# each for a bounded time over a copy of its committed seed corpus.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET=20] [TARGET...]
#
# Targets: every tests/fuzz/fuzz_*.cpp (all by default). Binaries go to build-fuzz/ and the growing
# corpora to build-fuzz/corpus/<target> (the committed seeds in tests/fuzz/corpus/<target> are read,
# never written). A crash stops the script with exit 1 and leaves the input as
# build-fuzz/crash-<target>-*: fix the bug, then commit that input under
# tests/fuzz/regressions/<target>/, which every run replays first. The GPT-2 vocabulary comes from
# $TRAINKIT_GPT2_VOCAB or ../shared/data/gpt2 (the tokenizer targets need it).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
vocab=${TRAINKIT_GPT2_VOCAB:-$(cd .. && pwd)/shared/data/gpt2}
CXX_FUZZ=${CXX_FUZZ:-clang++}
out=build-fuzz
mkdir -p "$out/corpus"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
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
  if ! "$out/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$out/crash-$t-" -print_final_stats=1 \
      "$out/corpus/$t" "tests/fuzz/corpus/$t" >"$out/$t.log" 2>&1; then
    tail -n 60 "$out/$t.log" >&2
    echo "fuzz.sh: $t crashed; input saved as $out/crash-$t-*" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log" | tail -1)
  printf 'fuzz.sh: %-22s %5d s, %s inputs, no crash\n' "$t" $((SECONDS - start)) "${runs:-?}"
done
echo "fuzz.sh: ${#targets[@]} targets in ${SECONDS} s"
