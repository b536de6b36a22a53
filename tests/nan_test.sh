#!/usr/bin/env bash
# Numerical safety (issue 23): flags that cannot give finite training are refused at
# validation (exit 2, one line); a learning rate of 1e30 (finite, but the first update
# sends the parameters to ~1e27 and the next forward overflows) stops single, DDP (2
# ranks) and PS (2 workers) jobs within the step the non-finite value appears, with one
# line naming the step and the rank or worker, a non-zero exit, and the checkpoint on
# disk the last good one (every float finite, written before the failing step); with
# --nan_policy=skip_step the same runs finish with finite parameters and every
# skipped step recorded in the metrics and warned about.
set -uo pipefail
RINGSIDE="$1"
CHECK="$2"  # check_finite_checkpoint.py
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error
common=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5 --batch=16
        --steps=12 --threads=1 --eval_batch=240 --timeout_s=10 --checkpoint_every=1)

# 1. Refused at validation: exit 2 and one error line naming the flag.
refused() {  # refused NAME REGEX ARGS...
  local name=$1 regex=$2 rc; shift 2
  timeout 60 "$RINGSIDE" train "${common[@]}" "$@" >"$T/$name.out" 2>"$T/$name.err"; rc=$?
  if [ "$rc" -ne 2 ]; then fail "$name: exit status $rc, expected 2"; cat "$T/$name.err"; return; fi
  [ "$(wc -l <"$T/$name.err")" -eq 1 ] || { fail "$name: not one line: $(cat "$T/$name.err")"; return; }
  grep -qE "^ringside: error: .*$regex" "$T/$name.err" || { fail "$name: /$regex/ not in $(cat "$T/$name.err")"; return; }
  echo "ok   $name: $(cat "$T/$name.err")"
}
refused lr_inf '--lr must be finite' --lr=inf
refused lr_overflow '--lr must be finite' --lr=1e39  # inf once converted to float
refused lr_nan '--lr must be' --lr=nan
refused momentum_nan '--momentum must be' --momentum=nan
refused weight_decay_inf '--weight_decay must be finite' --weight_decay=inf
refused ddp_lr_inf '--lr must be finite' --strategy=ddp --workers=2 --lr=inf
refused ps_lr_inf '--lr must be finite' --strategy=ps --workers=2 --lr=inf
refused nan_policy_bogus "--nan_policy must be stop or skip_step, got 'bogus'" --nan_policy=bogus

# 2. Stop (the default): lr=1e30 ends the job within the failing step.
stops() {  # stops NAME WHO ARGS...: WHO is rank or worker
  local name=$1 who=$2 rc line step t0 t1; shift 2
  local out="$T/$name"
  t0=$(date +%s)
  timeout 120 "$RINGSIDE" train "${common[@]}" --lr=1e30 --out="$out" "$@" >"$T/$name.out" 2>"$T/$name.err"; rc=$?
  t1=$(date +%s)
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then fail "$name: exit status $rc"; tail -n 5 "$T/$name.err"; return; fi
  # The process's own line (the launcher may pass it on behind a prefix).
  line=$(grep -hoE "step [0-9]+, $who [0-9]+: non-finite [a-z ]+ in (layer|bucket) .*\(elements [0-9]+-[0-9]+\).*|step [0-9]+, $who [0-9]+: non-finite loss \(.*\)" \
         "$T/$name.err" "$T/$name.out" | head -n 1)
  [ -n "$line" ] || { fail "$name: no line naming step, $who and range: $(tail -n 5 "$T/$name.err")"; return; }
  step=$(echo "$line" | sed -E 's/^step ([0-9]+),.*/\1/')
  (( t1 - t0 < 60 )) || fail "$name: took $((t1 - t0))s"
  grep -q 'test loss' "$T/$name.out" "$T/$name.err" && fail "$name: trained on to a test loss"
  [ -f "$out/checkpoint.bin" ] || { fail "$name: no checkpoint"; return; }
  /usr/bin/python3 "$CHECK" "$out/checkpoint.bin" "$step" >"$T/$name.check" 2>&1 ||
    { fail "$name: $(cat "$T/$name.check")"; return; }
  echo "ok   $name (exit $rc, $((t1 - t0))s): $line; $(cat "$T/$name.check")"
}
stops single_stop rank --strategy=single
stops ddp_stop rank --strategy=ddp --workers=2
stops ps_stop worker --strategy=ps --workers=2 --ps_shards=1

# 3. skip_step: the same runs finish, every skipped step recorded and warned about.
skips() {  # skips NAME ARGS...
  local name=$1 rc recorded warned; shift
  local out="$T/$name"
  timeout 120 "$RINGSIDE" train "${common[@]}" --lr=1e30 --nan_policy=skip_step --out="$out" "$@" \
    >"$T/$name.out" 2>"$T/$name.err"; rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit status $rc"; tail -n 5 "$T/$name.err"; return; fi
  /usr/bin/python3 "$CHECK" "$out/checkpoint.bin" 12 >"$T/$name.check" 2>&1 ||
    { fail "$name: $(cat "$T/$name.check")"; return; }
  recorded=$(cat "$out"/metrics*.jsonl | grep -cE '"skipped_?[nN]onfinite": ?true')
  warned=$(cat "$T/$name.out" "$T/$name.err" | grep -cE 'warning: step [0-9]+, (rank|worker) [0-9]+: non-finite value, step skipped')
  (( recorded > 0 )) || { fail "$name: no skipped step in the metrics"; return; }
  [ "$recorded" -eq "$warned" ] || { fail "$name: $recorded steps recorded skipped, $warned warnings"; return; }
  echo "ok   $name: $recorded skipped steps recorded and warned; $(cat "$T/$name.check")"
}
skips single_skip --strategy=single
skips ddp_skip --strategy=ddp --workers=2
skips ps_skip --strategy=ps --workers=2 --ps_shards=1

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all nan checks passed"
