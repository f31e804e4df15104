#!/usr/bin/env bash
# bench/gpu_check.sh — the one command for an H200 session: every GPU test, the GPU benchmarks and
# short gpt_fineweb --device cuda runs, with a short table printed last.
#
# The device machine has nvcc, CMake and ninja but no Eigen, Boost, GoogleTest, CLI11, nlohmann or
# Google Benchmark, so nothing is built there: binaries are built HERE and carried.
#
#   bench/gpu_check.sh --build   (here) configure build-gpu-tree/ for sm_90a with static cudart,
#                                build the GPU tests, the GPU benchmarks and gpt_fineweb, and copy
#                                them, stripped, into build-gpu/bin plus the shared libraries they
#                                need that a bare CUDA machine lacks into build-gpu/lib (checked
#                                to stay under the device tool's 64 MiB carry limit).
#   bench/gpu_check.sh           (there) run everything from build-gpu/; logs, metrics and the
#                                summary go to $OUT (one tarball + summary.txt: the device tool
#                                returns at most 8 files), or stay in /tmp/gpu-check.* without $OUT.
#
# Device tool call (bench/RESULTS.md): run(command="bench/gpu_check.sh", carry=["build-gpu"],
# timeout_s=600). The whole run is sized for < 8 minutes on one H200; each step has its own
# timeout so one hang cannot eat the budget.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
carry=$root/build-gpu
tree=${GPU_BUILD_TREE:-$root/build-gpu-tree}  # an existing CUDA build tree may be reused
tests=(test_cuda_core test_pinned_prefetcher test_adamw_cuda test_cuda_kernels test_cuda_gpt2
       test_cuda_training test_cuda_flash_attention)
benches=(bench_gpu_prefetch bench_gpu_training bench_gpu_attention)
programs=(gpt_fineweb)

if [[ ${1:-} == --build ]]; then
  set -e
  cmake -S "$root" -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINKIT_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DTRAINKIT_BUILD_TESTS=ON -DTRAINKIT_BUILD_BENCH=ON \
    -DTRAINKIT_BUILD_EXAMPLES=ON
  cmake --build "$tree" --target "${tests[@]}" "${benches[@]}" "${programs[@]}" -j"${JOBS:-1}"
  rm -rf "$carry"
  mkdir -p "$carry/bin" "$carry/lib"
  for t in "${tests[@]}" "${benches[@]}" "${programs[@]}"; do
    bin=$(find "$tree" -type f -name "$t" -perm -u+x | head -n1)
    [[ -n $bin ]] || { echo "gpu_check: $t was not built" >&2; exit 1; }
    cp "$bin" "$carry/bin/$t"
    strip "$carry/bin/$t"
  done
  # Shared libraries a bare CUDA machine may lack (utf8proc, libgomp; libstdc++ in case its is
  # older). glibc stays the machine's own; cublasLt comes from its CUDA toolkit (too big to carry).
  for lib in $(ldd "$carry"/bin/* | awk '/=>/ {print $3}' | sort -u); do
    case $(basename "$lib") in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcublas*|libcuda*) ;;
      *) cp -L "$lib" "$carry/lib/" ;;
    esac
  done
  git -C "$root" rev-parse HEAD > "$carry/COMMIT" 2>/dev/null || true
  size_mb=$(du -sm "$carry" | cut -f1)
  echo "build-gpu: ${size_mb} MiB ($(ls "$carry/bin" | wc -l) binaries, libs: $(ls "$carry/lib" | tr '\n' ' '))"
  if (( size_mb > 56 )); then
    echo "gpu_check: build-gpu is ${size_mb} MiB; the device tool carries 64 MiB with the repo" >&2
    exit 1
  fi
  exit 0
fi

# ---- on the device machine ---------------------------------------------------------------------
[[ -x $carry/bin/test_cuda_core ]] || {
  echo "gpu_check: $carry/bin is missing: run bench/gpu_check.sh --build here and carry build-gpu"
  exit 2
}
logs=$(mktemp -d /tmp/gpu-check.XXXXXX)
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
# cublasLt is not carried: say at once if the machine's toolkit does not provide it.
if missing=$(ldd "$carry"/bin/* 2>/dev/null | grep "not found" | sort -u) && [[ -n $missing ]]; then
  echo "gpu_check: shared libraries not found (add their folder to LD_LIBRARY_PATH):"
  echo "$missing"
fi
start_all=$SECONDS
summary=()

note() { printf '%s\n' "$*" | tee -a "$logs/summary.txt"; }

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || true; } \
  | sed 's/^/gpu: /' | tee -a "$logs/summary.txt"
note "build: $(cat "$carry/COMMIT" 2>/dev/null || echo unknown)"

# step NAME TIMEOUT CMD...: runs CMD with its log in $logs/NAME.log, records status and seconds.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "==== $name: $*" >"$logs/$name.log"
  timeout --kill-after=10 "$limit" "$@" >>"$logs/$name.log" 2>&1
  local rc=$?
  local secs=$((SECONDS - t0)) status=ok detail=""
  if [[ $name == test_* ]]; then
    local passed skipped failed
    passed=$(grep -Eo '\[  PASSED  \] [0-9]+' "$logs/$name.log" | grep -Eo '[0-9]+$' | tail -n1)
    skipped=$(grep -Eo '\[  SKIPPED \] [0-9]+' "$logs/$name.log" | grep -Eo '[0-9]+$' | tail -n1)
    failed=$(grep -Eo '\[  FAILED  \] [0-9]+ tests?, listed below' "$logs/$name.log" | grep -Eo '[0-9]+' | tail -n1)
    detail="passed ${passed:-0} skipped ${skipped:-0} failed ${failed:-0}"
  fi
  if (( rc == 124 || rc == 137 )); then status="TIMEOUT"; elif (( rc != 0 )); then status="FAIL($rc)"; fi
  summary+=("$(printf '%-28s %-9s %5ss  %s' "$name" "$status" "$secs" "$detail")")
  tail -n 25 "$logs/$name.log"
}

for t in "${tests[@]}"; do
  limit=150
  [[ $t == test_cuda_training ]] && limit=200
  step "$t" "$limit" "$carry/bin/$t" --gtest_color=no
done

step bench_gpu_prefetch 90 "$carry/bin/bench_gpu_prefetch"
step bench_gpu_training 200 "$carry/bin/bench_gpu_training"
step bench_gpu_attention 120 "$carry/bin/bench_gpu_attention"

fw=$carry/bin/gpt_fineweb
ck=$(mktemp -d /tmp/gpu-check-ckpt.XXXXXX)
# d12 with gradient accumulation (8 micro-batches of 4x1024; the embedded validation split holds
# 7307 tokens, so B*T must stay below that).
step fineweb_d12_30steps 150 "$fw" --device cuda --model d12 --batch 4 --seq 1024 --steps 30 \
  --total-batch-tokens 32768 \
  --lr 6e-4 --warmup 5 --eval-every 0 --eval-batches 2 --no-progress --log-every 5 \
  --metrics "$logs/metrics_d12.jsonl"
step fineweb_d2_sync_ckpt 60 "$fw" --device cuda --model d2 --steps 20 --ckpt-mode sync \
  --ckpt-dir "$ck/sync" --ckpt-every 10 --no-progress --log-every 10
step fineweb_d2_sync_resume 60 "$fw" --device cuda --model d2 --steps 30 --ckpt-mode sync \
  --ckpt-dir "$ck/sync" --resume --no-progress --log-every 10 --export "$ck/d2.bin"
step fineweb_d2_init_from 60 "$fw" --device cuda --init-from "$ck/d2.bin" --steps 5 \
  --no-progress --log-every 5
step fineweb_d2_async_ckpt 60 "$fw" --device cuda --model d2 --steps 20 --ckpt-mode async \
  --ckpt-dir "$ck/async" --ckpt-every 5 --no-progress --log-every 10
rm -rf "$ck"

{
  echo
  echo "---- benchmark tables ----"
  sed -n '/^pinned_prefetcher<4>/,$p' "$logs/bench_gpu_prefetch.log"
  sed -n '/^case /,$p' "$logs/bench_gpu_training.log"
  grep -h "^---- report ----" -A 12 "$logs/fineweb_d12_30steps.log" | head -n 14
  echo
  echo "---- gpu_check summary ($((SECONDS - start_all)) s) ----"
  printf '%s\n' "${summary[@]}"
} | tee -a "$logs/summary.txt"

if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT"
  cp "$logs/summary.txt" "$OUT/summary.txt"
  tar -czf "$OUT/gpu_check_logs.tar.gz" -C "$logs" .
  echo "logs: $OUT/gpu_check_logs.tar.gz, summary: $OUT/summary.txt"
else
  echo "logs: $logs (set OUT to collect them as one tarball)"
fi
failed=0
for line in "${summary[@]}"; do [[ $line == *" ok "* ]] || failed=1; done
exit $failed
