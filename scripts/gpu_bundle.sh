#!/usr/bin/env bash
# Builds the portable GPU bundle, gpu_bundle/ at the repository root (git-ignored): the
# CUDA build of ringside and the GPU test binaries, linked so that they run on a machine
# with the NVIDIA driver, the CUDA runtime libraries and PyTorch but none of gRPC,
# protobuf, abseil, Gloo, OpenBLAS, GoogleTest or Bazel; plus gpu_check.sh, which runs
# the GPU test binaries and the suite's own shell tests (sh/, tests/*.sh in GPU mode)
# there and writes one report. docs/build.md, "The GPU bundle", says what is linked how
# and why.
#
#   scripts/gpu_bundle.sh [--no-xz]
#
# --no-xz keeps every file uncompressed (by default the binaries and libraries over
# 1 MiB ship as .xz, which gpu_check.sh unpacks on first use: the bundle must stay
# within 40 MiB). Needs the CUDA
# toolkit at /usr/local/cuda (the build machine's; the bundle needs none). Prints the
# bundle's size; fails if a binary needs a shared library that is neither a system
# library, a CUDA library of the target machine, nor in the bundle's lib/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEST=$ROOT/gpu_bundle

# The test binaries with cases that need a GPU (cuda_check_test needs none: it runs in
# the --config=cuda suite here). Targets that do not exist yet are skipped with a
# warning.
TESTS=(
  //common:cuda_ops_test
  //common:cuda_model_test
  //ddp_ring:nccl_process_group_test
  //common:ops_factory_test
  //ps_worker:ps_strategy_test
)
BAZEL_FLAGS=(--config=cuda --config=bundle)

# Shared libraries the target machine provides (never bundled): glibc, the C++ runtime,
# the NVIDIA driver and the CUDA libraries other than libcudart (small and tied to the
# toolkit the binaries were compiled with: bundled).
SYSTEM_LIBS='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libstdc\+\+|libgcc_s|libcuda|libnvidia-[a-z-]*|libcublas|libcublasLt|libnccl)\.so'
XZ_MIN_BYTES=$((1024 * 1024))

XZ=1
case "${1:-}" in
  "") ;;
  --no-xz) XZ=0 ;;
  -h|--help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "gpu_bundle: unknown argument '$1' (usage: scripts/gpu_bundle.sh [--no-xz])" >&2; exit 2 ;;
esac

die() { echo "gpu_bundle: $*" >&2; exit 1; }
[[ -d /usr/local/cuda/include ]] ||
  die "needs the CUDA toolkit at /usr/local/cuda to build (--config=cuda)"

present=()
for t in "${TESTS[@]}"; do
  if bazel query "$t" >/dev/null 2>&1; then
    present+=("$t")
  else
    echo "gpu_bundle: warning: $t does not exist (yet); not in the bundle" >&2
  fi
done

# --symlink_prefix=/: no bazel-bin link to the bundle configuration's outputs, so the
# convenience links keep pointing at the default build.
bazel build --symlink_prefix=/ "${BAZEL_FLAGS[@]}" //:ringside "${present[@]}"
BIN=$(bazel info "${BAZEL_FLAGS[@]}" bazel-bin 2>/dev/null)
[[ -x $BIN/experiments/ringside ]] || die "no $BIN/experiments/ringside after the build"

rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/tests" "$DEST/lib" "$DEST/sh"
install -m 755 "$BIN/experiments/ringside" "$DEST/bin/ringside"
: >"$DEST/tests/LIST"
for t in "${present[@]}"; do
  path=${t#//}
  path=${path/://}
  install -m 755 "$BIN/$path" "$DEST/tests/$(basename "$path")"
  basename "$path" >>"$DEST/tests/LIST"
done
strip --strip-unneeded "$DEST"/bin/* $(sed "s|^|$DEST/tests/|" "$DEST/tests/LIST")

# The shared libraries the binaries load (ldd: the whole closure), less the target
# machine's own, copied into lib/ under the names the loader asks for.
BINS=("$DEST/bin/ringside")
while read -r n; do BINS+=("$DEST/tests/$n"); done <"$DEST/tests/LIST"
ldd "${BINS[@]}" | awk '$2 == "=>" {print $1, $3}' | sort -u |
  while read -r soname path; do
    [[ $soname =~ $SYSTEM_LIBS ]] && continue
    [[ $path == not ]] && die "$soname: not found on this machine"
    cp -L "$path" "$DEST/lib/$soname"
    chmod 644 "$DEST/lib/$soname"
    [[ $soname == libcudart* ]] || strip --strip-unneeded "$DEST/lib/$soname"
  done

# Check: the binaries' RPATH ($ORIGIN/../lib) comes before the system folders, so every
# library of the closure that is not the target machine's own must resolve into lib/.
# (ldd on the binaries, not on lib/*.so: the executable's RPATH also serves the
# dependencies of dependencies, which a library's own ldd would not show.)
bad=$(ldd "${BINS[@]}" | awk '$2 == "=>" {print $1, $3}' | sort -u |
  while read -r soname path; do
    [[ $soname =~ $SYSTEM_LIBS ]] && continue
    # libcudart: the RPATH lists //third_party:cudart's /usr/local/cuda/lib64 first, so a machine
    # with a CUDA 13 toolkit there uses its own; elsewhere the bundle's.
    [[ $soname == libcudart.so.* && $path == /usr/local/cuda/* ]] && continue
    [[ $(readlink -f "$path") == "$(readlink -f "$DEST/lib/$soname")" ]] || echo "$soname => $path"
  done)
[[ -z $bad ]] || die "libraries not resolved from lib/: $bad"
for b in "${BINS[@]}"; do
  readelf -d "$b" | grep -q '(RPATH).*\$ORIGIN/../lib' ||
    die "$b has no RPATH \$ORIGIN/../lib (built without --config=bundle?)"
done

# The newest glibc and libstdc++ symbol versions anything in the bundle needs.
newest() { objdump -T "${BINS[@]}" "$DEST"/lib/* 2>/dev/null | grep -o "$1_[0-9.]*" | sort -uV | tail -1 || true; }
glibc=$(newest GLIBC)
glibcxx=$(newest GLIBCXX)

if ((XZ)); then
  for f in "$DEST"/bin/* "$DEST"/tests/* "$DEST"/lib/*; do
    [[ -f $f && $(stat -c %s "$f") -ge $XZ_MIN_BYTES ]] || continue
    xz -9 -T0 "$f"
  done
fi

install -m 755 scripts/gpu_check.sh "$DEST/gpu_check.sh"
# The benchmarks (gpu_check.sh --bench) and their PyTorch references.
install -m 644 scripts/gpu_bench.sh "$DEST/gpu_bench.sh"
install -m 644 experiments/bench/torch_step_bench.py "$DEST/torch_step_bench.py"
install -m 644 experiments/bench/torch_ddp_bench.py "$DEST/torch_ddp_bench.py"
# The suite's shell tests the check runs in GPU mode, with what they source and take.
for f in $(scripts/gpu_check.sh --files); do install -m 755 "tests/$f" "$DEST/sh/$f"; done

# VERSION: what was built from what, and what the target machine must have.
commit=$(git rev-parse HEAD)
[[ -z $(git status --porcelain --untracked-files=no) ]] || commit="$commit+uncommitted"
{
  echo "commit: $commit"
  echo "branch: $(git rev-parse --abbrev-ref HEAD)"
  echo "built: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
  echo "build: bazel build ${BAZEL_FLAGS[*]} //:ringside ${present[*]}"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)"
  echo "needs: $glibc, $glibcxx (libstdc++), an NVIDIA driver for CUDA 13, libcublas.so.13, libcublasLt.so.13, libnccl.so.2"
  echo "tests: $(tr '\n' ' ' <"$DEST/tests/LIST")"
  echo "lib: $(cd "$DEST/lib" && ls | tr '\n' ' ')"
  echo "sh: $(cd "$DEST/sh" && ls | tr '\n' ' ')"
  echo "run: ./gpu_check.sh [--out DIR] [--bench [--quick]]   (unpacks */*.xz on first use)"
} >"$DEST/VERSION"

echo "gpu_bundle: $DEST"
(cd "$DEST" && find . -type f -printf '%s\t%p\n' | sort -k2 |
  awk -F'\t' '{printf "  %8.1f MiB  %s\n", $1 / 1048576, $2}')
echo "gpu_bundle: $(du -sb "$DEST" | awk '{printf "%.1f MiB", $1 / 1048576}') in all ($(du -sh "$DEST" | cut -f1) on disk)"
