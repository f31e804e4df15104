#!/usr/bin/env bash
# bench/gpu_check.sh — the one command for a lent H200: every GPU test, the training benchmark
# beside a PyTorch reference on the same shapes (and eager vs CUDA-graph replay), a per-kernel
# profile, attention engines side by side (trainkit's flash, cuDNN, PyTorch's SDPA), bounded
# compute-sanitizer passes and short gpt_fineweb --device cuda runs, sized to answer
# everything in one device-tool call of at most 420 s, leaving time in a 15-minute lease for a
# second, shorter call (GPU_CHECK_ONLY) that reruns what failed.
#
# The device machine has nvcc, CMake and PyTorch but no Eigen, Boost, GoogleTest, CLI11, nlohmann
# or MPI daemons, so nothing is built there: binaries are built HERE and carried.
#
#   bench/gpu_check.sh --build     (here) build the GPU binaries for sm_90a (static cudart) into
#                                  build-gpu/: bin.tar.gz holding bin/ (stripped) and lib/ (shared
#                                  libraries a bare CUDA machine may lack; lib/fallback/: libstdc++
#                                  and libgcc_s, used only if the machine's own are too old),
#                                  unpacked into /tmp by the run; torch_reference.py,
#                                  torch_attention.py, golden/ (the fixtures), COMMIT. Fails above 56 MiB (the tool
#                                  carries 64 MiB in all).
#   bench/gpu_check.sh             (there) run everything from build-gpu/.
#   bench/gpu_check.sh --dry-run   the same with the GPU hidden (CUDA_VISIBLE_DEVICES=""): every
#                                  GPU step must then report FAIL; checks the script itself and
#                                  prints the budget and the rows. GPU_CHECK_REQUIRE_GPU=0 leaves
#                                  the tests' skips as skips (the script must still say
#                                  FAIL(skipped)); GPU_CHECK_BUDGET=S runs under a smaller budget
#                                  (later steps then say NOT-RUN).
#   Environment: OUT (where the files go), GPU_BUILD_TREE (reuse a CUDA build tree for --build),
#   JOBS (build parallelism, 1 by default), GPU_CHECK_ONLY (an extended regex: only the steps whose
#   names match run, the others say NOT-RUN "not selected"; for a second call), GPU_CHECK_CARRY
#   (the carried folder, build-gpu by default) and GPU_CHECK_STEP_CAP (S: no step runs longer)
#   for the script's own CPU test, tests/bench/test_gpu_check.py, which runs it over stubs;
#   GPU_CHECK_SANITIZER (the compute-sanitizer to use; else the one on PATH or in
#   /usr/local/cuda/bin).
#
# Reliability rules (an earlier version could lose a whole call):
#  - the whole run is budgeted to GPU_CHECK_BUDGET seconds (420; call with timeout_s=450), each
#    step has its own limit, the limits sum to the budget, and a step never runs past what is
#    left of it;
#  - $OUT/summary.txt (the table so far, with one line per gtest test under its step) and
#    $OUT/gpu_check.log (every step's full output) are written as the run goes: a run killed
#    half-way still returns everything done so far;
#  - TRAINKIT_REQUIRE_GPU=1 turns a test's no-device skip into a failure, and a test binary with
#    skipped tests or 0 passed is reported FAIL, never ok;
#  - each kernel test runs in its own process with CUDA_LAUNCH_BLOCKING=1, so a device fault names
#    its kernel and cannot poison the tests after it; the NCCL tests run early as their own row;
#  - every library the binaries load (cuBLAS/cuBLASLt, cuDNN and the NVRTC it dlopens, NCCL) is
#    located and logged; the carried libstdc++ never goes ahead of the machine's own unless the
#    machine's is too old for the binaries; NCCL_DEBUG=WARN;
#  - compute-sanitizer (memcheck, racecheck, synccheck) runs over small cases of the flash
#    kernels, the Llama kernels and a few GPT-2 kernels, under its own limit, and a sanitizer that
#    cannot attach (a sandbox refusing it) is reported as "refused", not as a kernel failure;
#  - no row depends on another: a failing, hanging or crashing program costs its own row only
#    (tests/bench/test_gpu_check.py checks it on the CPU with stubs);
#  - what one GPU or this build cannot run (the 2-rank sharded Muon test; without cudnn-frontend,
#    the cuDNN cases) is left out by --gtest_filter and reported "na", neither ok nor failed;
#  - every row that runs attention names the engine (attention=cudnn|flash|naive|sdpa-...).
# Files in $OUT (the tool returns at most 8): summary.txt, gpu_check.log, rows.tsv (name, status,
# seconds, detail: one line per row), metrics_d12.jsonl, profile.txt. Without $OUT they go to a
# fresh /tmp/gpu-check.* folder.
#
# Device tool call (bench/RESULTS.md), naming the kind (the d48 B=16 memory goal needs the
# H200's 139 GiB; an H100 has 80): run(command="bench/gpu_check.sh", carry=["build-gpu"],
# kind="nvidia-h200", timeout_s=450). A rerun of what failed:
# run(command="GPU_CHECK_ONLY='nccl|gpt2' GPU_CHECK_BUDGET=150 bench/gpu_check.sh", ...).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
carry=${GPU_CHECK_CARRY:-$root/build-gpu}  # tests/bench/test_gpu_check.py points it at stubs
tree=${GPU_BUILD_TREE:-$root/build-gpu-tree}  # an existing CUDA build tree may be reused
kernel_tests=(test_cuda_kernels test_cuda_llama_kernels test_adamw_cuda)  # one process per test
tests=(test_cuda_core test_pinned_prefetcher test_cuda_stager test_cuda_kernels test_cuda_llama_kernels test_adamw_cuda test_cuda_gpt2
       test_cuda_golden test_cuda_training test_cuda_link test_cuda_flash_attention test_muon_cuda
       test_muon_cuda_step test_cuda_llama)
benches=(bench_gpu_prefetch bench_gpu_training profile_kernels bench_gpu_attention)
programs=(gpt_fineweb)

mode=run
case ${1:-} in
  --build) mode=build ;;
  --dry-run) mode=dry ;;
  "") ;;
  *) echo "usage: bench/gpu_check.sh [--build | --dry-run]" >&2; exit 2 ;;
esac

if [[ $mode == build ]]; then
  set -e
  cmake -S "$root" -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINKIT_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DTRAINKIT_BUILD_TESTS=ON -DTRAINKIT_BUILD_BENCH=ON \
    -DTRAINKIT_BUILD_EXAMPLES=ON
  # Optional targets, from one listing (grep -q on a pipe would end it early: SIGPIPE, and under
  # pipefail the test fails although the name was found).
  targets=$(cmake --build "$tree" --target help)
  has_target() { grep -q "^$1:" <<<"$targets"; }
  # cuDNN's attention test exists when CMake found cudnn-frontend (pip install nvidia-cudnn-frontend).
  if has_target test_cuda_cudnn_attention; then
    tests+=(test_cuda_cudnn_attention)
  else
    echo "gpu_check: no cudnn-frontend here: test_cuda_cudnn_attention and the cudnn cases not built"
  fi
  # The NCCL reducers' pre-multiplied-sum test exists when CMake found NCCL.
  if has_target test_nccl_premul; then
    tests+=(test_nccl_premul)
  fi
  # Sharded Muon over NCCL (one rank here: against muon_cuda, its state split, its resumes).
  if has_target test_sharded_muon_cuda; then
    tests+=(test_sharded_muon_cuda)
  fi
  cmake --build "$tree" --target "${tests[@]}" "${benches[@]}" "${programs[@]}" -j"${JOBS:-1}"
  rm -rf "$carry"
  mkdir -p "$carry/bin" "$carry/lib"
  for t in "${tests[@]}" "${benches[@]}" "${programs[@]}"; do
    bin=$(find "$tree" -type f -name "$t" -perm -u+x | head -n1)
    [[ -n $bin ]] || { echo "gpu_check: $t was not built" >&2; exit 1; }
    cp "$bin" "$carry/bin/$t"
    strip "$carry/bin/$t"
  done
  # Shared libraries a bare CUDA machine may lack (utf8proc, libgomp, Open MPI's for gpt_fineweb's
  # --reducer mpi; libstdc++ in case its is older, kept apart in lib/fallback). glibc stays the machine's own; cuBLASLt,
  # cuDNN, NVRTC (cuDNN's run-time engines) and NCCL are found there or in its PyTorch
  # environment's nvidia/*/lib (too big to carry: libnccl alone is ~200 MiB, libnvrtc ~105 MiB).
  for lib in $(ldd "$carry"/bin/* | awk '/=>/ {print $3}' | sort -u); do
    case $(basename "$lib") in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcublas*|libcuda*|libcudnn*|libnvrtc*|libnccl*) ;;
      # Only if the machine's own are too old: never ahead of them (PyTorch and the driver's
      # libraries load the machine's).
      libstdc++.so.*|libgcc_s.so.*) mkdir -p "$carry/lib/fallback" && cp -L "$lib" "$carry/lib/fallback/" ;;
      *) cp -L "$lib" "$carry/lib/" ;;
    esac
  done
  cp "$root/bench/gpu/torch_reference.py" "$root/bench/gpu/torch_attention.py" "$carry/"
  cp -r "$root/tests/fixtures/golden" "$carry/golden"
  git -C "$root" rev-parse HEAD > "$carry/COMMIT" 2>/dev/null || true
  listing="$(ls "$carry/bin" | wc -l) binaries, libs: $(ls "$carry/lib" "$carry/lib/fallback" 2>/dev/null | tr '\n' ' ')"
  unpacked_mb=$(du -sm "$carry/bin" "$carry/lib" | awk '{s += $1} END {print s}')
  # Carried packed (each binary holds its own cudart and kernels: ~2.6x smaller gzipped); the
  # device run unpacks bin/ and lib/ first (under a second).
  tar -C "$carry" -czf "$carry/bin.tar.gz" bin lib
  rm -rf "$carry/bin" "$carry/lib"
  size_mb=$(du -sm "$carry" | cut -f1)
  echo "build-gpu: ${size_mb} MiB carried (${unpacked_mb} MiB unpacked; ${listing})"
  if (( size_mb > 56 )); then
    echo "gpu_check: build-gpu is ${size_mb} MiB; the device tool carries 64 MiB with the repo" >&2
    exit 1
  fi
  exit 0
fi

# ---- on the device machine (or a dry run) ------------------------------------------------------
# Unpack the carried binaries and libraries into a temporary folder beside links to the rest of
# the carry (never into build-gpu/ itself: a dry run here would then carry them twice).
if [[ -f $carry/bin.tar.gz ]]; then
  unpacked=$(mktemp -d /tmp/gpu-check-carry.XXXXXX)
  for f in "$carry"/*; do [[ $f == */bin.tar.gz ]] || ln -s "$f" "$unpacked/"; done
  tar -C "$unpacked" -xzf "$carry/bin.tar.gz" || { echo "gpu_check: cannot unpack $carry/bin.tar.gz"; exit 2; }
  carry=$unpacked
fi
[[ -x $carry/bin/test_cuda_core ]] || {
  echo "gpu_check: $carry/bin is missing: run bench/gpu_check.sh --build here and carry build-gpu"
  exit 2
}
out=${OUT:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
mkdir -p "$out"
log=$out/gpu_check.log
summary=$out/summary.txt
: >"$log"
: >"$out/rows.tsv"
budget=${GPU_CHECK_BUDGET:-420}
only=${GPU_CHECK_ONLY:-}
start_all=$SECONDS
# GPU_CHECK_REQUIRE_GPU=0 (dry runs only) leaves no-device skips as skips, to check that the
# script itself reports a skipping binary as FAIL.
export TRAINKIT_REQUIRE_GPU=${GPU_CHECK_REQUIRE_GPU:-1}
[[ $mode == run ]] && export TRAINKIT_REQUIRE_GPU=1
export TRAINKIT_GOLDEN_DIR=$carry/golden
# The Llama golden sets travel with the repository (tracked files): test_cuda_llama reads hs64/.
export TRAINKIT_LLAMA_GOLDEN_DIR=$root/tests/fixtures/llama
export TRAINKIT_MUON_FIXTURES_DIR=$root/tests/fixtures/muon  # tracked files travel with the tree
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
export PYTHONUNBUFFERED=1
export NCCL_DEBUG=WARN  # NCCL's own warnings in the log; INFO would drown it
[[ $mode == dry ]] && export CUDA_VISIBLE_DEVICES=""

header=()
rows=()
say() { printf '%s\n' "$*" | tee -a "$log"; header+=("$*"); }

write_summary() {
  {
    printf '%s\n' "${header[@]}"
    printf '%-66s %-16s %5s  %s\n' step status secs detail
    printf '%s\n' "${rows[@]}"
    printf 'elapsed %ss of a %ss budget\n' "$((SECONDS - start_all))" "$budget"
  } >"$summary.tmp" && mv "$summary.tmp" "$summary"
}

# ---- machine, driver, libraries -----------------------------------------------------------------
say "gpu_check $(date -u +%FT%TZ) mode=$mode build=$(cat "$carry/COMMIT" 2>/dev/null || echo unknown)"
gpu_name=""
if command -v nvidia-smi >/dev/null 2>&1; then
  say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | head -n1)"
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
else
  say "gpu: nvidia-smi not found"
fi
case $gpu_name in
  *H200*) say "machine kind: nvidia-h200 (every goal measurable)" ;;
  *H100*) say "machine kind: nvidia-h100-x1 — WARNING: ~80 GiB, so the d48 B=16 memory goal and its timing cannot be measured here (call with kind=\"nvidia-h200\")" ;;
  "") say "machine kind: unknown (no GPU name)" ;;
  *) say "machine kind: other ($gpu_name): the goals are stated for an H200" ;;
esac
say "nvcc: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || true) python3: $(python3 -c 'import importlib.metadata as m; print("torch", m.version("torch"))' 2>/dev/null || echo 'no torch')"

# cuBLASLt (and cuDNN, for the attention paths that use it) from the CUDA toolkit, else from the
# PyTorch environment's nvidia/*/lib folders; the first folder that holds the library wins.
toolkit_dirs=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu)
torch_dirs=()
if nv=$(python3 -c 'import nvidia, os; print("\n".join(nvidia.__path__))' 2>/dev/null); then
  while IFS= read -r d; do
    for l in "$d"/*/lib; do [[ -d $l ]] && torch_dirs+=("$l"); done
  done <<<"$nv"
fi
libpath=$carry/lib
find_lib() {  # find_lib SONAME: adds its folder to libpath and says where it came from
  local so=$1 d
  for d in "${toolkit_dirs[@]}"; do
    if [[ -e $d/$so ]]; then libpath+=:$d; say "lib: $so from the toolkit ($d)"; return 0; fi
  done
  for d in "${torch_dirs[@]}"; do
    if [[ -e $d/$so ]]; then libpath+=:$d; say "lib: $so from the PyTorch env ($d)"; return 0; fi
  done
  say "lib: $so NOT FOUND (toolkit: ${toolkit_dirs[*]}; PyTorch env: ${torch_dirs[*]:-none})"
  return 1
}
# Every library the binaries load, and where from. Linked ones (ldd): cuBLAS/cuBLASLt, cuDNN
# (test_cuda_gpt2, gpt_fineweb with cuDNN attention), NCCL (test_cuda_training, gpt_fineweb).
# Loaded at run time, invisible to ldd: NVRTC and cuDNN's engine libraries (cuDNN dlopens them).
deps=$(LD_LIBRARY_PATH=$carry/lib ldd "$carry"/bin/* 2>/dev/null)
needed=$(awk '/not found/ {print $1}' <<<"$deps" | sort -u)
for so in $needed; do
  case $so in libstdc++.so.*|libgcc_s.so.*) continue ;; esac  # the fallback's business, below
  find_lib "$so" || true
done
nvrtc=""
for d in "${toolkit_dirs[@]}" "${torch_dirs[@]}"; do
  nvrtc=$(ls "$d"/libnvrtc.so.[0-9]* 2>/dev/null | grep -v builtins | head -n1)
  [[ -n $nvrtc ]] && break
done
if [[ -n $nvrtc ]]; then
  libpath+=:$(dirname "$nvrtc")
  say "lib: $(basename "$nvrtc") (cuDNN loads it at run time) from $(dirname "$nvrtc")"
else
  say "lib: libnvrtc NOT FOUND: cuDNN's run-time-compiled engines will fail"
fi
ldconfig -p 2>/dev/null | grep -q 'libcudnn.so.9 ' || grep -q 'libcudnn.so' <<<"$deps" ||
  find_lib libcudnn.so.9 || true
# libstdc++: the machine's own unless it lacks a version the binaries need.
if grep -Eq "libstdc\+\+.*not found|GLIBCXX_[0-9.]+' not found|libgcc_s.*not found" \
  <<<"$(LD_LIBRARY_PATH=$libpath ldd "$carry"/bin/* 2>&1)"; then
  libpath+=:$carry/lib/fallback
  say "lib: the machine's libstdc++ is too old for the binaries: the carried one (lib/fallback) is used"
else
  say "lib: libstdc++ is the machine's own"
fi
# PyTorch keeps the machine's own library path: the carried libraries are for our binaries.
host_ld=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
resolved=$(ldd "$carry"/bin/* 2>/dev/null)
for so in $(awk '/(libcublas|libcudnn|libnccl|libnvrtc|libstdc\+\+|libcudart)/ && /=>/ && !/not found/ {print $1 "=" $3}' <<<"$resolved" | sort -u -t= -k1,1); do
  say "lib: ${so%%=*} => ${so#*=}"
done
cudnn_dir=$(awk '/libcudnn\.so/ && /=>/ && !/not found/ {print $3; exit}' <<<"$resolved")
[[ -n $cudnn_dir ]] && say "lib: cuDNN's engines (dlopened): $(ls "$(dirname "$cudnn_dir")"/libcudnn_engines_* 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')"
still=$(awk '/not found/ {print $1}' <<<"$resolved" | sort -u | tr '\n' ' ')
[[ -n $still ]] && say "lib: still missing after the search: $still"
write_summary

# ---- one step -----------------------------------------------------------------------------------
# step NAME LIMIT KIND CMD...  KIND: gtest (counts parsed; skips, failures and 0 passed are FAIL),
# sanitizer (compute-sanitizer over a gtest binary: its findings fail the step, a sanitizer that
# cannot attach says "refused", then the gtest rules), or a regex the output must match for the
# step to be ok. The step's output goes to $log as it is written; its last lines go to stdout.
# attn=ENGINE before the call names the attention engine the step runs in its row (attention=...);
# attn=parse takes it from the output ("| attention cudnn |", gpt_fineweb's header line).
# GPU_CHECK_STEP_CAP=S caps every step's limit (the script's own CPU test: a hanging stub costs S).
last_output=""
cap=${GPU_CHECK_STEP_CAP:-0}
statuses=()  # each step's status, for the verdict (rows also holds the per-test lines)
row() {  # row NAME STATUS SECS DETAIL: one line of the table (and of rows.tsv, for scripts)
  statuses+=("$2")
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$out/rows.tsv"
  rows+=("$(printf '%-66s %-16s %5s  %s' "$1" "$2" "$3" "$4")")
  write_summary
}
gtest_status() {  # gtest_status RC OUTPUT: sets status (unless already a failure) and detail
  local passed skipped failed
  passed=$(grep -Eo '\[  PASSED  \] [0-9]+' <<<"$2" | grep -Eo '[0-9]+$' | tail -n1)
  skipped=$(grep -Eo '\[  SKIPPED \] [0-9]+' <<<"$2" | grep -Eo '[0-9]+$' | tail -n1)
  failed=$(grep -Eo '\[  FAILED  \] [0-9]+ tests?, listed below' <<<"$2" | grep -Eo '[0-9]+' | head -n1)
  passed=${passed:-0} skipped=${skipped:-0} failed=${failed:-0}
  detail="passed $passed skipped $skipped failed $failed${detail:+ $detail}"
  [[ $status == ok ]] || return 0
  if (($1 == 124 || $1 == 137)); then status=TIMEOUT
  elif (($1 != 0 || failed > 0)); then status="FAIL(rc=$1)"
  elif ((skipped > 0)); then status="FAIL(skipped)"
  elif ((passed == 0)); then status="FAIL(0 passed)"
  fi
}
step() {
  local name=$1 limit=$2 kind=$3
  shift 3
  if [[ -n $only ]] && ! grep -Eq -- "$only" <<<"$name"; then
    row "$name" NOT-RUN 0 "not selected (GPU_CHECK_ONLY)"
    return
  fi
  local left=$((budget - (SECONDS - start_all) - 6))  # timeout's kill-after grace
  if ((left < 3)); then
    row "$name" NOT-RUN 0 "budget spent"
    return
  fi
  ((limit > left)) && limit=$left
  ((cap > 0 && limit > cap)) && limit=$cap
  local offset t0=$SECONDS
  offset=$(stat -c %s "$log")
  printf '\n==== %s (limit %ss): %s\n' "$name" "$limit" "$*" >>"$log"
  timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1 </dev/null
  local rc=$? secs=$((SECONDS - t0)) status=ok detail=""
  last_output=$(tail -c +$((offset + 1)) "$log")
  if [[ $kind == gtest ]]; then
    gtest_status "$rc" "$last_output"
  elif [[ $kind == sanitizer ]]; then
    # A finding (memcheck's Invalid/Misaligned/Out-of-range accesses and hardware exceptions,
    # racecheck's hazards, synccheck's barrier errors, or a nonzero summary) fails the step. The
    # sanitizer's own errors without one ("========= Error: ...": cannot attach, device not
    # supported, not permitted) are a refusal, not a finding.
    # (Racecheck's warnings, possible hazards, are logged but not counted.)
    local finding='^========= (Invalid |Program hit|Out-of-range|Misaligned|Barrier error|Error: Race)|ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: .*\([1-9][0-9]* error'
    if grep -Eq "$finding" <<<"$last_output"; then
      status="FAIL(findings)"
      detail=$(grep -Em1 "$finding" <<<"$last_output" | cut -c1-60)
    elif grep -Eq '^========= (Error|Internal Sanitizer Error)' <<<"$last_output"; then
      status=refused
      detail=$(grep -Em1 '^========= (Error|Internal Sanitizer Error)' <<<"$last_output" | cut -c1-60)
    else
      gtest_status "$rc" "$last_output"
    fi
  else
    if ((rc == 124 || rc == 137)); then status=TIMEOUT
    elif ((rc != 0)); then status="FAIL(rc=$rc)"
    elif ! grep -Eq "$kind" <<<"$last_output"; then status="FAIL(no result)"
    fi
  fi
  local engine=${attn:-}
  if [[ $engine == parse ]]; then
    engine=$(sed -En 's/.*\| attention ([a-z-]+) \|.*/\1/p' <<<"$last_output" | head -n1)
    engine=${engine:-unknown}
  fi
  [[ -n $engine ]] && detail+="${detail:+ }attention=$engine"
  row "$name" "$status" "$secs" "$detail"
  if [[ $kind == gtest || $kind == sanitizer ]]; then  # one line per test under its step
    local per_test
    per_test=$(sed -n 's/^\[ *\(OK\|FAILED\|SKIPPED\) *\] \([A-Za-z0-9_./-]*\) (\([0-9]*\) ms)$/    · \2 \1 \3 ms/p' <<<"$last_output")
    if (($(grep -c . <<<"$per_test") > 1)); then  # a one-test step's row says it all
      while IFS= read -r line; do rows+=("$line"); done <<<"$per_test"
      write_summary
    fi
  fi
  printf '==== %s: %s (%ss) %s\n' "$name" "$status" "$secs" "$detail"
  tail -n 8 <<<"$last_output"
}

bin=$carry/bin
num() {  # num LINE KEY: the value of KEY=... in a result line, "-" when absent
  local v
  v=$(sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1")
  printf '%s' "${v:--}"
}
# Limits (seconds); they sum to the budget (checked below). Every figure is a guess until a first
# GPU run times them. Issue 36 made room for the compute-sanitizer rows (48), PyTorch's d48 row
# (its share was 25 s, below the 30 s it needs) and SDPA beside the attention benchmark by taking
# a few seconds from every other row.
lim_core=10 lim_nccl=15 lim_premul=8 lim_shmuon=8 lim_kernels=32 lim_flash=16 lim_cudnn=8
lim_prefetch=6 lim_stager=6 lim_gpt2=20 lim_golden=8 lim_llama=15 lim_muon_ns=4 lim_muon=8
lim_training=16 lim_link=3 lim_bench=30 lim_graph=10 lim_llama_bench=16 lim_torch=55
lim_llama_torch=18 lim_profile=5 lim_attn=18 lim_sanitize=48 lim_fineweb=37
# PyTorch's GPT-2: d12 first (at most torch_d12 s), then d48 when at least torch_d48_min s remain:
# the share holds both (the earlier 25 s share could never start d48).
torch_d12=25 torch_d48_min=30
((lim_torch >= torch_d12 + torch_d48_min)) || { say "gpu_check: lim_torch < torch_d12 + torch_d48_min"; exit 2; }
sum=$((lim_core + lim_nccl + lim_premul + lim_shmuon + lim_kernels + lim_flash + lim_cudnn + lim_prefetch +
  lim_stager + lim_gpt2 + lim_golden + lim_llama + lim_muon_ns + lim_muon + lim_training + lim_link +
  lim_bench + lim_graph + lim_llama_bench + lim_torch + lim_llama_torch + lim_profile + lim_attn +
  lim_sanitize + lim_fineweb))
say "budget: core $lim_core + nccl $lim_nccl + nccl premul $lim_premul + sharded muon $lim_shmuon + kernels $lim_kernels + flash $lim_flash + cudnn $lim_cudnn + prefetch $lim_prefetch + stager $lim_stager + gpt2 $lim_gpt2 + golden $lim_golden + llama $lim_llama + muon ns $lim_muon_ns + muon step $lim_muon + training $lim_training + link $lim_link + bench $lim_bench + graph bench $lim_graph + llama bench (d12, d24) $lim_llama_bench + torch $lim_torch (d12 <= $torch_d12, then d48) + torch llama d12 $lim_llama_torch + profile $lim_profile + attention bench + SDPA $lim_attn + compute-sanitizer $lim_sanitize + fineweb $lim_fineweb = ${sum}s; budget ${budget}s (each step is also cut to what is left of the budget); call with timeout_s=450"
if ((sum > 420)); then  # one device-tool call of <= 420 s leaves a second, shorter one in 15 minutes
  say "gpu_check: the step limits exceed 420 s; fix the lim_* values"
  write_summary
  exit 2
fi
[[ -n $only ]] && say "only the steps matching /$only/ run (GPU_CHECK_ONLY)"
# cuDNN attention is in the build when cudnn-frontend was found there (its test binary is carried);
# without it the cuDNN cases are not run, and a row says so (na: not a failure, not a pass).
if [[ -x $bin/test_cuda_cudnn_attention ]]; then
  cudnn=1 engines_gpt2=naive,flash,cudnn engines_llama=flash,cudnn auto_engine=cudnn
else
  cudnn=0 engines_gpt2=naive,flash engines_llama=flash auto_engine=flash
fi
say "attention engines in this build: naive, flash$( ((cudnn)) && echo ', cudnn' || echo ' (no cudnn-frontend: no cuDNN)'); gpt_fineweb --attention auto runs $auto_engine"
na() {  # na NAME WHY: a part this build or machine cannot run; counted neither ok nor failed
  if [[ -n $only ]] && ! grep -Eq -- "$only" <<<"$1"; then return; fi
  row "$1" na 0 "$2"
}

# 1. core, then the NCCL tests early and on their own (one GPU, nccl_communicator::single(): no
#    MPI), so a hang or fault there is named and cannot hide the rest.
step test_cuda_core "$lim_core" gtest "$bin/test_cuda_core" --gtest_color=no
attn=naive step "test_cuda_training nccl (*Nccl*)" "$lim_nccl" gtest "$bin/test_cuda_training" \
  --gtest_color=no --gtest_filter='*Nccl*'
# Both NCCL reducers with a pre-multiplied sum (x2): over one GPU a real reduction kernel runs.
if [[ -x $bin/test_nccl_premul ]]; then
  attn=naive step test_nccl_premul "$lim_premul" gtest "$bin/test_nccl_premul" --gtest_color=no
fi
# Sharded Muon over NCCL on one GPU, without its 2-rank test (it needs 2 GPUs and mpiexec, and
# skips on one: a skip is a failure here, so it is left out by name and a row says why).
if [[ -x $bin/test_sharded_muon_cuda ]]; then
  attn=naive step "test_sharded_muon_cuda (one rank)" "$lim_shmuon" gtest "$bin/test_sharded_muon_cuda" --gtest_color=no \
    --gtest_filter='-ShardedMuonCuda.RanksGatherEveryMatrixAndKeepTheirShareOnly'
  na "test_sharded_muon_cuda RanksGatherEveryMatrixAndKeepTheirShareOnly" "needs 2 GPUs and mpiexec -n 2"
fi
# 2. kernel tests: one process per test, faults named. Listing the tests is bounded too (5 s: a
#    binary that hangs or faults at start must cost seconds, not the call, and not the share of
#    the other binaries' tests).
kernels_end=$((SECONDS + lim_kernels))
for t in "${kernel_tests[@]}"; do
  listed_at=$SECONDS
  names=$(timeout --kill-after=2 5 "$bin/$t" --gtest_list_tests 2>/dev/null </dev/null |
    awk '/^[^ ]/ {s=$1} /^  / {print s $1}')
  kernels_end=$((kernels_end + SECONDS - listed_at))  # a listing that hangs costs no test its share
  if [[ -z $names ]]; then  # the binary cannot even list its tests (a missing library): say so
    step "$t (could not list its tests)" 10 gtest "$bin/$t" --gtest_color=no
    continue
  fi
  for name in $names; do
    left=$((kernels_end - SECONDS))
    if ((left < 3)); then  # this group's share is spent: a row says so, nothing is dropped silently
      row "${t#test_}/$name" NOT-RUN 0 "kernel-test share spent"
      continue
    fi
    ((left > 20)) && left=20
    engine=""
    [[ $name == *Attention* ]] && engine=naive  # the kernel tests' attention is the naive one
    CUDA_LAUNCH_BLOCKING=1 attn=$engine step "${t#test_}/$name" "$left" gtest "$bin/$t" \
      --gtest_color=no --gtest_filter="$name"
  done
done
# trainkit's flash attention against the naive CPU attention (one process, faults named).
CUDA_LAUNCH_BLOCKING=1 attn=flash step test_cuda_flash_attention "$lim_flash" gtest \
  "$bin/test_cuda_flash_attention" --gtest_color=no
# cuDNN's fused attention against the naive CPU attention (built when cudnn-frontend was found).
if ((cudnn)); then
  CUDA_LAUNCH_BLOCKING=1 attn=cudnn step test_cuda_cudnn_attention "$lim_cudnn" gtest \
    "$bin/test_cuda_cudnn_attention" --gtest_color=no
else
  na test_cuda_cudnn_attention "not built (no cudnn-frontend where --build ran)"
fi
step test_pinned_prefetcher "$lim_prefetch" gtest "$bin/test_pinned_prefetcher" --gtest_color=no
step test_cuda_stager "$lim_stager" gtest "$bin/test_cuda_stager" --gtest_color=no

# 3. model tests: the CUDA GPT-2 against the CPU one and against the PyTorch golden fixtures.
attn=$engines_gpt2 step test_cuda_gpt2 "$lim_gpt2" gtest "$bin/test_cuda_gpt2" --gtest_color=no
attn=naive step test_cuda_golden "$lim_golden" gtest "$bin/test_cuda_golden" --gtest_color=no
# The CUDA Llama against llama_cpu (GQA, variants, flash and cuDNN), the step protocol, refusals.
# Without cuDNN its cuDNN case would skip (a failure here): it is left out and a row says why.
if ((cudnn)); then
  attn=$engines_llama step test_cuda_llama "$lim_llama" gtest "$bin/test_cuda_llama" --gtest_color=no
else
  attn=$engines_llama step test_cuda_llama "$lim_llama" gtest "$bin/test_cuda_llama" --gtest_color=no \
    --gtest_filter='-LlamaCuda.CudnnMatchesCpu'
  na "test_cuda_llama LlamaCuda.CudnnMatchesCpu" "not built with cuDNN (no cudnn-frontend where --build ran)"
fi
step test_muon_cuda "$lim_muon_ns" gtest "$bin/test_muon_cuda" --gtest_color=no
attn=naive step test_muon_cuda_step "$lim_muon" gtest "$bin/test_muon_cuda_step" --gtest_color=no
attn=naive step "test_cuda_training (not *Nccl*)" "$lim_training" gtest "$bin/test_cuda_training" \
  --gtest_color=no --gtest_filter='-*Nccl*'
# (test_cuda_gpt2 and test_cuda_training hold the CUDA graph tests: *CudaGraph*, replay = eager.)
step test_cuda_link "$lim_link" "cuda link: two CUDA units and the umbrella linked \(loss" "$bin/test_cuda_link"

# 4. training benchmark, then the PyTorch reference on the same shapes.
attn=flash step bench_gpu_training "$lim_bench" '^result impl=trainkit' "$bin/bench_gpu_training"
bench_out=$last_output
# 4a. the same d12 step eagerly and replayed as a CUDA graph, and a launch-bound d12 at B=2.
attn=flash step "bench_gpu_training --cuda-graph --quick" "$lim_graph" '^CUDA graph ' \
  "$bin/bench_gpu_training" --cuda-graph --quick
graph_out=$(sed -n '/^CUDA graph /,$p' <<<"$last_output")
# 4b. the Llama family's d12 and d24 (llama_cuda, flash with GQA): MFU beside its goal. Its
#     `llama-result` lines stay out of GPT-2's torch rows; PyTorch's Llama is the torch step below.
attn=flash step "bench_gpu_training --arch llama" "$lim_llama_bench" '^llama-result impl=trainkit' \
  "$bin/bench_gpu_training" --arch llama
llama_shapes=$(grep '^llama-result impl=trainkit' <<<"$last_output")
torch_script=$carry/torch_reference.py
[[ -f $torch_script ]] || torch_script=$root/bench/gpu/torch_reference.py
torch_end=$((SECONDS + lim_torch))
torch_lines=""
# The shapes trainkit ran (B may have been halved to fit); for a case it did not finish (failed or
# cut off), its configured shape, so PyTorch's figures still come back. d12 first (cheap to
# compile, at most torch_d12 s), d48 (compiled per block) when at least torch_d48_min s remain.
shapes=$(grep '^result impl=trainkit' <<<"$bench_out")
for def in "model=d12 B=32 T=1024 accum=1" "model=d48 B=16 T=1024 accum=1"; do
  grep -q " ${def%% *} " <<<"$shapes" || shapes+=$'\n'"result impl=trainkit $def (configured)"
done
torch_shapes=$(grep ' model=d12 ' <<<"$shapes" | head -n1; grep ' model=d48 ' <<<"$shapes" | head -n1)
while read -r line; do
  [[ -n $line ]] || continue
  model=$(num "$line" model) B=$(num "$line" B) T=$(num "$line" T) accum=$(num "$line" accum)
  left=$((torch_end - SECONDS))
  if [[ $model != d12 ]] && ((left < torch_d48_min)); then
    row "torch_reference $model B=$B T=$T" NOT-RUN 0 "under $torch_d48_min s of the torch share left"
    continue
  fi
  [[ $model == d12 ]] && ((left > torch_d12)) && left=$torch_d12
  steps=10 warmup=3
  [[ $model == d12 ]] || steps=5 warmup=2  # d48: long steps after a per-block compile
  attn=sdpa-flash step "torch_reference $model B=$B T=$T" "$left" '^result impl=torch' \
    env LD_LIBRARY_PATH="$host_ld" python3 "$torch_script" --model "$model" --batch "$B" --seq "$T" \
    --accum "$accum" --steps "$steps" --warmup "$warmup"
  torch_lines+=$(grep '^result impl=torch' <<<"$last_output")$'\n'
done <<<"$torch_shapes"

# 4d. PyTorch's Llama (torch_reference.py --arch llama) at the shape llama_cuda's d12 ran (its
#     configured shape if it did not finish); d24 is left to a rerun (GPU_CHECK_ONLY=llama).
llama12=$(grep ' model=d12 ' <<<"$llama_shapes" | head -n1)
[[ -n $llama12 ]] || llama12="llama-result impl=trainkit model=d12 B=32 T=1024 accum=1 (configured)"
attn=sdpa-flash step "torch_reference --arch llama d12 B=$(num "$llama12" B) T=$(num "$llama12" T)" \
  "$lim_llama_torch" '^llama-result impl=torch' env LD_LIBRARY_PATH="$host_ld" python3 "$torch_script" \
  --arch llama --model d12 --batch "$(num "$llama12" B)" --seq "$(num "$llama12" T)" --steps 10 --warmup 3
llama_torch_lines=$(grep '^llama-result impl=torch' <<<"$last_output")

# 5. per-kernel profile (its table also goes to profile.txt; attention as gpt2_cuda's naive path).
attn=naive step profile_kernels "$lim_profile" '^profile done' "$bin/profile_kernels" --out "$out/profile.txt"

# 5b. attention forward and backward at hs 64 (d12, d48) and hs 128: trainkit's flash kernels,
#     cuDNN's and the naive ones (bench_gpu_attention), then PyTorch's SDPA (torch_attention.py:
#     its flash and cuDNN backends) on the same shapes, in one row: one `attn-result` line each.
attn_script=$carry/torch_attention.py
[[ -f $attn_script ]] || attn_script=$root/bench/gpu/torch_attention.py
attn=flash,cudnn,naive,sdpa step "bench_gpu_attention + torch_attention.py (SDPA)" "$lim_attn" \
  '^attn-result engine=sdpa' bash -c \
  'o=$("$1" 2>&1); a=$?; printf "%s\n" "$o"; grep -q "^attn-result engine=flash " <<<"$o" || ((a)) || a=3
   LD_LIBRARY_PATH="$2" python3 "$3"; b=$?; exit $((a ? a : b))' _ \
  "$bin/bench_gpu_attention" "$host_ld" "$attn_script"
attn_out=$(grep -E '^attn-result |TFLOP' <<<"$last_output")

# 6. compute-sanitizer (memcheck, racecheck, synccheck) over small cases of the flash forward and
#    backward (each flash test runs both), every Llama kernel (test_cuda_llama_kernels, and one
#    whole llama_cuda d2 step with GQA flash), and five GPT-2 kernels; if the machine has it. A
#    sanitizer the sandbox refuses says "refused".
sanitizer=${GPU_CHECK_SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)}
flash_small='CudaFlashAttention.Head64OddT:CudaFlashAttention.Head128PastTheTile:CudaFlashAttention.ShorterThanOneTile:CudaFlashAttention.Head64AroundTheForwardBlock'
if [[ -n $sanitizer ]]; then
  sanitize_end=$((SECONDS + lim_sanitize))
  sanitize() {  # sanitize TOOL NAME ENGINE BINARY FILTER: one row, a share of the group's limit
    local left=$((sanitize_end - SECONDS)) n_after=$1
    shift
    left=$((left - 3 * n_after))  # 3 s kept for each row after this one
    ((left < 3)) && left=3
    attn=$3 step "$2" "$left" sanitizer "$sanitizer" --tool "$1" --error-exitcode 1 "$bin/$4" \
      --gtest_color=no --gtest_filter="$5"
  }
  sanitize 7 memcheck "memcheck flash forward+backward (hs64, hs128; T=17..193)" flash \
    test_cuda_flash_attention "$flash_small"
  sanitize 6 racecheck "racecheck flash forward+backward (hs64, hs128; T=17..193)" flash \
    test_cuda_flash_attention "$flash_small"
  sanitize 5 synccheck "synccheck flash forward+backward (hs64, hs128; T=17..193)" flash \
    test_cuda_flash_attention "$flash_small"
  sanitize 4 memcheck "memcheck llama kernels (rmsnorm, rope, qk-norm, swiglu, relu2)" "" \
    test_cuda_llama_kernels '*'
  sanitize 3 racecheck "racecheck llama kernels (rmsnorm, rope, qk-norm, swiglu, relu2)" "" \
    test_cuda_llama_kernels '*'
  sanitize 2 synccheck "synccheck llama kernels (rmsnorm, rope, qk-norm, swiglu, relu2)" "" \
    test_cuda_llama_kernels '*'
  sanitize 1 memcheck "memcheck llama_cuda d2 step (every kernel it launches; GQA)" flash \
    test_cuda_llama 'LlamaCuda.FlashMatchesCpuD2Heads'
  sanitize 0 memcheck "memcheck test_cuda_kernels (encoder, layernorm, classifier, gelu)" "" \
    test_cuda_kernels 'CudaKernels.EncoderForward:CudaKernels.LayerNormForwardWithResidual:CudaKernels.LayerNormBackward:CudaKernels.ClassifierForwardBackwardMasksPaddedVocab:CudaKernels.GeluForward'
else
  # Optional by design: "absent" is not a failure.
  row compute-sanitizer absent 0 "compute-sanitizer not found: no memcheck/racecheck/synccheck rows"
fi

# 7. gpt_fineweb --device cuda: d12 with gradient accumulation (default attention and flash), d2
#    Muon and Llama runs, d2 checkpoints, resume, export and --init-from. Every row stands alone:
#    a row that needs a checkpoint or a model file makes its own (resume writes and resumes in
#    its own folder; --init-from reads an llm.c file a --device cpu run exports in the same row),
#    so one failing row never takes another down. Each row names the attention that ran (the
#    program's "| attention X |" line).
#    (No --reducer nccl-zero1 run: it needs MPI, whose singleton start needs orted and ~120
#    plugin libraries the device machine lacks; the NCCL row above runs nccl_zero1 over one GPU.)
fw=$bin/gpt_fineweb
ck=$(mktemp -d /tmp/gpu-check-ckpt.XXXXXX)
fineweb_end=$((SECONDS + lim_fineweb))
# 8 micro-batches of 4x1024 per step (the embedded validation split holds 7307 tokens, so B*T
# must stay below that).
# share N: what is left of the group's limit, less 4 s for each of the N rows after this one, at
# most 10 s except for the first (d12 gets the rest); a hanging row leaves each later one 4 s.
share() {
  local s=$((fineweb_end - SECONDS - 4 * $1))
  ((s > 10 && $1 < 7)) && s=10
  echo $((s < 1 ? 1 : s))
}
attn=parse step fineweb_d12_20steps "$(share 7)" '^---- report ----' "$fw" --device cuda \
  --model d12 --batch 4 --seq 1024 --steps 20 --total-batch-tokens 32768 --lr 6e-4 --warmup 5 \
  --eval-every 0 --eval-batches 2 --no-progress --log-every 5 --metrics "$out/metrics_d12.jsonl"
# The same run with trainkit's flash attention (its report's tokens/s beside the default's).
attn=parse step fineweb_d12_flash "$(share 6)" '^---- report ----' "$fw" --device cuda --attention flash \
  --model d12 --batch 4 --seq 1024 --steps 10 --total-batch-tokens 32768 --lr 6e-4 --warmup 5 \
  --eval-every 0 --eval-batches 2 --no-progress --log-every 5
# The other families through the program: Muon (muon_cuda) with a sync checkpoint, and the
# Llama family (llama_cuda, GQA) with Muon.
attn=parse step fineweb_d2_muon_sync_ckpt "$(share 5)" 'step' "$fw" --device cuda --model d2 --optimizer muon \
  --steps 10 --ckpt-mode sync --ckpt-dir "$ck/muon" --ckpt-every 5 --no-progress --log-every 5
attn=parse step fineweb_d2_llama_muon "$(share 4)" 'step' "$fw" --device cuda --arch llama --model d2 \
  --optimizer muon --steps 10 --no-progress --log-every 5
attn=parse step fineweb_d2_sync_ckpt_export "$(share 3)" 'exported llm.c model file' "$fw" --device cuda \
  --model d2 --steps 20 --ckpt-mode sync --ckpt-dir "$ck/sync" --ckpt-every 10 --no-progress \
  --log-every 10 --export "$ck/d2_cuda.bin"
# Resume: its own checkpoint at step 10 (a first run), then 10 more steps from it.
attn=parse step fineweb_d2_sync_resume "$(share 2)" 'step +20/20' bash -c \
  '"$1" --device cuda --model d2 --steps 10 --ckpt-mode sync --ckpt-dir "$2" --ckpt-every 10 \
     --no-progress --log-every 10 && echo "---- resume ----" &&
   "$1" --device cuda --model d2 --steps 20 --ckpt-mode sync --ckpt-dir "$2" --resume \
     --no-progress --log-every 10' _ "$fw" "$ck/resume"
# --init-from an llm.c file written by a --device cpu run (device-independent) in the same row.
attn=parse step fineweb_d2_init_from "$(share 1)" 'step' bash -c \
  '"$1" --device cpu --model d2 --steps 1 --eval-every 0 --no-progress --export "$2" && echo "---- init-from ----" &&
   "$1" --device cuda --init-from "$2" --steps 5 --no-progress --log-every 5' _ "$fw" "$ck/d2_cpu.bin"
attn=parse step fineweb_d2_async_ckpt "$(share 0)" 'step' "$fw" --device cuda --model d2 \
  --steps 20 --ckpt-mode async --ckpt-dir "$ck/async" --ckpt-every 5 --no-progress --log-every 10
rm -rf "$ck"

# ---- tables last (the tool's reply carries the end of stdout) ----------------------------------
# Issue 12's goals, from the result lines of bench_gpu_training and torch_reference.py: one row
# per figure, "-" (and met "no") where a figure is missing because its step failed or was cut off.
goals_table() {
  local d12 d48 pt12 pt48
  d12=$(grep ' model=d12 ' <<<"$shapes" | grep -v configured | head -n1)
  d48=$(grep ' model=d48 ' <<<"$shapes" | grep -v configured | head -n1)
  pt12=$(grep " model=d12 B=$(num "$d12" B) T=$(num "$d12" T) " <<<"$torch_lines" | head -n1)
  pt48=$(grep " model=d48 B=$(num "$d48" B) T=$(num "$d48" T) " <<<"$torch_lines" | head -n1)
  echo "---- issue 12 goals (bench_gpu_training, flash attention, beside torch_reference.py) ----"
  printf '%-58s %10s %10s %4s\n' figure measured goal met
  # row NAME VALUE OP GOAL: VALUE "-" = not measured.
  goal_row() {
    awk -v n="$1" -v v="$2" -v op="$3" -v g="$4" 'BEGIN {
      met = "no"
      if (v != "-" && v != "") { if ((op == "ge" && v + 0 >= g + 0) || (op == "le" && v + 0 <= g + 0)) met = "yes" }
      else v = "-"
      printf "%-58s %10s %10s %4s\n", n, v, (op == "ge" ? ">= " : "<= ") g, met }'
  }
  local r
  goal_row "d12 T=1024 B=32: MFU (%)" "$(awk -v m="$(num "$d12" mfu)" -v b="$(num "$d12" B)" 'BEGIN { if (m != "-" && b == 32) printf "%.1f", 100 * m; else print "-" }')" ge 50
  goal_row "d48 T=1024: seconds per 1,048,576-token step" "$(awk -v t="$(num "$d48" tok_s)" 'BEGIN { if (t > 0) printf "%.2f", 1048576 / t; else print "-" }')" le 17.5
  for r in "d12:$d12:$pt12" "d48:$d48:$pt48"; do
    local name=${r%%:*} rest=${r#*:}
    local tk=${rest%%:*} pt=${rest#*:}
    goal_row "$name tokens/s trainkit / PyTorch (same shape)" "$(awk -v a="$(num "$tk" tok_s)" -v b="$(num "$pt" tok_s)" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }')" ge 1.15
    goal_row "$name first step / median step" "$(awk -v f="$(num "$tk" first_ms)" -v m="$(num "$tk" median_ms)" 'BEGIN { if (f > 0 && m > 0) printf "%.2f", f / m; else print "-" }')" le 2
  done
  goal_row "d48 T=1024 B=16, no recompute: device memory in use (GB)" "$(awk -v g="$(num "$d48" mem_gib)" -v b="$(num "$d48" B)" 'BEGIN { if (g != "-" && b == 16) printf "%.1f", g * 1.073741824; else print "-" }')" le 100
  echo "(attention TFLOP/s goals: the attention table below)"
}
# Issue 26's goals: llama_cuda's d12 and d24 MFU, and d12 beside PyTorch's Llama at the same shape;
# issue 36 set Llama d12's MFU goal to 45% (GPT-2 d12's stays 50%).
llama_goals_table() {
  local l12 l24 p12
  l12=$(grep ' model=d12 ' <<<"$llama_shapes" | head -n1)
  l24=$(grep ' model=d24 ' <<<"$llama_shapes" | head -n1)
  p12=$(grep " model=d12 B=$(num "$l12" B) T=$(num "$l12" T) " <<<"$llama_torch_lines" | head -n1)
  echo "---- issue 26/36 goals (bench_gpu_training --arch llama beside torch_reference.py --arch llama) ----"
  printf '%-58s %10s %10s %4s\n' figure measured goal met
  goal_row "llama d12 T=1024: MFU (%)" "$(awk -v m="$(num "$l12" mfu)" 'BEGIN { if (m != "-") printf "%.1f", 100 * m; else print "-" }')" ge 45
  goal_row "llama d24 T=1024: MFU (%)" "$(awk -v m="$(num "$l24" mfu)" 'BEGIN { if (m != "-") printf "%.1f", 100 * m; else print "-" }')" ge 50
  goal_row "llama d12 tokens/s trainkit / PyTorch (same shape)" "$(awk -v a="$(num "$l12" tok_s)" -v b="$(num "$p12" tok_s)" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }')" ge 1.15
}
# Attention side by side (issue 36): one row per shape, forward and backward TFLOP/s (causal
# FLOPs) of trainkit's flash kernels, cuDNN and PyTorch's SDPA (its flash and cuDNN backends),
# from the `attn-result` lines; then the own flash kernels' goals at head size 128.
attention_table() {
  local engines="flash cudnn sdpa-flash sdpa-cudnn" c e l
  echo "---- attention, causal bf16, TFLOP/s forward / backward (bench_gpu_attention, torch_attention.py) ----"
  printf '%-26s' case
  for e in $engines; do printf ' %17s' "$e"; done
  printf '\n'
  for c in $(grep -o ' case=[^ ]*' <<<"$attn_out" | cut -d= -f2 | awk '!seen[$0]++'); do
    l=$(grep -m1 " case=$c " <<<"$attn_out")
    printf '%-26s' "$c B=$(num "$l" B) T=$(num "$l" T) hs=$(num "$l" hs)"
    for e in $engines; do
      l=$(grep -m1 "^attn-result engine=$e case=$c " <<<"$attn_out")
      printf ' %17s' "$(num "$l" fwd_tflops)/$(num "$l" bwd_tflops)"
    done
    printf '\n'
  done
  local f128
  f128=$(grep -m1 '^attn-result engine=flash case=hs128 ' <<<"$attn_out")
  echo
  printf '%-58s %10s %10s %4s\n' figure measured goal met
  goal_row "own flash forward, hs 128, T=1024: TFLOP/s" "$(num "$f128" fwd_tflops)" ge 300
  goal_row "own flash backward, hs 128, T=1024: TFLOP/s" "$(num "$f128" bwd_tflops)" ge 200
}
{
  echo
  echo "---- trainkit vs PyTorch (same shapes; MFU = (6N + 12LCT) x tok/s / 989 TFLOP/s) ----"
  printf '%-18s %12s %12s %7s %8s %8s %18s %18s\n' case "trainkit t/s" "torch t/s" ratio \
    "tk MFU" "pt MFU" "tk first/median ms" "pt first/median ms"
  while read -r tk; do
    [[ -n $tk ]] || continue
    m=$(num "$tk" model) B=$(num "$tk" B) T=$(num "$tk" T)
    pt=$(grep " model=$m B=$B T=$T " <<<"$torch_lines" | head -n1)
    tk_t=$(num "$tk" tok_s)
    pt_t=$(num "$pt" tok_s)
    ratio=$(awk -v a="$tk_t" -v b="$pt_t" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
    printf '%-18s %12s %12s %7s %8s %8s %18s %18s\n' "$m B=$B T=$T" "$tk_t" "${pt_t:--}" "$ratio" \
      "$(num "$tk" mfu)" "$(num "$pt" mfu)" "$(num "$tk" first_ms)/$(num "$tk" median_ms)" \
      "$(num "$pt" first_ms)/$(num "$pt" median_ms)"
  done <<<"$shapes"
  echo
  goals_table
  echo
  llama_goals_table
  echo
  sed -n '/^case /,$p' <<<"$bench_out"
  [[ -n $graph_out ]] && { echo; echo "$graph_out"; }
  echo
  attention_table
  [[ -f $out/profile.txt ]] && { echo; head -n 60 "$out/profile.txt"; }
  echo
  echo "---- gpu_check summary ($((SECONDS - start_all)) s of ${budget}) ----"
  printf '%-66s %-16s %5s  %s\n' step status secs detail
  printf '%s\n' "${rows[@]}"
} | tee -a "$summary.tables"
cat "$summary.tables" >>"$summary"
rm -f "$summary.tables"
echo "files: $out (summary.txt, gpu_check.log, profile.txt, metrics_d12.jsonl)"
failed=0 n_ok=0 n_na=0 n_refused=0
for st in "${statuses[@]}"; do
  case $st in
    ok | absent) n_ok=$((n_ok + 1)) ;;
    na) n_na=$((n_na + 1)) ;;
    refused) n_refused=$((n_refused + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
done
verdict="gpu_check: $n_ok ok, $failed not ok (FAIL, TIMEOUT or NOT-RUN), $n_na na (not in this build or machine), $n_refused refused by the machine, in $((SECONDS - start_all))s"
echo "$verdict" | tee -a "$summary"
((failed == 0))
