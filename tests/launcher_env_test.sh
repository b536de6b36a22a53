#!/usr/bin/env bash
# ringside ranks started by Slurm (srun), Open MPI (mpirun), MPICH (Hydra) and PMIx
# launchers, simulated: this script starts the processes itself with each launcher's
# variables (common/job_env.h; the launchers need not be installed). Each job must be
# ONE job (exactly one process reports "ddp: 2 ranks": under `srun -n 2` each process
# used to run a job of its own), end with the checkpoint of the same job started by
# `ringside train` (compare_checkpoints.py, relative difference <= 1e-5), and every
# process must exit 0 within its time limit. Slurm's store address is derived from its
# variables (the first host of SLURM_STEP_NODELIST, port 20000 + SLURM_JOB_ID % 20000);
# the others get MASTER_ADDR/MASTER_PORT, and a missing one is one clear error.
set -uo pipefail
RINGSIDE="$1"; COMPARE="$2"
T="${TEST_TMPDIR:-$(mktemp -d)}"
# shellcheck source=tests/launcher_test_util.sh
source "$(dirname "$0")/launcher_test_util.sh"

# run_job NAME N ENV_FN REFERENCE TRAIN_ARGS...: starts N processes of `ringside train
# TRAIN_ARGS --out=$T/NAME`, process r with the variables `ENV_FN r N` prints, waits for
# each, checks its exit status, and compares the checkpoint with REFERENCE's.
run_job() {
  local name=$1 n=$2 env_fn=$3 reference=$4 r
  shift 4
  local pids=()
  for r in $(seq 0 $((n - 1))); do
    # shellcheck disable=SC2046  # One word per NAME=VALUE.
    env $("$env_fn" "$r" "$n") timeout 180 "$RINGSIDE" train "$@" --out="$T/$name" \
      >"$T/$name.$r.log" 2>&1 &
    pids+=($!)
  done
  wait_all "$name" "${pids[@]}"
  same_checkpoint "$name" "$reference"
}

# one_job NAME N LAUNCHER: exactly one of the N processes reported the job (rank 0 of
# ONE job), naming the launcher it detected.
one_job() {
  local found
  found=$(grep -l "ddp: $2 ranks" "$T/$1".*.log | wc -l)
  [ "$found" -eq 1 ] || fail "$1: $found processes ran a job of their own (want 1 job)"
  grep -qF "ddp: $2 ranks ($3)" "$T/$1".*.log || fail "$1: the launcher was not detected as $3"
}

reference ref_ddp --strategy=ddp --workers=2
reference ref_ps --strategy=ps --workers=2 --ps_shards=1

# Slurm: a free port that Slurm's derivation (20000 + SLURM_JOB_ID % 20000) can name.
SLURM_PORT=0
for _ in $(seq 50); do
  p=$(free_port)
  if [ "$p" -ge 20000 ] && [ "$p" -lt 40000 ]; then SLURM_PORT=$p; break; fi
done
[ "$SLURM_PORT" -gt 0 ] || fail "no free port in [20000, 40000) for the Slurm case"
JOB=$((100000 + SLURM_PORT - 20000))
# `srun -N 2 -n 2`: one task on each of two nodes.
slurm_env() {
  echo SLURM_JOB_ID=$JOB SLURM_STEP_ID=0 SLURM_PROCID="$1" SLURM_NTASKS="$2" \
    SLURM_STEP_NUM_TASKS="$2" SLURM_LOCALID=0 SLURM_NODEID="$1" \
    SLURM_STEP_TASKS_PER_NODE="1(x$2)" SLURM_STEP_NODELIST=localhost
}
PORT=$(free_port)
ompi_env() {
  echo OMPI_COMM_WORLD_RANK="$1" OMPI_COMM_WORLD_SIZE="$2" OMPI_COMM_WORLD_LOCAL_RANK="$1" \
    OMPI_COMM_WORLD_LOCAL_SIZE="$2" MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT"
}
mpich_env() {
  echo PMI_RANK="$1" PMI_SIZE="$2" MPI_LOCALRANKID="$1" MPI_LOCALNRANKS="$2" \
    MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT"
}
pmix_env() {
  echo PMIX_RANK="$1" PMIX_NAMESPACE=ns-test WORLD_SIZE="$2" MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT"
}

[ "$SLURM_PORT" -gt 0 ] && { run_job slurm_ddp 2 slurm_env ref_ddp --strategy=ddp "${COMMON[@]}"; one_job slurm_ddp 2 "Slurm (srun)"; }
run_job ompi_ddp 2 ompi_env ref_ddp --strategy=ddp "${COMMON[@]}"
one_job ompi_ddp 2 "Open MPI"
PORT=$(free_port)
run_job mpich_ddp 2 mpich_env ref_ddp --strategy=ddp "${COMMON[@]}"
one_job mpich_ddp 2 "MPICH (Hydra)"
PORT=$(free_port)
run_job pmix_ddp 2 pmix_env ref_ddp --strategy=ddp "${COMMON[@]}"
one_job pmix_ddp 2 PMIx
# PS: one shard and two workers; the shard's address goes through the job's store.
PORT=$(free_port)
run_job ompi_ps 3 ompi_env ref_ps --strategy=ps --workers=2 --ps_shards=1 "${COMMON[@]}"
if [ "$SLURM_PORT" -gt 0 ]; then
  for _ in $(seq 50); do  # A fresh port for the next job, again one Slurm can name.
    p=$(free_port)
    if [ "$p" -ge 20000 ] && [ "$p" -lt 40000 ]; then JOB=$((200000 + p - 20000)); break; fi
  done
  run_job slurm_ps 3 slurm_env ref_ps --strategy=ps --workers=2 --ps_shards=1 "${COMMON[@]}"
fi

# Open MPI does not say where rank 0 runs: without MASTER_ADDR, one clear error.
env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 timeout 60 "$RINGSIDE" train --strategy=ddp \
  "${COMMON[@]}" --out="$T/noaddr" >"$T/noaddr.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "Open MPI without MASTER_ADDR exited 0"
grep -q "MASTER_ADDR is not set (Open MPI does not say where rank 0 runs: export MASTER_ADDR and MASTER_PORT)" \
  "$T/noaddr.log" || { fail "no clear error without MASTER_ADDR"; cat "$T/noaddr.log"; }
[ "$(wc -l <"$T/noaddr.log")" -eq 1 ] || { fail "the error is not one line"; cat "$T/noaddr.log"; }

finish_tests
