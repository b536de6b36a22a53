#!/usr/bin/env bash
# ringside ranks under torchrun (Debian's python3-torch 1.13), as README.md's "Under
# torchrun, Slurm, MPI" shows: DDP in torchrun's default static rendezvous (its agent
# hosts a TCPStore on MASTER_PORT, which the ranks join), with --standalone and with
# --rdzv_backend=c10d, on one node and on two (two torchrun processes on 127.0.0.1
# with --nnodes=2); PS (shards found through the job's store, no --ps_servers) in the
# default mode on one and two nodes and with --standalone. Every run's final
# checkpoint must equal the one of the same job started by `ringside train`
# (compare_checkpoints.py, relative difference <= 1e-5), and every torchrun (which
# fails when any of its workers fails) must exit 0 within its time limit.
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"
T="${TEST_TMPDIR:-$(mktemp -d)}"
TORCHRUN=/usr/bin/torchrun
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error
if [ ! -x "$TORCHRUN" ] || ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  skip "torchrun / python3-torch not installed (scripts/setup.sh installs python3-torch)"
fi
# shellcheck source=tests/launcher_test_util.sh
source "$(dirname "$0")/launcher_test_util.sh"

# torchrun_bg NAME NODE TORCHRUN_ARGS... -- TRAIN_ARGS...: one torchrun of
# `ringside train TRAIN_ARGS --out=$T/NAME` in the background, logging to
# $T/NAME.NODE.log; its pid goes to PIDS. torch 1.13 on Python 3.11 fails to parse
# --redirects/--tee of 0 or 3 (its Std flag enum), so the runs ask for 1: stdout teed
# to the console.
PIDS=()
torchrun_bg() {
  local name=$1 node=$2 launcher=()
  shift 2
  while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
  shift
  timeout 180 "$TORCHRUN" --redirects=1 --tee=1 --log_dir="$T/logs/$name.$node" "${launcher[@]}" \
    --no_python "$RINGSIDE" train "$@" --out="$T/$name" >"$T/$name.$node.log" 2>&1 &
  PIDS+=($!)
}
# finish NAME REFERENCE: waits for every torchrun of NAME (each fails when any of its
# workers fails) and compares the checkpoint with REFERENCE's.
finish() {
  wait_all "$1" "${PIDS[@]}"
  PIDS=()
  same_checkpoint "$1" "$2"
}

ddp=(--strategy=ddp "${COMMON[@]}")
ps=(--strategy=ps --workers=2 --ps_shards=1 "${COMMON[@]}")
ps3=(--strategy=ps --workers=3 --ps_shards=1 "${COMMON[@]}")

# The reference jobs, then three parts at once (each part's torchruns one after another;
# the parts use ports of their own): DDP on one node, DDP on two, the PS. Side by side
# they wait on each other's CPU, never on a time-out: every bound is loose (the ranks'
# --timeout_s=60, each torchrun's 180 s).
part_start ref_ddp reference ref_ddp --strategy=ddp --workers=2
part_start ref_ps reference ref_ps --strategy=ps --workers=2 --ps_shards=1
part_start ref_ps3 reference ref_ps3 --strategy=ps --workers=3 --ps_shards=1
parts_wait

# DDP, one node: default (static), --standalone, c10d; then the PS with --standalone.
ddp_one_node() {
  local p
  p=$(free_port)
  torchrun_bg static1 0 --nnodes=1 --nproc_per_node=2 --master_addr=127.0.0.1 --master_port="$p" -- "${ddp[@]}"
  finish static1 ref_ddp
  grep -qF "ddp: 2 ranks (torchrun)" "$T"/static1.0.log || fail "static1: torchrun was not detected"
  torchrun_bg standalone 0 --standalone --nproc_per_node=2 -- "${ddp[@]}"
  finish standalone ref_ddp
  p=$(free_port)
  torchrun_bg c10d1 0 --nnodes=1 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:"$p" \
    --rdzv_id=c10d1 -- "${ddp[@]}"
  finish c10d1 ref_ddp
  # The PS's --standalone here too: torchrun's standalone rendezvous always listens on
  # port 29400, so two of them must not run at once.
  torchrun_bg ps_standalone 0 --standalone --nproc_per_node=3 -- "${ps[@]}"
  finish ps_standalone ref_ps
}

# DDP, two nodes of one rank each: default (static) and c10d.
ddp_two_nodes() {
  local p node
  p=$(free_port)
  for node in 0 1; do
    torchrun_bg static2 "$node" --nnodes=2 --node_rank="$node" --nproc_per_node=1 \
      --master_addr=127.0.0.1 --master_port="$p" -- "${ddp[@]}"
  done
  finish static2 ref_ddp
  p=$(free_port)
  for node in 0 1; do
    torchrun_bg c10d2 "$node" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
      --rdzv_endpoint=127.0.0.1:"$p" --rdzv_id=c10d2 -- "${ddp[@]}"
  done
  finish c10d2 ref_ddp
}

# PS (static, one node and two): one shard (rank 0) and the workers; the shard's
# address goes through the store.
ps_jobs() {
  local p node
  p=$(free_port)
  torchrun_bg ps_static1 0 --nnodes=1 --nproc_per_node=3 --master_addr=127.0.0.1 --master_port="$p" -- "${ps[@]}"
  finish ps_static1 ref_ps
  p=$(free_port)
  for node in 0 1; do
    torchrun_bg ps_static2 "$node" --nnodes=2 --node_rank="$node" --nproc_per_node=2 \
      --master_addr=127.0.0.1 --master_port="$p" -- "${ps3[@]}"
  done
  finish ps_static2 ref_ps3
}

part_start ddp_one_node ddp_one_node
part_start ddp_two_nodes ddp_two_nodes
part_start ps ps_jobs
parts_wait

finish_tests
