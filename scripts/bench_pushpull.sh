#!/usr/bin/env bash
# Parameter-server transfer benchmark (issue 4), all in one run so the ratios compare
# numbers taken side by side:
#   1. raw TCP loopback bandwidth: iperf3, one stream, before and after the sweeps, both
#      left to the scheduler and pinned (client and server on a core each, -A);
#   2. `ringside bench pushpull`: one worker's combined push-pull against one shard in
#      another process, model sizes 1 MB to 256 MB, 1 MiB chunks, median of N, next to
#      the same model pushed one way on a plain client stream (the baseline); once
#      left to the scheduler, once pinned like iperf3 (--pin_cpus); over gRPC and over
#      the TCP data plane (--ps_transport=tcp); each compared with the iperf3 figure
#      taken the same way;
#   3. the step-time cost of the parameter server: single-process training vs PS with
#      one worker and one shard (mlp:784-512-512-10, batch 128, 1 thread), the shard in
#      its own process (with and without --prefetch; over gRPC and TCP) and colocated
#      in the worker's,
#      median step time, against the budget of two model transfers at the (unpinned)
#      iperf3 rate; on synthetic data and on Fashion-MNIST.
# Usage: scripts/bench_pushpull.sh [repeats] [sizes_mb]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS="${1:-10}"
SIZES="${2:-1,4,16,64,256}"
command -v iperf3 >/dev/null || sudo_apt=1
if [ "${sudo_apt:-0}" = 1 ]; then
  echo "installing iperf3" >&2
  if [ "$(id -u)" -eq 0 ]; then apt-get install -y -qq iperf3 >/dev/null; else sudo apt-get install -y -qq iperf3 >/dev/null; fi
fi
bazel build -c opt //:ringside >/dev/null 2>&1
RINGSIDE=bazel-bin/experiments/ringside
PY=/usr/bin/python3

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Prints the receiver's Gbit/s of a 5-second single-stream loopback iperf3 run; with
# two CPU numbers, the client runs on the first and the server on the second.
iperf_gbits() {
  local port; port=$(free_port)
  local client_cpu=() server_cpu=()
  if [ $# -eq 2 ]; then client_cpu=(-A "$1"); server_cpu=(-A "$2"); fi
  iperf3 -s -1 -p "$port" -B 127.0.0.1 "${server_cpu[@]}" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  iperf3 -c 127.0.0.1 -p "$port" -t 5 "${client_cpu[@]}" -J | "$PY" -c \
    'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))'
  wait "$server" || true
}

# Prints the sweep's table with each rate as a share of `raw` (GB/s, the argument):
# the push-pull's (2 x model bytes / time) and the plain client stream's (model
# bytes / time, the baseline).
table() {
  "$PY" -c "
import sys
raw = $1
lines = sys.stdin.read().splitlines()
print('%10s %10s %8s %7s %11s %8s %7s %9s' % ('model MB', 'median ms', 'GB/s', 'of raw',
      'plain ms', 'GB/s', 'of raw', 'raw GB/s'))
for line in lines[1:]:
    f = line.split()
    mb, ms, gbs, pms, pgbs = int(f[0]) / 2**20, float(f[2]), float(f[4]), float(f[5]), float(f[6])
    print('%10.0f %10.3f %8.3f %6.0f%% %11.3f %8.3f %6.0f%% %9.3f' % (mb, ms, gbs, 100 * gbs / raw,
          pms, pgbs, 100 * pgbs / raw, raw))
"
}

read -r CPU_A CPU_B < <("$PY" -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], c[-1])')
echo "== raw TCP loopback (iperf3, one stream, 5 s)"
before=$(iperf_gbits)
before_pinned=$(iperf_gbits "$CPU_A" "$CPU_B")
echo "iperf3 before: ${before} Gbit/s; pinned to CPUs $CPU_A,$CPU_B: ${before_pinned} Gbit/s"
# Each sweep once per transport (--ps_transport: gRPC's streams, the TCP data plane).
declare -A sweep pinned
for t in grpc tcp; do
  echo "== ringside bench pushpull --sizes_mb=$SIZES --repeats=$REPEATS --ps_transport=$t"
  sweep[$t]=$("$RINGSIDE" bench pushpull --sizes_mb="$SIZES" --repeats="$REPEATS" --ps_transport=$t)
  pinned[$t]=""
  if [ "$CPU_A" != "$CPU_B" ]; then
    echo "== ringside bench pushpull --sizes_mb=$SIZES --repeats=$REPEATS --pin_cpus=$CPU_A,$CPU_B --ps_transport=$t"
    pinned[$t]=$("$RINGSIDE" bench pushpull --sizes_mb="$SIZES" --repeats="$REPEATS" \
      --pin_cpus="$CPU_A,$CPU_B" --ps_transport=$t)
  fi
done
after=$(iperf_gbits)
after_pinned=$(iperf_gbits "$CPU_A" "$CPU_B")
echo "iperf3 after:  ${after} Gbit/s; pinned: ${after_pinned} Gbit/s"
raw=$("$PY" -c "print('%.3f' % (($before + $after) / 2 / 8))")
raw_pinned=$("$PY" -c "print('%.3f' % (($before_pinned + $after_pinned) / 2 / 8))")
echo "raw TCP: ${raw} GB/s, pinned ${raw_pinned} GB/s (means of before and after)"
for t in grpc tcp; do
  echo
  echo "-- --ps_transport=$t, left to the scheduler"
  echo "${sweep[$t]}" | table "$raw"
  if [ -n "${pinned[$t]}" ]; then
    echo "-- --ps_transport=$t, pinned: worker on CPU $CPU_A, shard on CPU $CPU_B (iperf3 likewise)"
    echo "${pinned[$t]}" | table "$raw_pinned"
  fi
done

echo
# Two datasets: the synthetic one generates each sample (about 3.4 ms a batch here, so
# a prefetched batch can hide the communication), Fashion-MNIST only copies it (about
# 0.1 ms: the communication is exposed whatever the prefetch does).
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for dataset in synthetic:train=40000,test=100 fashion-mnist; do
  echo "== step time: single process vs PS (1 worker, 1 shard), mlp:784-512-512-10, batch 128, --dataset=$dataset"
  common=(--model=mlp:784-512-512-10 --dataset="$dataset" --batch=128
          --epochs=1 --steps=300 --threads=1 --eval_batch=100 --lr=0.01 --momentum=0.9)
  rm -rf "${T:?}"/*
  "$RINGSIDE" train --strategy=single "${common[@]}" --out="$T/single" >/dev/null 2>&1
  "$RINGSIDE" train --strategy=ps --workers=1 --ps_shards=1 --ps_transport=grpc "${common[@]}" \
    --out="$T/ps" >/dev/null 2>&1
  "$RINGSIDE" train --strategy=ps --workers=1 --ps_shards=1 --ps_transport=tcp "${common[@]}" \
    --out="$T/ps_tcp" >/dev/null 2>&1
  "$RINGSIDE" train --strategy=ps --workers=1 --ps_shards=1 --prefetch=false "${common[@]}" \
    --out="$T/ps_noprefetch" >/dev/null 2>&1
  "$RINGSIDE" train --strategy=ps --workers=1 --ps_shards=1 --ps_colocated "${common[@]}" \
    --out="$T/colocated" >/dev/null 2>&1
  "$RINGSIDE" train --strategy=single "${common[@]}" --out="$T/single2" >/dev/null 2>&1
  "$PY" - "$T" "$raw" <<'EOF'
import json, statistics, sys
t, raw = sys.argv[1], float(sys.argv[2])
def med(path, key="step_ms"):
    rows = [json.loads(l) for l in open(path)][50:]  # skip warm-up
    return statistics.median(r.get(key, 0) for r in rows)
single = statistics.mean([med(f"{t}/single/metrics.jsonl"), med(f"{t}/single2/metrics.jsonl")])
params = 784*512 + 512 + 512*512 + 512 + 512*10 + 10
model_mb = params * 4 / 1e6
budget = 2 * model_mb / 1e3 / raw * 1e3
print(f"model {model_mb:.2f} MB; single {single:.3f} ms/step (median, mean of 2 runs; "
      f"data {med(f'{t}/single/metrics.jsonl', 'data_ms'):.3f}); "
      f"budget: 2 transfers at {raw:.2f} GB/s = {budget:.3f} ms")
for name, run in (("PS 1x1, shard in its own process, --ps_transport=grpc", "ps"),
                  ("PS 1x1, own process, --ps_transport=tcp (the default)", "ps_tcp"),
                  ("PS 1x1, own process, --prefetch=false", "ps_noprefetch"),
                  ("PS 1x1, colocated", "colocated")):
    path = f"{t}/{run}/metrics.jsonl"
    ps = med(path)
    phases = ", ".join(f"{k} {med(path, k):.3f}" for k in ("data_ms", "push_ms", "wait_ms", "pull_ms"))
    print(f"{name}: {ps:.3f} ms/step, adds {ps - single:.3f} ms "
          f"-> {'OK' if ps - single <= budget else 'OVER'} ({phases})")
EOF
done
