#!/usr/bin/env bash
# `ringside launch`: environment, output prefixes, and failure handling (one rank fails
# -> the others are stopped, the exit status is non-zero and names the rank).
set -uo pipefail
RINGSIDE="$1"
T="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }

# 1. Every rank gets torchrun's variables; every line carries its rank's prefix.
out="$(timeout 60 "$RINGSIDE" launch --nproc_per_node=3 --master_port=0 -- \
  sh -c 'echo "env $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR"; echo second line')"
rc=$?
[ "$rc" -eq 0 ] || fail "clean launch exited $rc: $out"
for r in 0 1 2; do
  echo "$out" | grep -qx "\[rank $r\] env $r $r 3 3 127.0.0.1" || fail "rank $r env line missing: $out"
  echo "$out" | grep -qx "\[rank $r\] second line" || fail "rank $r second line missing"
done
port=$(timeout 60 "$RINGSIDE" launch --nproc_per_node=2 --master_port=0 -- sh -c 'echo $MASTER_PORT' | sed -n 's/^\[rank 0\] //p')
[ "$port" -gt 0 ] 2>/dev/null || fail "no master port picked: '$port'"

# 2. Multi-node placement: node 1 of 2 with 2 processes each holds ranks 2 and 3.
out="$(timeout 60 "$RINGSIDE" launch --nproc_per_node=2 --nnodes=2 --node_rank=1 --master_port=12345 -- \
  sh -c 'echo "$RANK/$WORLD_SIZE local $LOCAL_RANK port $MASTER_PORT"')"
echo "$out" | grep -qx "\[rank 2\] 2/4 local 0 port 12345" || fail "node_rank placement: $out"
echo "$out" | grep -qx "\[rank 3\] 3/4 local 1 port 12345" || fail "node_rank placement: $out"

# 3. One rank fails: the others (sleeping 60 s) are stopped at once.
start=$(date +%s)
timeout 60 "$RINGSIDE" launch --nproc_per_node=3 --master_port=0 -- \
  sh -c 'if [ "$RANK" = 1 ]; then sleep 0.3; echo dying; exit 3; fi; sleep 60' >"$T/o" 2>"$T/e"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] || fail "a failed rank gave exit status 0"
[ "$rc" -ne 124 ] || fail "launcher hung"
[ "$elapsed" -lt 20 ] || fail "took ${elapsed}s to stop the others"
grep -q "rank 1 failed: exited with status 3" "$T/e" || fail "error does not name rank 1: $(cat "$T/e")"
grep -q "\[rank 1\] dying" "$T/o" || fail "output of the failed rank lost"

# 4. A rank killed by a signal is reported as such.
timeout 60 "$RINGSIDE" launch --nproc_per_node=2 --master_port=0 -- \
  sh -c 'if [ "$RANK" = 0 ]; then kill -9 $$; fi; sleep 60' >/dev/null 2>"$T/e2"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "killed rank: exit $rc"
grep -q "rank 0 failed: killed by signal 9" "$T/e2" || fail "signal not reported: $(cat "$T/e2")"

# 5. A command that does not exist fails cleanly.
timeout 60 "$RINGSIDE" launch --nproc_per_node=2 --master_port=0 -- /nonexistent/program >"$T/o3" 2>"$T/e3"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "missing program: exit $rc"
grep -q "launch: /nonexistent/program: not found" "$T/e3" || fail "missing program: $(cat "$T/e3")"

# 6. Bad flags.
"$RINGSIDE" launch --nproc_per_node=0 -- true 2>"$T/e4" && fail "nproc 0 accepted"
grep -q "nproc_per_node >= 1" "$T/e4" || fail "nproc 0 message: $(cat "$T/e4")"
"$RINGSIDE" launch --nproc_per_node=2 2>"$T/e5" && fail "missing command accepted"
grep -q "needs a command" "$T/e5" || fail "missing command message: $(cat "$T/e5")"
echo PASS
