#!/usr/bin/env bash
# Transport security at the command line (docs/security.md): a shard started by hand
# with a token refuses workers with a missing or wrong token (one line, non-zero exit,
# promptly) and then trains its real workers as if nothing had happened; bad token
# sources are refused with one line; a by-hand shard without a token says so and
# listens on loopback only; launched PS and DDP jobs run with their generated token,
# which is in no child's command line; two DDP processes claiming one RANK stop the job
# naming the rank. Every process runs under timeout(1).
set -uo pipefail
RINGSIDE="$1"
source "$(dirname "$0")/proc_util.sh"
T="${TEST_TMPDIR:-$(mktemp -d)}"
TIMEOUT=10
failures=0
trap 'for j in $(jobs -p); do kill "$j" 2>/dev/null; done' EXIT
job=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5 --epochs=1
     --steps=20 --batch=8 --lr=0.05 --seed=3 --threads=1 --eval_batch=240 --timeout_s=$TIMEOUT)
TOKEN=0123456789abcdef0123456789abcdef
umask 077
echo "$TOKEN" >"$T/token"
echo "fedcba9876543210fedcba9876543210" >"$T/wrong"

# expect_refused NAME MESSAGE LOG RC: RC non-zero and LOG's last line one error line
# holding MESSAGE.
expect_refused() {
  local name=$1 message=$2 log=$3 rc=$4
  [ "$rc" -ne 0 ] || fail "$name: exited 0"
  [ "$rc" -ne 124 ] || fail "$name: timed out"
  grep -q '^ringside: error: ' "$log" || fail "$name: no error line: $(tail -2 "$log")"
  [ "$(grep -c '^ringside: error: ' "$log")" -eq 1 ] || fail "$name: more than one error line"
  grep -qF "$message" "$log" || fail "$name: expected '$message', got: $(tail -1 "$log")"
  if grep -qF "$TOKEN" "$log"; then fail "$name: the token is printed"; fi
}

# 1. A shard by hand with --token_file; rogue workers first, then the real ones.
P=$(free_port)
timeout 120 "$RINGSIDE" ps-server --shard=0 --listen="127.0.0.1:$P" --workers=2 --ps_shards=1 \
  --token_file="$T/token" "${job[@]}" >"$T/shard.log" 2>&1 &
shard=$!
start=$(date +%s)
timeout 60 "$RINGSIDE" ps-worker --worker_id=0 --ps_servers="127.0.0.1:$P" --workers=2 --ps_shards=1 \
  "${job[@]}" >"$T/none.log" 2>&1
expect_refused no_token "refused: the call carried no token" "$T/none.log" $?
RINGSIDE_TOKEN=fedcba9876543210fedcba9876543210 timeout 60 "$RINGSIDE" ps-worker --worker_id=1 \
  --ps_servers="127.0.0.1:$P" --workers=2 --ps_shards=1 "${job[@]}" >"$T/wrong.log" 2>&1
expect_refused wrong_env "refused: wrong token" "$T/wrong.log" $?
timeout 60 "$RINGSIDE" ps-worker --worker_id=0 --ps_servers="127.0.0.1:$P" --workers=2 --ps_shards=1 \
  --token_file="$T/wrong" "${job[@]}" >"$T/wrong_file.log" 2>&1
expect_refused wrong_file "refused: wrong token" "$T/wrong_file.log" $?
(( $(date +%s) - start <= 3 * TIMEOUT )) || fail "refusals took $(( $(date +%s) - start )) s"
grep -q "unauthenticated" "$T/shard.log" && fail "shard with a token says it is unauthenticated"
kill -0 "$shard" 2>/dev/null || fail "the shard did not survive the rogue workers: $(tail -2 "$T/shard.log")"
# The refused calls changed nothing: the real workers (ids 0 and 1, which the rogues
# claimed) register and train to the end, and the shard finishes normally.
RINGSIDE_TOKEN=$TOKEN timeout 120 "$RINGSIDE" ps-worker --worker_id=1 --ps_servers="127.0.0.1:$P" \
  --workers=2 --ps_shards=1 "${job[@]}" >"$T/w1.log" 2>&1 &
w1=$!
timeout 120 "$RINGSIDE" ps-worker --worker_id=0 --ps_servers="127.0.0.1:$P" --workers=2 --ps_shards=1 \
  --token_file="$T/token" "${job[@]}" >"$T/w0.log" 2>&1 || fail "worker 0 exited $?: $(tail -2 "$T/w0.log")"
wait "$w1" || fail "worker 1 exited $?: $(tail -2 "$T/w1.log")"
wait "$shard" || fail "shard exited $?: $(tail -2 "$T/shard.log")"
grep -q "^test loss: " "$T/w0.log" || fail "worker 0 printed no test loss"
grep -q "shard 0 done: 20 steps" "$T/shard.log" || fail "shard: $(tail -1 "$T/shard.log")"

# 2. Bad token sources: one line each, nothing started.
chmod 644 "$T/wrong"
timeout 30 "$RINGSIDE" ps-server --shard=0 --workers=1 --ps_shards=1 --token_file="$T/wrong" "${job[@]}" \
  >"$T/open.log" 2>&1
expect_refused open_file "chmod 600" "$T/open.log" $?
timeout 30 "$RINGSIDE" ps-server --shard=0 --workers=1 --ps_shards=1 --token_file="$T/missing" "${job[@]}" \
  >"$T/missing.log" 2>&1
expect_refused missing_file "cannot read it" "$T/missing.log" $?
RINGSIDE_TOKEN=short timeout 30 "$RINGSIDE" ps-server --shard=0 --workers=1 --ps_shards=1 "${job[@]}" \
  >"$T/short.log" 2>&1
expect_refused short_env "RINGSIDE_TOKEN: the token has 5 characters" "$T/short.log" $?
timeout 30 "$RINGSIDE" ps-server --shard=0 --workers=1 --ps_shards=1 --tls_cert="$T/token" "${job[@]}" \
  >"$T/tls.log" 2>&1
expect_refused partial_tls "TLS needs all of --tls_cert, --tls_key and --tls_ca" "$T/tls.log" $?

# 3. A by-hand shard without a token: one warning line; loopback only by default.
timeout 30 "$RINGSIDE" ps-server --shard=0 --workers=1 --ps_shards=1 "${job[@]}" >"$T/open_shard.log" 2>&1 &
open_shard=$!
for _ in $(seq 100); do grep -q "listening on port" "$T/open_shard.log" && break; sleep 0.1; done
port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$T/open_shard.log")
[ -n "$port" ] || fail "no listening line: $(cat "$T/open_shard.log")"
[ "$(grep -c 'ringside: warning: shard 0 at 127.0.0.1:0 is unauthenticated' "$T/open_shard.log")" -eq 1 ] \
  || fail "no single unauthenticated warning: $(cat "$T/open_shard.log")"
other=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -v '^127\.' | grep -v ':' | head -1)
if [ -z "$other" ]; then
  skip_part "this machine has no non-loopback IPv4 address to check the loopback default on"
elif [ -n "$port" ]; then
  /usr/bin/python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)' "$port" \
    || fail "the shard is not reachable on loopback"
  if /usr/bin/python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)' \
      "$other" "$port" 2>/dev/null; then
    fail "the by-hand shard is reachable on $other (not loopback only)"
  fi
fi
kill "$open_shard" 2>/dev/null; wait "$open_shard" 2>/dev/null

# 4. Launched jobs: authenticated by default, the token in no child's command line.
# check_children ROOT: sets SEEN to the number of ROOT's descendants whose environment
# holds a token; fails each whose token is not 64 hex digits or is in its command line.
# Runs in this shell (fail counts).
check_children() {
  local root=$1 p token
  SEEN=0
  for p in $(descendants "$root"); do
    token=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^RINGSIDE_TOKEN=//p')
    [ -n "$token" ] || continue
    SEEN=$((SEEN + 1))
    [[ "$token" =~ ^[0-9a-f]{64}$ ]] || fail "child $p: token is not 64 hex digits"
    if tr '\0' ' ' <"/proc/$p/cmdline" | grep -qF "$token"; then fail "child $p: token in its command line"; fi
  done
}
long=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5 --epochs=50
      --steps=2000 --batch=8 --lr=0.05 --seed=3 --threads=1 --eval_batch=240 --timeout_s=$TIMEOUT)
strategies=(ps)
not_ps_part "launched DDP job's token" && strategies+=(ddp)
for strategy in "${strategies[@]}"; do
  extra=()
  [ $strategy = ps ] && extra=(--ps_shards=1)
  timeout 180 "$RINGSIDE" train --strategy=$strategy --workers=2 "${extra[@]}" "${long[@]}" \
    --out="$T/launched_$strategy" >"$T/launched_$strategy.log" 2>&1 &
  root=$!
  # The children live a few seconds (less on a fast host, and a busy one may print the
  # first step late): look at them from the start, every 50 ms, until two are seen.
  SEEN=0 deadline=$(($(date +%s) + 60))
  while kill -0 "$root" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
    check_children "$root"
    [ "$SEEN" -ge 2 ] && break
    sleep 0.05
  done
  [ "$SEEN" -ge 2 ] || fail "launched $strategy: $SEEN children with a token"
  wait "$root" || fail "launched $strategy exited $?: $(tail -2 "$T/launched_$strategy.log")"
  grep -q "test loss: " "$T/launched_$strategy.log" || fail "launched $strategy: no test loss"
  grep -q "unauthenticated" "$T/launched_$strategy.log" && fail "launched $strategy: unauthenticated"
done

# 5. Two DDP processes claiming RANK=1 (of 3): every process exits non-zero within a
# bound, naming the rank.
if not_ps_part "two DDP processes claiming RANK=1"; then
  P=$(free_port)
  pids=()
  start=$(date +%s)
  for r in 0 1 1; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$P \
      RINGSIDE_RUN_ID=dup RINGSIDE_TOKEN=$TOKEN timeout 60 "$RINGSIDE" train --strategy=ddp --workers=3 \
      "${job[@]/--timeout_s=$TIMEOUT/--timeout_s=30}" >"$T/dup.${#pids[@]}.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2; do
    wait "${pids[$i]}"; rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "duplicate rank: process $i exited $rc"
    grep -q "duplicate RANK" "$T/dup.$i.log" || fail "duplicate rank: process $i: $(tail -1 "$T/dup.$i.log")"
    grep -qE "rank 1 was claimed|as rank 1 " "$T/dup.$i.log" \
      || fail "duplicate rank: process $i does not name rank 1: $(tail -1 "$T/dup.$i.log")"
  done
  (( $(date +%s) - start <= 20 )) || fail "duplicate rank took $(( $(date +%s) - start )) s (timeout 30)"
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "PASS"
