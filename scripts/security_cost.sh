#!/usr/bin/env bash
# The token check's cost (docs/benchmarks.md, "Security"): a PS job (1 shard, 2
# workers) and a DDP job (2 ranks), each run by hand with and without RINGSIDE_TOKEN,
# alternating, REPEATS times; prints the median step_ms of worker/rank 0's records
# (metrics.rank0.jsonl) per configuration. Usage: scripts/security_cost.sh RINGSIDE [REPEATS]
set -euo pipefail
RINGSIDE=$1; REPEATS=${2:-3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
job=(--model=mlp:784-256-256-10 --dataset=synthetic:train=40000,test=100,seed=5 --epochs=1
     --steps=300 --batch=64 --lr=0.05 --seed=3 --threads=1 --eval_batch=100 --timeout_s=60)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
token=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
median() {  # median of step_ms over the records of FILE (first 20 steps skipped: warm-up)
  python3 - "$1" <<'PY'
import json, statistics, sys
ms = [json.loads(l)["step_ms"] for l in open(sys.argv[1]) if '"step_ms"' in l]
print("%.3f" % statistics.median(ms[20:]))
PY
}
ps_run() {  # ps_run OUT: env decides the token
  local p; p=$(free_port)
  "$RINGSIDE" ps-server --shard=0 --listen=127.0.0.1:$p --workers=2 --ps_shards=1 "${job[@]}" --out="$1" 2>/dev/null &
  "$RINGSIDE" ps-worker --worker_id=1 --ps_servers=127.0.0.1:$p --workers=2 --ps_shards=1 "${job[@]}" --out="$1" >/dev/null 2>&1 &
  "$RINGSIDE" ps-worker --worker_id=0 --ps_servers=127.0.0.1:$p --workers=2 --ps_shards=1 "${job[@]}" --out="$1" >/dev/null 2>&1
  wait
}
ddp_run() {  # ddp_run OUT
  local p; p=$(free_port)
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p RINGSIDE_RUN_ID=c \
    "$RINGSIDE" train --strategy=ddp --workers=2 "${job[@]}" --out="$1" >/dev/null 2>&1 &
  RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$p RINGSIDE_RUN_ID=c \
    "$RINGSIDE" train --strategy=ddp --workers=2 "${job[@]}" --out="$1" >/dev/null 2>&1
  wait
}
declare -A results
for i in $(seq "$REPEATS"); do
  for kind in ps ddp; do
    for auth in none token; do
      out="$T/$kind.$auth.$i"
      if [ $auth = token ]; then RINGSIDE_TOKEN=$token ${kind}_run "$out"; else (unset RINGSIDE_TOKEN; ${kind}_run "$out"); fi
      results[$kind.$auth]+="$(median "$out/metrics.rank0.jsonl") "
    done
  done
done
printf "%-5s %-6s %s\n" job token "median step_ms per repeat"
for key in ps.none ps.token ddp.none ddp.token; do
  printf "%-5s %-6s %s\n" "${key%%.*}" "${key##*.}" "${results[$key]}"
done
