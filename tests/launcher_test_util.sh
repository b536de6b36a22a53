# Shared by torchrun_test.sh and launcher_env_test.sh; sourced once RINGSIDE, COMPARE
# (compare_checkpoints.py) and T (a scratch directory) are set: the jobs' training
# flags, reference jobs and their checks (failing and free ports: tests/test_lib.sh,
# sourced here). Every process these start is bounded by `timeout`.
# shellcheck source=tests/test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"

# The training flags every job of both tests shares (a 20-step synthetic run).
COMMON=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5
        --epochs=1 --steps=20 --lr=0.05 --momentum=0.9 --seed=3 --batch=8 --threads=1
        --eval_batch=240 --timeout_s=60)
failures=0

# reference NAME TRAIN_ARGS...: the job as `ringside train` starts it itself, in $T/NAME.
reference() {
  local name=$1
  shift
  timeout 180 "$RINGSIDE" train "$@" "${COMMON[@]}" --out="$T/$name" >"$T/$name.log" 2>&1 \
    || fail "reference job $name exited $?"
}

# wait_all NAME PID...: waits for each process (the i-th logs to $T/NAME.i.log) and
# fails NAME for each non-zero exit status.
wait_all() {
  local name=$1 i=0 pid rc
  shift
  for pid in "$@"; do
    wait "$pid"; rc=$?
    [ "$rc" -eq 0 ] || { fail "$name: process $i exited $rc"; tail -5 "$T/$name.$i.log"; }
    i=$((i + 1))
  done
}

# same_checkpoint NAME REFERENCE: NAME's final checkpoint equals REFERENCE's (relative
# difference <= 1e-5).
same_checkpoint() {
  /usr/bin/python3 "$COMPARE" 1e-5 "$T/$2/checkpoint.bin" "$T/$1/checkpoint.bin" \
    || fail "$1: checkpoint differs from $2's"
}

finish_tests() {
  [ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
  echo "PASS"
}
