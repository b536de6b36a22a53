#!/usr/bin/env bash
# DDP never hangs: a rank killed mid-training, an unreachable store, a port in use, a
# rank that never arrives and a configuration mismatch all end every surviving rank
# with a non-zero exit and one clear error line, within bounded time. Ranks are started
# directly (not through the launcher, which would stop them itself) so that their own
# failure detection is what is tested.
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error, the device
TIMEOUT=$(device_timeout 4)
rank() {  # rank R WORLD PORT LOG ARGS...: starts one rank in the background.
  local r=$1 w=$2 p=$3 log=$4; shift 4
  RANK=$r WORLD_SIZE=$w LOCAL_RANK=$r LOCAL_WORLD_SIZE=$w MASTER_ADDR=127.0.0.1 MASTER_PORT=$p \
    RINGSIDE_RUN_ID=faults timeout 120 "$RINGSIDE" train --strategy=ddp --threads=1 \
    --timeout_s=$TIMEOUT --model=mlp:784-64-10 --batch=32 "${DEVICE_ARGS[@]}" "${BACKEND_ARGS[@]}" "$@" >"$log" 2>&1 &
}
# expect_error (test_lib.sh) NAME PID LOG REGEX: the rank exits non-zero (not by
# timeout(1)), and its last line is the one error line, matching REGEX.

# Parts 1, 2 and 4 wait on a time-out each: they run at once (parts, test_lib.sh),
# beside parts 3, 5 and 6.
PART_TRAP='for j in $(jobs -p); do kill "$j" 2>/dev/null; done'
trap "$PART_TRAP" EXIT

# 1. Kill rank 2 of 3 mid-training: ranks 0 and 1 fail within 2 x timeout, naming rank 2.
part_kill() {
  local P r k0 k1 k2 i t0 e
  P=$(free_port)
  for r in 0 1 2; do rank $r 3 "$P" "$T/kill$r.log" --dataset=synthetic:train=60000,test=100 --epochs=50; eval "k$r=$!"; done
  for i in $(seq 100); do grep -qE 'step [1-9][0-9]+/' "$T/kill0.log" 2>/dev/null && break; sleep 0.2; done
  grep -q 'step' "$T/kill0.log" || fail "kill: training never started: $(cat "$T/kill0.log")"
  pkill -KILL -P "$k2"; t0=$(now)  # SIGKILL the rank itself (the child of timeout)
  # Rank 1 may also find rank 0 gone by the time it asks (rank 0 exits on its own error),
  # so the lost peers it names must include 2: "peer rank 2" or "peer rank 0, 2".
  expect_error kill_rank0 "$k0" "$T/kill0.log" 'rank ([0-9]+, )*2\b'
  expect_error kill_rank1 "$k1" "$T/kill1.log" 'rank ([0-9]+, )*2\b'
  e=$(elapsed_since "$t0"); (( $(echo "$e < 2 * $TIMEOUT" | bc) )) || fail "kill: survivors took ${e}s"
  wait "$k2" 2>/dev/null
}

# 2. The store (MASTER_ADDR:MASTER_PORT) is unreachable: nothing listens there.
part_unreachable() {
  local P t0 e
  P=$(free_port); t0=$(now)
  rank 1 2 "$P" "$T/unreach.log" --dataset=synthetic:train=600,test=100
  expect_error unreachable $! "$T/unreach.log" "cannot reach the store at 127.0.0.1:$P"
  e=$(elapsed_since "$t0"); (( $(echo "$e < 2 * $TIMEOUT" | bc) )) || fail "unreachable: took ${e}s"
}

# 3. Rank 0 cannot host the store: the port is in use.
/usr/bin/python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)' >"$T/busy.port" &
busy=$!
for i in $(seq 50); do [ -s "$T/busy.port" ] && break; sleep 0.1; done
P=$(cat "$T/busy.port")
rank 0 2 "$P" "$T/busy.log" --dataset=synthetic:train=600,test=100
expect_error port_in_use $! "$T/busy.log" "cannot listen on 127.0.0.1:$P"
kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null

# 4. Rank 1 of 2 never arrives.
part_absent() {
  local P t0 e
  P=$(free_port); t0=$(now)
  rank 0 2 "$P" "$T/absent.log" --dataset=synthetic:train=600,test=100
  expect_error never_arrives $! "$T/absent.log" "rank\(s\) 1 never arrived within ${TIMEOUT}s"
  e=$(elapsed_since "$t0"); (( $(echo "$e < 2 * $TIMEOUT" | bc) )) || fail "absent: took ${e}s"
}
part_start "1. rank 2 killed" part_kill
part_start "2. the store unreachable" part_unreachable
part_start "4. rank 1 never arrives" part_absent

# 5. Ranks that disagree: every rank stops, naming the differing field.
P=$(free_port)
rank 0 2 "$P" "$T/cfg0.log" --dataset=synthetic:train=600,test=100; c0=$!
rank 1 2 "$P" "$T/cfg1.log" --dataset=synthetic:train=600,test=100 --lr=0.5; c1=$!
expect_error mismatch_rank0 "$c0" "$T/cfg0.log" 'rank 1 runs a different configuration than rank 0: modified: lr: 0.02 -> 0.5'
expect_error mismatch_rank1 "$c1" "$T/cfg1.log" 'rank 1 runs a different configuration than rank 0: modified: lr: 0.02 -> 0.5'

# 6. Environment errors.
RANK=3 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1234 "$RINGSIDE" train --strategy=ddp >"$T/env.log" 2>&1 &
expect_error bad_rank $! "$T/env.log" 'RANK=3 is outside \[0, WORLD_SIZE=2\)'
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "$RINGSIDE" train --strategy=ddp >"$T/env2.log" 2>&1 &
expect_error no_port $! "$T/env2.log" 'MASTER_PORT is not set'

parts_wait
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo PASS
