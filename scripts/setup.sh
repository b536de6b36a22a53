#!/usr/bin/env bash
# Installs what ringside needs on Debian 12, quietly and idempotently: packages
# already present are not touched, and nothing runs apt when all are there.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap          # Bazel 4.2.3, used fully offline (see docs/build.md)
  g++
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev
  libgtest-dev libgmock-dev
  libgloo-dev
  libopenblas-dev
  zlib1g-dev
  libcmark-gfm-dev libcmark-gfm-extensions-dev   # report.md to report.html
  dataset-fashion-mnist    # /usr/share/datasets/fashion-mnist
  gnuplot-nox iperf3
  chromium                 # headless check that the HTML report renders
  iproute2                 # ip, tc: emulated cluster networks
  python3-torch            # PyTorch CPU: the reference the benchmarks compare with
  clang libclang-rt-14-dev # fuzz targets (scripts/fuzz.sh): clang 14, libFuzzer, ASan, UBSan
  python3 bc procps        # the shell tests' tools (/usr/bin/python3, bc, pgrep; docs/testing.md)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then SUDO="sudo"; else
      echo "setup: error: need root (or sudo) to install: ${missing[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Nothing here is NVIDIA software: the default build and the ringside binary need no
# CUDA. Only the optional CUDA configuration (bazel build --config=cuda, docs/build.md)
# uses a toolkit, which the user installs at /usr/local/cuda.
if [ ! -d /usr/local/cuda/include ]; then
  echo "setup: note: no CUDA toolkit at /usr/local/cuda: fine for the default build;" \
       "only --config=cuda (the NCCL backend) needs one" >&2
fi
