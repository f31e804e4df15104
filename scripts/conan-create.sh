#!/usr/bin/env bash
# scripts/conan-create.sh — builds and tests trainkit's Conan package offline, as CI does:
# `conan create conan --profile:all conan/profiles/system`, which packages include/, then builds and
# runs conan/test_package (CMakeDeps + CMakeToolchain, a few training steps). Eigen, Boost and
# GoogleTest come from the system (scripts/install-deps.sh) through the profile's
# [platform_requires], so the Conan Center remote is disabled: nothing is downloaded but Conan.
#
# Uses `conan` from PATH, or installs Conan 2 from PyPI into a virtual environment under the work
# directory (about 15 s). CONAN_HOME is kept under the work directory too, so ~/.conan2 is never
# touched. Options:
#   --skip-if-missing   exit 77 (ctest: skipped) instead of installing Conan when none is on PATH
# Environment: TRAINKIT_CONAN_WORK (default: build-conan in the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${TRAINKIT_CONAN_WORK:-$PWD/build-conan}
mkdir -p "$work"
SECONDS=0

conan=$(command -v conan || true)
if [[ -z $conan ]]; then
  if [[ ${1:-} == --skip-if-missing ]]; then
    echo "conan not found on PATH: skipped (scripts/conan-create.sh without options installs it)"
    exit 77
  fi
  if [[ ! -x $work/venv/bin/conan ]]; then
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet --disable-pip-version-check 'conan>=2,<3'
  fi
  conan=$work/venv/bin/conan
  echo "conan: installed $("$conan" --version) from PyPI into $work/venv in ${SECONDS}s"
fi

export CONAN_HOME=$work/home
"$conan" profile detect --exist-ok >/dev/null
"$conan" remote disable conancenter >/dev/null 2>&1 || true  # offline: the profile names the rest

version=$(head -n1 VERSION)
# The optional components (tokenizer, hf, mpi) are built and used by test_package too.
"$conan" create conan --profile:all conan/profiles/system --build=missing \
  -o 'trainkit/*:tokenizer=True' -o 'trainkit/*:hf=True' -o 'trainkit/*:mpi=True' 2>&1 |
  tee "$work/create.log"
for component in tokenizer hf mpi; do
  if ! grep -q "trainkit::$component from Conan OK" "$work/create.log"; then
    echo "conan: test_package did not exercise trainkit::$component" >&2
    exit 1
  fi
done

# The cuda option adds the trainkit::cuda component, nccl and cudnn add trainkit::nccl and
# trainkit::cudnn. Generating their CMake files needs no CUDA, so check them here on any machine:
# the component targets and the libraries they link (cudnn also needs cudnn-frontend's headers,
# from PyPI, checked only where they are installed).
cuda_opts=(-o 'trainkit/*:cuda=True' -o 'trainkit/*:nccl=True')
expect=(trainkit::cuda cublasLt trainkit::nccl nccl)
if python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["purelib"], "include", "cudnn_frontend.h")))' 2>/dev/null; then
  cuda_opts+=(-o 'trainkit/*:cudnn=True')
  expect+=(trainkit::cudnn cudnn nvrtc TRAINKIT_HAS_CUDNN_FRONTEND)
fi
"$conan" install --requires="trainkit/$version" "${cuda_opts[@]}" \
  --profile:all conan/profiles/system -g CMakeDeps --output-folder "$work/cuda-deps" >/dev/null
for word in "${expect[@]}"; do
  if ! grep -q -- "$word" "$work"/cuda-deps/trainkit-*.cmake; then
    echo "conan: the options ${cuda_opts[*]} produced no '$word' in trainkit's CMake files" >&2
    exit 1
  fi
done
echo "conan: trainkit/$version created and tested (tokenizer, hf and mpi components included); CUDA components checked: ${expect[*]} (${SECONDS}s)"
