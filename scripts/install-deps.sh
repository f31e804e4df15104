#!/usr/bin/env bash
# Installs what building and testing trainkit needs on Debian/Ubuntu (run as root or with sudo).
# CUDA is optional: when nvcc is on PATH the CUDA parts are built too.
set -euo pipefail
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
  clang  `# scripts/fuzz.sh: libFuzzer + ASan/UBSan` \
  python3-venv  # scripts/conan-create.sh installs Conan from PyPI into a venv
