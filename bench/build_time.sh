#!/usr/bin/env bash
# bench/build_time.sh — how long the program takes to build, beside the goals of issue 39:
#
#   gpt_fineweb from clean, 2 cores, nvcc present        <= 90 s
#   gpt_fineweb after an edit to one model family         <= 30 s
#   the README's trainer example (README.md's first cpp block) from clean   <= 15 s
#
#   bench/build_time.sh [--jobs N] [--ref COMMIT] [--family-header PATH] [--keep DIR]
#
# A fresh build directory (Release, the default preset's generator) of the working tree, or of
# COMMIT's tree (git archive, so the figures of an older layout can be put beside the new one),
# configured with ccache off (no launcher, CCACHE_DISABLE=1): every unit is compiled for real.
# Then, timed with the wall clock:
#   1. `gpt_fineweb` from clean with -jN (default 2, the goal's cores);
#   2. touch one family header (default: the Llama CPU model, wherever this tree keeps it) and
#      build `gpt_fineweb` again: what a user editing one model file waits for;
#   3. the README's trainer example: its object in the docs-snippet library (tests/docs), from
#      clean, then the link of nothing else (it is a compile-only check; the figure is its unit).
# Each figure twice: the wall clock, and the CPU seconds the compilers used (user + sys of every
# unit, recorded by a compiler launcher around /usr/bin/time). On a shared machine the wall clock
# measures the load as much as the build; the CPU seconds do not, and scheduling them onto N
# idle cores (longest unit first, as ninja's -jN does with independent units) gives the wall
# time of a quiet N-core machine: the "quiet -jN" column. Last, every unit of step 1 with its CPU
# seconds (the slowest first), and the load average before and after.
# Needs cmake, ninja and the project's dependencies; the CUDA units are built where nvcc is found.
set -euo pipefail
jobs=2
ref=""
family_header=""
keep=""
while (($#)); do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --ref) ref=$2; shift 2 ;;
    --family-header) family_header=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "build_time.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

root=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
work=${keep:-$(mktemp -d /tmp/trainkit_build_time.XXXXXX)}
mkdir -p "$work"
[[ -n $keep ]] || trap 'rm -rf "$work"' EXIT
src=$root
if [[ -n $ref ]]; then
  src=$work/src
  rm -rf "$src"
  mkdir -p "$src"
  git -C "$root" archive "$ref" | tar -x -C "$src"
  # The bundled third-party folders that are not in git (if any) come from the working tree.
  for d in third_party vocab; do
    [[ -e $src/$d || ! -e $root/$d ]] || ln -s "$root/$d" "$src/$d"
  done
fi
build=$work/build
rm -rf "$build"
export CCACHE_DISABLE=1
load() { cut -d' ' -f1-3 /proc/loadavg; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

# The launcher: runs the compiler under /usr/bin/time, one line "cpu_seconds output" per unit.
launcher=$work/cpu_time_launcher.sh
cat >"$launcher" <<'LAUNCHER'
#!/usr/bin/env bash
out=unknown
prev=""
for a in "$@"; do [[ $prev == -o ]] && out=$a; prev=$a; done
exec /usr/bin/time -a -o "$TRAINKIT_BUILD_TIME_LOG" -f "%U %S $out" "$@"
LAUNCHER
chmod +x "$launcher"
export TRAINKIT_BUILD_TIME_LOG=$work/units.log

load_before=$(load)
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINKIT_BUILD_BENCH=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_CUDA_COMPILER_LAUNCHER="$launcher" \
  >"$work/configure.log" 2>&1 || { tail -20 "$work/configure.log" >&2; exit 1; }
nvcc_found=no
grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=.*nvcc' "$build/CMakeCache.txt" && nvcc_found=yes

# cpu_of LOG: total CPU seconds; quiet_of LOG: the makespan of its units on $jobs idle cores.
cpu_of() { awk '{ s += $1 + $2 } END { printf "%.0f", s }' "$1"; }
quiet_of() {
  awk '{ print $1 + $2 }' "$1" | sort -rn | awk -v n="$jobs" '
    { best = 1; for (i = 2; i <= n; ++i) if (w[i] < w[best]) best = i; w[best] += $1 }
    END { m = 0; for (i = 1; i <= n; ++i) if (w[i] > m) m = w[i]; printf "%.0f", m }'
}
step() {  # step NAME COMMAND...: wall seconds into $wall, the units' log into $work/NAME.units
  : >"$TRAINKIT_BUILD_TIME_LOG"
  local t0 t1
  t0=$(now)
  "${@:2}" >"$work/$1.log" 2>&1 || { tail -30 "$work/$1.log" >&2; exit 1; }
  t1=$(now)
  wall=$(secs "$t0" "$t1")
  cp "$TRAINKIT_BUILD_TIME_LOG" "$work/$1.units"
}

step clean cmake --build "$build" --target gpt_fineweb -j "$jobs"
clean=$wall

if [[ -z $family_header ]]; then
  for f in include/trainkit/model/llama/cpu.hpp include/trainkit/model/llama/cpu.hpp; do
    [[ -e $src/$f ]] && { family_header=$f; break; }
  done
fi
touch "$src/$family_header"
step edit cmake --build "$build" --target gpt_fineweb -j "$jobs"
edit=$wall
rebuilt=$(grep -c '\] Building' "$work/edit.log" || true)

readme_obj=tests/docs/CMakeFiles/trainkit_doc_snippets.dir/snippets/README_0.cpp.o
readme="n/a"
if ninja -C "$build" -t query "$readme_obj" >/dev/null 2>&1; then
  step readme ninja -C "$build" -j "$jobs" "$readme_obj"
  readme=$wall
fi
load_after=$(load)

row() { printf '%-46s %6s %6s %9s %6s\n' "$@"; }
echo "build times ($(nproc) cores here, -j$jobs, ccache off, nvcc ${nvcc_found}; source: ${ref:-working tree})"
row "what" "wall" "CPU" "quiet -j$jobs" "goal"
row "gpt_fineweb from clean" "$clean" "$(cpu_of "$work/clean.units")" "$(quiet_of "$work/clean.units")" 90
row "gpt_fineweb, touched $(basename "$family_header") ($rebuilt units)" "$edit" \
  "$(cpu_of "$work/edit.units")" "$(quiet_of "$work/edit.units")" 30
if [[ $readme == n/a ]]; then
  row "README trainer example (one unit)" n/a n/a n/a 15
else
  row "README trainer example (one unit)" "$readme" "$(cpu_of "$work/readme.units")" \
    "$(quiet_of "$work/readme.units")" 15
fi
echo "load average before: $load_before; after: $load_after (wall figures include the load)"
echo "units of the clean build, slowest first (CPU seconds):"
awk '{ printf "%8.1f  %s\n", $1 + $2, $3 }' "$work/clean.units" | sort -rn | head -12
