#!/usr/bin/env bash
# Kill at a random step and resume (issue 23, "checkpoints that cannot lie"): for DDP
# with 2 ranks and PS with 2 and 4 workers, a job SIGKILLed (the launcher and every
# process it started, at once) at a random step after its first checkpoint and then
# resumed with --resume ends with a checkpoint byte-identical to the same job run
# without interruption, and every metrics file (each rank's, each shard's) holds every
# step exactly once, in order, every line whole. Then the newest checkpoint of a killed
# job is damaged (one byte of its header): the resume says so in one warning line
# naming the damaged file and the one it uses instead, falls back to it, and still
# ends byte-identical (DDP with 2 ranks, PS with 2 workers and a single process).
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"   # compare_checkpoints.py: the size of a difference.
PY=/usr/bin/python3
T="${TEST_TMPDIR:-$(mktemp -d)}"
N=200          # Steps of every job (PS with 4 workers: past an epoch's end at 125).
EVERY=10       # --checkpoint_every.
common=(--model=mlp:784-128-64-10 --dataset=synthetic:train=4000,test=200,seed=5
        --epochs=4 --steps=$N --batch=8 --lr=0.05 --momentum=0.9 --weight_decay=1e-4
        --seed=3 --threads=1 --eval_batch=200 --checkpoint_every=$EVERY --timeout_s=30)
failures=0
source "$(dirname "$0")/proc_util.sh"  # fail, descendants

# lines FILE: FILE's line count, 0 while it does not exist.
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

# ckpt_step FILE: the step in a checkpoint's header (common/checkpoint.h layout; the
# header's step is field 4, a varint).
ckpt_step() {
  $PY - "$1" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
(h,) = struct.unpack_from("<I", data, 12)
header, pos, step = data[16:16 + h], 0, 0
def varint(pos):
    v = s = 0
    while True:
        b = header[pos]; pos += 1; v |= (b & 0x7F) << s; s += 7
        if b < 0x80: return v, pos
while pos < len(header):
    key, pos = varint(pos)
    if key & 7 == 0:
        v, pos = varint(pos)
        if key >> 3 == 4: step = v
    elif key & 7 == 2:
        n, pos = varint(pos); pos += n
    elif key & 7 == 5: pos += 4
    elif key & 7 == 1: pos += 8
print(step)
EOF
}

# steps_once FILE [EXPECTED_FILE]: FILE's records are steps 0..N-1 once each, in order
# (or, given EXPECTED_FILE, the steps of that file), and every line is whole JSON.
steps_once() {
  $PY - "$@" "$N" <<'EOF'
import json, sys
def steps(path):
    out = []
    for i, line in enumerate(open(path), 1):
        try:
            out.append(json.loads(line)["step"])
        except Exception as e:
            sys.exit("%s:%d: not a whole record: %r" % (path, i, line[:60]))
    return out
got = steps(sys.argv[1])
want = steps(sys.argv[2]) if len(sys.argv) > 3 else list(range(int(sys.argv[-1])))
if got != want:
    dup = sorted({s for s in got if got.count(s) > 1})
    missing = sorted(set(want) - set(got))
    sys.exit("%s: %d records, want %d; duplicated steps %s, missing %s" %
             (sys.argv[1], len(got), len(want), dup[:10], missing[:10]))
EOF
}

# job NAME ARGS...: runs one job to the end (bounded), writing to $T/NAME.
job() {
  local name=$1 rc; shift
  timeout 180 "$RINGSIDE" train "${common[@]}" "$@" --out="$T/$name" >"$T/$name.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || { fail "$name: exited $rc"; tail -5 "$T/$name.log"; return 1; }
}

# killed NAME ARGS...: starts the job in a session of its own, waits until rank 0
# (worker 0) recorded a random step in [FIRST, N / 2) (FIRST: the variable KILL_FROM,
# default EVERY + 5, past the first checkpoint), then SIGKILLs the launcher and every
# process under it at once. Fails unless it was killed mid-run after a checkpoint.
killed() {
  local name=$1 kill_at pid rc deadline pids step first=${KILL_FROM:-$((EVERY + 5))}; shift
  kill_at=$((first + RANDOM % (N / 2 - first)))
  rm -rf "${T:?}/$name"
  setsid timeout 180 "$RINGSIDE" train "${common[@]}" "$@" --out="$T/$name" >"$T/$name.killed.log" 2>&1 &
  pid=$!
  deadline=$(($(date +%s) + 120))
  local metrics="$T/$name/metrics.rank0.jsonl"
  [ "${1:-}" = "--strategy=single" ] && metrics="$T/$name/metrics.jsonl"
  until [ "$(lines "$metrics")" -ge "$kill_at" ]; do
    if ! kill -0 "$pid" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
      kill -KILL -- -"$pid" 2>/dev/null
      wait "$pid"
      fail "$name: the job ended (or hung) before step $kill_at (exit $?)"; tail -5 "$T/$name.killed.log"
      return 1
    fi
    sleep 0.005
  done
  # Freeze the whole tree first (the session's group at once, then every descendant
  # found, should one have left the group), so nothing moves on or starts while it is
  # collected; then kill everything.
  kill -STOP -- -"$pid" 2>/dev/null
  pids="$pid $(descendants "$pid")"
  kill -STOP $pids 2>/dev/null
  pids="$pids $(descendants "$pid")"
  kill -KILL -- -"$pid" 2>/dev/null
  kill -KILL $pids 2>/dev/null
  wait "$pid"
  rc=$?
  [ "$rc" -eq 137 ] || { fail "$name: the killed launcher exited $rc, not by SIGKILL"; return 1; }
  for p in $pids; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    kill -0 "$p" 2>/dev/null && { fail "$name: process $p outlived SIGKILL"; return 1; }
  done
  [ -s "$T/$name/checkpoint.bin" ] || { fail "$name: no checkpoint before the kill at step $kill_at"; return 1; }
  step=$(ckpt_step "$T/$name/checkpoint.bin")
  if [ "$step" -lt "$EVERY" ] || [ "$step" -ge "$N" ]; then
    fail "$name: killed at step $kill_at, but its checkpoint holds step $step"; return 1
  fi
  echo "     $name: killed after step $(lines "$metrics") (aimed at $kill_at), checkpoint at step $step"
}

# same_end REF NAME: NAME's final checkpoint is REF's byte for byte (else the size of
# the difference is printed).
same_end() {
  if cmp -s "$T/$1/checkpoint.bin" "$T/$2/checkpoint.bin"; then return 0; fi
  $PY "$COMPARE" 0 "$T/$1/checkpoint.bin" "$T/$2/checkpoint.bin"
  fail "$2: final checkpoint differs from the uninterrupted run's"
  return 1
}

# metrics_once REF NAME: every metrics file of NAME holds each step once (ranks:
# 0..N-1; shards: the steps of REF's file for that shard).
metrics_once() {
  local f base ok=0
  for f in "$T/$2"/metrics*.jsonl; do
    base=$(basename "$f")
    [ -s "$T/$1/$base" ] || { fail "$2: $base has no counterpart in $1"; ok=1; continue; }
    if [[ $base == metrics.shard* ]]; then
      steps_once "$f" "$T/$1/$base" || { fail "$2: $base"; ok=1; }
    else
      steps_once "$f" || { fail "$2: $base"; ok=1; }
    fi
  done
  return $ok
}

# kill_resume CASE ARGS...: the uninterrupted job, then killed and resumed.
kill_resume() {
  local name=$1 start; shift
  start=$(date +%s)
  job "$name.ref" "$@" || return
  killed "$name" "$@" || return
  job "$name" "$@" --resume || return
  grep -q 'no checkpoint in .* yet' "$T/$name.log" && fail "$name: the resume started over"
  local bad=$failures
  same_end "$name.ref" "$name"
  metrics_once "$name.ref" "$name"
  [ "$failures" -eq "$bad" ] && echo "ok   $name: killed, resumed, same end, each step once ($(($(date +%s) - start)) s)"
}

# fallback CASE ARGS...: a killed job whose newest checkpoint is then damaged resumes
# from the one before it, says so once, and ends as the uninterrupted CASE.ref did.
fallback() {
  local name=$1 ref=$2 step kept bad=$failures; shift 2
  # Past the second checkpoint, so that an older one is kept to fall back to.
  KILL_FROM=$((2 * EVERY + 5)) killed "$name" "$@" || return
  step=$(ckpt_step "$T/$name/checkpoint.bin")
  kept=$(ls "$T/$name" | grep -E '^checkpoint\.[0-9]+\.bin$' | sort -t. -k2 -n | tail -n 1)
  [ -n "$kept" ] || { fail "$name: no older checkpoint kept beside step $step (--keep_checkpoints default 2)"; return; }
  # The file on its own inode first: a kill inside the checkpoint's rotation leaves the
  # newest checkpoint and the kept one as two names of one file (the rotation links
  # before it renames), and damaging it in place would damage both, which the test
  # does not mean (a busy host's late kill made that happen once).
  cp "$T/$name/checkpoint.bin" "$T/$name/checkpoint.bin.copy"
  mv "$T/$name/checkpoint.bin.copy" "$T/$name/checkpoint.bin"
  # One byte of the header (the checksum covers it): the step the file says.
  printf '\x7f' | dd of="$T/$name/checkpoint.bin" bs=1 seek=20 conv=notrunc status=none
  job "$name" "$@" --resume || return
  local line
  line="ringside: warning: checkpoint $T/$name/checkpoint.bin fails its checksum (stored [0-9a-f]*, computed [0-9a-f]*); resuming from $T/$name/$kept (step ${kept//[!0-9]/}) instead"
  [ "$(grep -c 'ringside: warning: checkpoint ' "$T/$name.log")" -eq 1 ] \
    || fail "$name: not exactly one warning line about checkpoints"
  grep -q "^\(\[[a-z]* 0\] \)\?$line\$" "$T/$name.log" \
    || { fail "$name: no warning naming the damaged checkpoint and the one used"; grep warning "$T/$name.log"; }
  same_end "$ref" "$name"
  metrics_once "$ref" "$name"
  [ "$failures" -eq "$bad" ] && echo "ok   $name: damaged newest checkpoint (step $step), fell back to $kept, same end"
}

kill_resume ps2 --strategy=ps --workers=2 --ps_shards=2
kill_resume ps4 --strategy=ps --workers=4 --ps_shards=2
fallback ps2.fallback ps2.ref --strategy=ps --workers=2 --ps_shards=2
if not_ps_part "DDP and single, killed and resumed"; then
  kill_resume ddp2 --strategy=ddp --workers=2
  fallback ddp2.fallback ddp2.ref --strategy=ddp --workers=2
  job single.ref --strategy=single && fallback single.fallback single.ref --strategy=single
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
