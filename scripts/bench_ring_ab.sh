#!/usr/bin/env bash
# Side-by-side ring all-reduce of several ringside binaries, alternating them round by
# round in one run so that all see the same machine load (this machine is shared and
# noisy: compare ratios from one run, not absolute times across runs). Prints, per world
# size and message size (1, 4, 16, 64 MiB), each binary's median time over the rounds
# and its ratio to the first binary's median.
#   scripts/bench_ring_ab.sh [--rounds=N] [--workers=2,4] BASELINE_RINGSIDE OTHER_RINGSIDE...
# e.g. BASELINE = a build of commit 5a13034 (Gloo's own pipelined ring), OTHER =
# bazel-bin/experiments/ringside.
set -euo pipefail
rounds=5 workers=2,4
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --rounds=*) rounds=${1#--rounds=} ;;
    --workers=*) workers=${1#--workers=} ;;
    *) echo "$0: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ $# -lt 2 ]]; then
  echo "usage: $0 [--rounds=N] [--workers=2,4] BASELINE_RINGSIDE OTHER_RINGSIDE..." >&2
  exit 2
fi
bins=("$@")
IFS=, read -r -a worlds <<<"$workers"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for w in "${worlds[@]}"; do
    for i in "${!bins[@]}"; do
      # Rank 0's table rows: bytes floats time(us) algbw busbw #wrong.
      "${bins[$i]}" bench allreduce --workers="$w" --allreduce=ring | sed -n 's/^\[rank 0\] *//p' |
        awk -v i="$i" -v w="$w" -v bin="${bins[$i]}" '$1 ~ /^[0-9]+$/ {
          if ($6 != 0) { print bin ": wrong sums at " $1 " bytes, " w " ranks" > "/dev/stderr"; exit 1 }
          print i, w, $1, $3 / 1000 }' >>"$out"
    done
  done
done
median() {  # median of the times of binary $1, world $2, bytes $3
  awk -v i="$1" -v w="$2" -v b="$3" '$1 == i && $2 == w && $3 == b { print $4 }' "$out" | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
echo "# ring all-reduce, median ms over $rounds alternating rounds (x: ratio to binary 0)"
for i in "${!bins[@]}"; do echo "# binary $i: ${bins[$i]}"; done
for w in "${worlds[@]}"; do
  for mib in 1 4 16 64; do
    line=$(printf "ranks %d %3d MiB:" "$w" "$mib")
    base=$(median 0 "$w" $((mib << 20)))
    for i in "${!bins[@]}"; do
      m=$(median "$i" "$w" $((mib << 20)))
      line+=$(awk -v m="$m" -v b="$base" 'BEGIN { printf "  %8.1f (x%.2f)", m, m / b }')
    done
    echo "$line"
  done
done
