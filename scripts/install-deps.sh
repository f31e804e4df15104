#!/usr/bin/env bash
# Installs what building and testing trainkit needs on Debian/Ubuntu (run as root or with sudo):
#  1. the Debian packages (compilers, CMake, Ninja, Eigen, Boost, GoogleTest, Google Benchmark,
#     CLI11, nlohmann-json, utf8proc, Open MPI, oneDNN, clang, python3-venv) with apt-get;
#  2. the repository's Python virtual environment, .venv, with the packages the tests check
#     trainkit's files against: numpy and safetensors (safetensors and Hugging Face files, the
#     numpy GPT-2 of the HellaSwag test), pyarrow (FineWeb's parquet, scripts/parquet_to_jsonl.py)
#     and tensorboard (its own reader on our event files); with nvcc on PATH also
#     nvidia-cudnn-frontend (the headers of the cuDNN attention engine). Debian's python3 refuses
#     pip installs into the system (PEP 668), hence the venv; CMake hands its interpreter to the
#     tests (top-level CMakeLists.txt), so nothing needs activating. About 20 s from PyPI.
# CUDA is optional: when nvcc is on PATH the CUDA parts are built too.
# Environment: TRAINKIT_VENV (default: .venv in the repository; CMake looks there only).
set -euo pipefail
cd "$(dirname "$0")/.."
sudo_cmd=""
if [[ $(id -u) -ne 0 ]]; then sudo_cmd="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -q
$sudo_cmd apt-get install -y -q --no-install-recommends \
  build-essential cmake ninja-build pkg-config \
  libeigen3-dev libboost-dev \
  libgtest-dev libgmock-dev libbenchmark-dev \
  libcli11-dev nlohmann-json3-dev libutf8proc-dev \
  libopenmpi-dev openmpi-bin  `# reduce/mpi_allreduce.hpp and its 2-rank test` \
  libdnnl-dev  `# oneDNN: CPU GEMMs picked at run time (AVX-512, AMX) and --precision bf16` \
  clang  `# scripts/fuzz.sh: libFuzzer + ASan/UBSan` \
  python3 python3-venv  # the tests' .venv below; scripts/conan-create.sh's Conan venv

venv=${TRAINKIT_VENV:-$PWD/.venv}
packages=(numpy safetensors pyarrow tensorboard)
if command -v nvcc >/dev/null 2>&1; then packages+=(nvidia-cudnn-frontend); fi
[[ -x $venv/bin/python3 ]] || python3 -m venv "$venv"
"$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "${packages[@]}"
echo "install-deps: ${packages[*]} in $venv"
