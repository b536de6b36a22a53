#!/usr/bin/env bash
# `ringside collective OP --ranks=N --elements=E [--root=R]`: every collective on a few
# worlds and sizes (N = 1, E = 0, E = 1, odd E, roots first and last) ends with the
# closed-form check, prints one line per rank before and after and the bytes per rank,
# and shows known values; bad input gives exactly one error line and exit status 2.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
OPS=(broadcast scatter gather reduce all-gather all-reduce reduce-scatter all-to-all)

source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

# run NAME ARGS...: runs `ringside collective ARGS` into $T/NAME.out (stderr .err);
# checks exit status 0, the header, N rank lines in each of before/after/bytes, the
# final check line and a clean stderr.
run() {
  local name="$1"; shift
  local out="$T/$name.out" rc
  timeout 120 "$RINGSIDE" collective "$@" >"$out" 2>"$T/$name.err"; rc=$?
  local op="$1" n e
  n=$(printf '%s\n' "$@" | sed -n 's/^--ranks=//p')
  e=$(printf '%s\n' "$@" | sed -n 's/^--elements=//p')
  if [ "$rc" -ne 0 ]; then fail "$name: exit status $rc"; cat "$T/$name.err"; return 1; fi
  if ! head -n 1 "$out" | grep -qE "^collective $op: $n ranks?, $e elements? per rank, backend gloo"; then
    fail "$name: header"; cat "$out"; return 1
  fi
  if ! grep -q '^inputs: rank r holds [0-9]*r + i at element i' "$out"; then fail "$name: inputs line"; cat "$out"; return 1; fi
  local section count
  for section in before after bytes; do
    count=$(awk -v s="$section" '/^[a-z]/ { on = index($0, s) == 1 } on && /^  rank [0-9]+: / { c++ } END { print c + 0 }' "$out")
    if [ "$count" -ne "$n" ]; then fail "$name: $count rank lines in '$section', want $n"; cat "$out"; return 1; fi
  done
  if [ "$(tail -n 1 "$out")" != "check: every rank's buffer matches the closed form" ]; then
    fail "$name: last line"; cat "$out"; return 1
  fi
  if [ -s "$T/$name.err" ]; then fail "$name: stderr not empty"; cat "$T/$name.err"; return 1; fi
  echo "ok   $name"
}

# expect_line NAME LINE: the output of case NAME holds LINE exactly.
expect_line() {
  if ! grep -qxF -- "$2" "$T/$1.out"; then fail "$1: no line '$2'"; cat "$T/$1.out"; fi
}

for op in "${OPS[@]}"; do
  for ne in 1:0 1:1 1:7 2:1 3:7 4:6 5:13 8:3; do
    n=${ne%%:*}; e=${ne##*:}
    case "$op" in
      broadcast|scatter|gather|reduce)
        run "${op}_${n}_${e}_root0" "$op" --ranks="$n" --elements="$e" --root=0
        [ "$n" -gt 1 ] && run "${op}_${n}_${e}_rootlast" "$op" --ranks="$n" --elements="$e" --root=$((n - 1))
        ;;
      *) run "${op}_${n}_${e}" "$op" --ranks="$n" --elements="$e" ;;
    esac
  done
done

# Known values (inputs: rank r element i = 10r + i).
run all_reduce_4_6 all-reduce --ranks=4 --elements=6 && {
  expect_line all_reduce_4_6 "  rank 0: [0 1 2 3 4 5]"
  expect_line all_reduce_4_6 "  rank 3: [30 31 32 33 34 35]"
  expect_line all_reduce_4_6 "  rank 2: [60 64 68 72 76 80]"
  expect_line all_reduce_4_6 "result: every rank holds the sum over ranks: element i = 60 + 4i"
  # Recursive doubling (auto, small buffers): lg 4 = 2 exchanges of 24 bytes.
  expect_line all_reduce_4_6 "  rank 1: sent 48, received 48"
}
run scatter_3_2 scatter --ranks=3 --elements=2 && {
  expect_line scatter_3_2 "  rank 0: [0 1 2 3 4 5]"
  expect_line scatter_3_2 "  rank 1: (no input: only the root's is read)"
  expect_line scatter_3_2 "  rank 1: [2 3]"
  expect_line scatter_3_2 "  rank 2: [4 5]"
  expect_line scatter_3_2 "  rank 0: sent 16, received 0"
  expect_line scatter_3_2 "  rank 2: sent 0, received 8"
}
run gather_3_1 gather --ranks=3 --elements=1 --root=1 && {
  expect_line gather_3_1 "  rank 1: [0 10 20]"
  expect_line gather_3_1 "  rank 0: (no output: only the root receives)"
  expect_line gather_3_1 "  rank 1: sent 0, received 8"
}
run reduce_3_2 reduce --ranks=3 --elements=2 --root=2 && {
  expect_line reduce_3_2 "  rank 2: [30 33]"
  expect_line reduce_3_2 "  rank 0: [0 1]"
}
run broadcast_3_3 broadcast --ranks=3 --elements=3 --root=2 && {
  expect_line broadcast_3_3 "  rank 0: [20 21 22]"
}
run all_gather_2_2 all-gather --ranks=2 --elements=2 && expect_line all_gather_2_2 "  rank 1: [0 1 10 11]"
run reduce_scatter_2_2 reduce-scatter --ranks=2 --elements=2 && {
  expect_line reduce_scatter_2_2 "  rank 0: [10 12]"
  expect_line reduce_scatter_2_2 "  rank 1: [14 16]"
}
run all_to_all_2_2 all-to-all --ranks=2 --elements=2 && {
  expect_line all_to_all_2_2 "  rank 1: [10 11 12 13]"
  expect_line all_to_all_2_2 "  rank 0: [0 1 10 11]"
  expect_line all_to_all_2_2 "  rank 1: [2 3 12 13]"
  expect_line all_to_all_2_2 "  total: sent 16, received 16"
}
# Long buffers are elided in the middle; the inputs' scale grows with their length.
run all_reduce_2_20 all-reduce --ranks=2 --elements=20 && {
  expect_line all_reduce_2_20 "inputs: rank r holds 100r + i at element i"
  expect_line all_reduce_2_20 "  rank 1: [100 101 102 103 104 105 ... 114 115 116 117 118 119] (20 elements)"
}

# Bad input: one line on stderr, "ringside: error: ...", exit status 2, nothing on stdout.
expect_usage_error() {
  local name="$1" regex="$2"; shift 2
  local rc lines
  timeout 60 "$RINGSIDE" "$@" >"$T/$name.out" 2>"$T/$name.err"; rc=$?
  lines=$(wc -l <"$T/$name.err")
  if [ "$rc" -ne 2 ]; then
    fail "$name: exit status $rc, want 2"; cat "$T/$name.err"
  elif [ "$lines" -ne 1 ] || ! grep -qE -- "^ringside: error: .*$regex" "$T/$name.err"; then
    fail "$name: want one error line matching /$regex/"; cat "$T/$name.err"
  elif [ -s "$T/$name.out" ]; then
    fail "$name: output on stdout"; cat "$T/$name.out"
  else
    echo "ok   $name: $(cat "$T/$name.err")"
  fi
}
expect_usage_error unknown_op "unknown collective 'allreduce' \(expected one of: broadcast, scatter, gather, reduce, all-gather, all-reduce, reduce-scatter, all-to-all\)" \
  collective allreduce --ranks=2 --elements=1
expect_usage_error no_op "needs a collective" collective --ranks=2
expect_usage_error ranks_zero "--ranks must be >= 1 \(got 0\)" collective all-reduce --ranks=0
expect_usage_error ranks_negative "--ranks must be >= 1 \(got -3\)" collective broadcast --ranks=-3
expect_usage_error ranks_too_many "--ranks must be at most 64 \(got 65\)" collective all-reduce --ranks=65
expect_usage_error elements_negative "--elements must be >= 0 \(got -1\)" collective all-gather --ranks=2 --elements=-1
expect_usage_error elements_too_many "--elements=100000000 is too large for --ranks=4" collective all-to-all --ranks=4 --elements=100000000
expect_usage_error root_too_big "--root=3 is not a rank: it must be in \[0, 3\) with --ranks=3" collective scatter --ranks=3 --root=3
expect_usage_error root_negative "--root=-1 is not a rank" collective reduce --ranks=3 --root=-1
expect_usage_error root_without_root "all-reduce has no root" collective all-reduce --ranks=3 --root=1
expect_usage_error timeout_zero "--timeout_s must be >= 1" collective gather --ranks=2 --timeout_s=0

if [ "$failures" -ne 0 ]; then echo "$failures case(s) failed"; exit 1; fi
echo "all cases passed"
