#!/usr/bin/env bash
# The default ringside binary needs nothing from a CUDA toolkit:
#  1. readelf -d names no CUDA library (cudart, cublas, cublasLt, nccl, cuda) and no
#     RPATH/RUNPATH into one;
#  2. with every /usr/local/cuda* folder hidden (tmpfs over it in a private mount
#     namespace, so the dynamic loader cannot find a CUDA library even through its
#     cache), `ringside --help`, a short single-process training and a 2-rank DDP
#     training on synthetic data succeed, and --backend=nccl is refused with the
#     rebuild hint.
# Step 2 needs root and unshare(1); without them the test is skipped after step 1, saying
# why (counted as skipped, not passed).
set -uo pipefail
RINGSIDE="$(readlink -f "$1")"
T="${TEST_TMPDIR:-$(mktemp -d)}"
LIB="$(readlink -f "$(dirname "$0")/test_lib.sh")"
# shellcheck source=tests/test_lib.sh
source "$LIB"  # fail, skip
FAIL_FAST=1  # fail ends the test.

# 1. The dynamic section.
command -v readelf >/dev/null || fail "readelf not found (binutils)"
dyn="$(readelf -d "$RINGSIDE")" || fail "readelf -d $RINGSIDE failed"
grep -q '(NEEDED)' <<<"$dyn" || fail "readelf shows no NEEDED entries: is $RINGSIDE dynamic?"
cuda_libs="$(echo "$dyn" | grep -E '\((NEEDED|RPATH|RUNPATH)\)' | grep -iE 'libcuda|libcublas|libnccl|libcudnn|cuda')"
[ -z "$cuda_libs" ] || fail "ringside depends on CUDA:
$cuda_libs"
echo "ok   readelf: $(echo "$dyn" | grep -c '(NEEDED)') NEEDED entries, none from CUDA"

# 2. The same binary where no CUDA library can be loaded.
if [ "$(id -u)" -ne 0 ]; then
  skip "step 2 needs root to mount a tmpfs over /usr/local/cuda (uid $(id -u))"
fi
if ! command -v unshare >/dev/null || ! unshare -m true 2>"$T/unshare.err"; then
  skip "step 2 needs a private mount namespace: unshare -m refused: $(cat "$T/unshare.err" 2>/dev/null)"
fi

cat >"$T/inside.sh" <<'INSIDE'
set -uo pipefail
RINGSIDE="$1"; T="$2"
source "$3"  # tests/test_lib.sh: fail
FAIL_FAST=1
# Keep the namespace's mounts to itself, then hide every toolkit folder (the real one
# behind the /usr/local/cuda symlink too: ld.so.cache points there).
mount --make-rprivate / || fail "mount --make-rprivate /"
hidden=0
for d in /usr/local/cuda /usr/local/cuda-*; do
  [ -d "$d" ] || continue
  mount -t tmpfs -o ro tmpfs "$(readlink -f "$d")" || fail "cannot hide $d"
  hidden=$((hidden + 1))
done
echo "ok   hid $hidden CUDA folder(s)"
# The control: CUDA's runtime really cannot be loaded now.
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 - <<'PY' || fail "libcudart or libnccl still loads: the toolkit is not hidden"
import ctypes, sys
for lib in ("libcudart.so.13", "libcudart.so", "libnccl.so.2", "libcublas.so.13"):
    try:
        ctypes.CDLL(lib)
    except OSError:
        continue
    sys.exit(1)
PY
  echo "ok   libcudart, libcublas and libnccl cannot be loaded"
fi

# --help exits 0 after printing the usage; a binary that cannot load its libraries
# exits 127 with the loader's message instead.
"$RINGSIDE" --help >"$T/help.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "ringside --help exited $rc: $(head -3 "$T/help.out")"
grep -q 'error while loading shared libraries' "$T/help.out" && fail "$(head -3 "$T/help.out")"
grep -q 'ringside train --strategy=' "$T/help.out" || fail "--help printed no usage: $(head -5 "$T/help.out")"
echo "ok   ringside --help printed the usage"

data=(--dataset=synthetic:train=512,test=128,seed=3 --model=mlp:784-32-10 --batch=32
      --lr=0.05 --threads=1 --steps=8)
timeout 120 "$RINGSIDE" train --strategy=single "${data[@]}" --out="$T/single" \
  >"$T/single.out" 2>"$T/single.err" || fail "single training exited $?: $(tail -3 "$T/single.err")"
grep -q '^test accuracy: 0\.[0-9]' "$T/single.out" || fail "single: no accuracy: $(cat "$T/single.out")"
[ -s "$T/single/checkpoint.bin" ] || fail "single: no checkpoint"
echo "ok   single-process training: $(grep '^steps:' "$T/single.out")"

timeout 120 "$RINGSIDE" train --strategy=ddp --workers=2 "${data[@]}" --out="$T/ddp" \
  >"$T/ddp.out" 2>&1 || fail "2-rank DDP training exited $?: $(tail -5 "$T/ddp.out")"
grep -q 'backend gloo' "$T/ddp.out" || fail "ddp: no backend line: $(cat "$T/ddp.out")"
grep -q 'test accuracy: 0\.[0-9]' "$T/ddp.out" || fail "ddp: no accuracy: $(cat "$T/ddp.out")"
[ -s "$T/ddp/checkpoint.bin" ] || fail "ddp: no checkpoint"
echo "ok   2-rank DDP training (gloo)"

timeout 120 "$RINGSIDE" train --strategy=ddp --workers=2 --backend=nccl --device=cuda "${data[@]}" \
  --out="$T/nccl" >"$T/nccl.out" 2>&1 && fail "--backend=nccl succeeded in a build without CUDA"
grep -q 'built without CUDA; rebuild with --config=cuda' "$T/nccl.out" \
  || fail "--backend=nccl: no rebuild hint: $(cat "$T/nccl.out")"
echo "ok   --backend=nccl refused: $(grep -m1 'built without CUDA' "$T/nccl.out")"
INSIDE

unshare -m bash "$T/inside.sh" "$RINGSIDE" "$T" "$LIB"
rc=$?
[ "$rc" -eq 0 ] || fail "the checks without CUDA failed (exit $rc)"
echo "PASS"
