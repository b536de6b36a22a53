#!/usr/bin/env bash
# The command line per verb: `ringside --help` lists every verb; for each verb (taken
# from that list, so a new verb is covered without editing this file) `ringside VERB
# --help` exits 0 and lists the flags its usage names, each accepted by the verb, and no
# test hook; a flag of another verb is refused with exit status 2 and one error line;
# `--version`, `ringside` alone, torchrun's spellings for `launch`.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

# one_error_line NAME FILE: FILE is exactly one line "ringside: error: ...".
one_error_line() {
  [ "$(wc -l <"$2")" -eq 1 ] && grep -q '^ringside: error: ' "$2" || { fail "$1: stderr is not one error line:"; cat "$2"; }
}

# 1. The verb list, from --help, `help` and `-h` alike.
"$RINGSIDE" --help >"$T/help.out" 2>"$T/help.err" || fail "--help exited $?"
[ -s "$T/help.err" ] && fail "--help wrote to stderr: $(cat "$T/help.err")"
for alt in help -h; do
  "$RINGSIDE" $alt >"$T/alt.out" 2>&1 || fail "$alt exited $?"
  cmp -s "$T/help.out" "$T/alt.out" || fail "ringside $alt differs from --help"
done
mapfile -t verbs < <(sed -n '/^verbs:$/,/^$/p' "$T/help.out" | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
echo "verbs: ${verbs[*]}"
[ "${#verbs[@]}" -ge 12 ] || fail "only ${#verbs[@]} verbs listed"
for v in demo train ps-server ps-worker launch compare report calibrate simulate bench help version; do
  grep -qx "$v" <<<"$(printf '%s\n' "${verbs[@]}")" || fail "--help does not list $v"
done
for b in step allreduce pushpull; do
  grep -qE "^    $b " "$T/help.out" || fail "--help does not list bench $b"
done

# 2. Each verb's help.
hooks='--(flagfile|fromenv|tryfromenv|undefok|size_bytes|pin_cpu|helpfull|helpshort)[ =(]'
declare -A flags_of
all_flags=()
for v in "${verbs[@]}"; do
  out="$T/help-$v.out"
  "$RINGSIDE" "$v" --help >"$out" 2>"$T/help-$v.err"; rc=$?
  [ "$rc" -eq 0 ] || { fail "$v --help exited $rc: $(cat "$T/help-$v.err")"; continue; }
  grep -q "^  ringside $v" "$out" || fail "$v --help shows no usage line"
  "$RINGSIDE" help "$v" | cmp -s - "$out" || fail "ringside help $v differs from $v --help"
  grep -qE -- "$hooks" "$out" && fail "$v --help lists a hidden flag or test hook: $(grep -E -- "$hooks" "$out")"
  mapfile -t listed < <(sed -n 's/^  --\([a-z0-9_]*\) (default: .*/\1/p' "$out")
  flags_of[$v]=" ${listed[*]} "
  all_flags+=("${listed[@]}")
  # Every flag its usage lines name is listed, with a help line under it.
  # (torchrun's spellings with dashes are the same flags.)
  for f in $(sed -n '/^usage:$/,/^$/p' "$out" | grep -oE -- '--[a-z0-9][a-z0-9_-]*' |
             sed 's/^--//; s/-/_/g' | grep -vxE 'help|version' | sort -u); do
    [[ "${flags_of[$v]}" == *" $f "* ]] || fail "$v: usage names --$f, flag list does not"
  done
  # Every listed flag is accepted by the verb (given its own default).
  for f in "${listed[@]}"; do
    def=$(sed -n "s/^  --$f (default: \(.*\))\$/\1/p" "$out" | sed 's/^"\(.*\)"$/\1/')
    "$RINGSIDE" "$v" "--$f=$def" --help >/dev/null 2>"$T/accept.err" || fail "$v refuses its own --$f=$def: $(cat "$T/accept.err")"
  done
  echo "ok   $v --help: ${#listed[@]} flags"
done
[[ "${flags_of[bench]}" == *" listen "* ]] && fail "bench --help lists --listen (of its pushpull-server child)"

# 2b. Shared flags are described as each verb uses them, not in train's words
# (experiments/cli/commands.cc FlagHelpOverrides).
# help_line VERB FLAG: the description line under --FLAG in VERB's help.
help_line() { sed -n "/^  --$2 (default: /{n;p;q}" "$T/help-$1.out"; }
for pair in compare:out simulate:model simulate:batch calibrate:model calibrate:batch \
            calibrate:steps calibrate:out; do
  v=${pair%%:*}; f=${pair#*:}
  line=$(help_line "$v" "$f"); train_line=$(help_line train "$f")
  [ -n "$line" ] || { fail "$v --help does not describe --$f"; continue; }
  [ -n "$train_line" ] || { fail "train --help does not describe --$f"; continue; }
  [ "$line" != "$train_line" ] || fail "$v --help describes --$f in train's words: $line"
done
echo "ok   compare/simulate/calibrate describe --out/--model/--batch/--steps in their own words"

# 3. A flag of another verb is refused by every verb that does not take it.
mapfile -t all_flags < <(printf '%s\n' "${all_flags[@]}" | sort -u)
for v in "${verbs[@]}"; do
  for f in "${all_flags[@]}"; do
    [[ "${flags_of[$v]}" == *" $f "* ]] && continue
    "$RINGSIDE" "$v" "--$f=1" --help >/dev/null 2>"$T/foreign.err"; rc=$?
    [ "$rc" -eq 2 ] || fail "$v --$f=1 exited $rc, expected 2"
    one_error_line "$v --$f" "$T/foreign.err"
    grep -q "is not a flag of \`$v\`" "$T/foreign.err" || fail "$v --$f: $(cat "$T/foreign.err")"
    break  # One foreign flag per verb.
  done
done

# 4. --version and `version`.
for form in --version version; do
  out=$("$RINGSIDE" $form 2>&1); rc=$?
  [ "$rc" -eq 0 ] || fail "$form exited $rc"
  [[ "$out" =~ ^ringside\ [0-9]+\.[0-9]+\.[0-9]+\ \(build:\ (CPU|CUDA\ [0-9]+\.[0-9]+)\)$ ]] || fail "$form printed '$out'"
done
echo "ok   version: $("$RINGSIDE" --version)"

# 5. `ringside` alone: the usage on stderr, exit 2, ending with one error line.
"$RINGSIDE" >"$T/none.out" 2>"$T/none.err"; rc=$?
[ "$rc" -eq 2 ] || fail "ringside alone exited $rc, expected 2"
[ -s "$T/none.out" ] && fail "ringside alone wrote to stdout"
grep -q '^  train ' "$T/none.err" || fail "ringside alone printed no verb list"
[ "$(grep -c 'ringside: error:' "$T/none.err")" -eq 1 ] && tail -n 1 "$T/none.err" | grep -q '^ringside: error: ' ||
  fail "ringside alone: not one error line, last"

# 6. launch: torchrun's spellings, and the program's own flags are left to it.
out=$(timeout 60 "$RINGSIDE" launch --nproc-per-node=2 --master-port 0 sh -c 'echo "$WORLD_SIZE $0 $1"' --help --nnodes=9 2>&1)
rc=$?
[ "$rc" -eq 0 ] || fail "launch with torchrun spellings exited $rc: $out"
grep -qx '\[rank 1\] 2 --help --nnodes=9' <<<"$out" || fail "launch did not pass the program's words untouched: $out"
echo "ok   launch --nproc-per-node=2 PROGRAM --help: $(echo "$out" | head -n 1)"

if [ "$failures" -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo "all checks passed"
