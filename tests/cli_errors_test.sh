#!/usr/bin/env bash
# Bad input to `ringside`: each case must end with exactly one error line
# "ringside: error: ...", exit status 2 for a usage error (bad flag, value or word,
# found before anything runs) and 1 for a failure while running, and no crash output.
set -uo pipefail
RINGSIDE="$1"
FMNIST=/usr/share/datasets/fashion-mnist
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
source "$(dirname "$0")/test_lib.sh"  # fail, skip, free_port, expect_error

# check_error NAME STATUS REGEX ARGS...: runs ringside ARGS, checks the error contract
# (expect_error: exit STATUS, one error line, last, matching REGEX) and no crash output.
check_error() {
  local name="$1" want="$2" regex="$3"; shift 3
  local out="$T/$name.err"
  timeout 120 "$RINGSIDE" "$@" >"$T/$name.out" 2>"$out" &
  WANT=$want expect_error "$name" $! "$out" "$regex" 130
  if grep -qiE 'abort|terminate called|segmentation|core dumped|stack trace|\*\*\* ' "$out"; then
    fail "$name: crash output:"; cat "$out"
  fi
}
expect_run_error() { check_error "$1" 1 "${@:2}"; }    # A failure while running.
expect_usage_error() { check_error "$1" 2 "${@:2}"; }  # A usage error.

common=(train --epochs=1 --steps=2 --threads=1)

# Datasets: missing, truncated, corrupt, bad magic, labels out of range.
mkdir -p "$T/missing" "$T/truncated" "$T/corrupt" "$T/magic"
expect_run_error missing_idx 'train-images-idx3-ubyte.*(not found|no such file|missing)' \
  "${common[@]}" --dataset="$T/missing"
for d in truncated corrupt magic; do cp "$FMNIST"/*.gz "$T/$d/"; done
zcat "$FMNIST/train-images-idx3-ubyte.gz" | head -c 100000 | gzip >"$T/truncated/train-images-idx3-ubyte.gz"
expect_run_error truncated_idx 'truncated' "${common[@]}" --dataset="$T/truncated"
head -c 200000 "$FMNIST/train-images-idx3-ubyte.gz" >"$T/corrupt/train-images-idx3-ubyte.gz"
dd if=/dev/urandom of="$T/corrupt/train-images-idx3-ubyte.gz" bs=1 seek=5000 count=3000 conv=notrunc status=none
expect_run_error corrupt_idx 'train-images-idx3-ubyte' "${common[@]}" --dataset="$T/corrupt"
printf 'not an idx file at all' | gzip >"$T/magic/t10k-labels-idx1-ubyte.gz"
expect_run_error bad_magic_idx 't10k-labels-idx1-ubyte' "${common[@]}" --dataset="$T/magic"
expect_run_error not_a_dataset 'not fashion-mnist' "${common[@]}" --dataset="$T/no-such-dir"

# Flags.
expect_run_error unknown_model "unknown model spec 'resnet:50'" "${common[@]}" --dataset=synthetic --model=resnet:50
expect_run_error mlp_wrong_input 'takes 100 inputs' "${common[@]}" --dataset=synthetic --model=mlp:100-10
expect_usage_error batch_zero 'batch must be >= 1' "${common[@]}" --dataset=synthetic --batch=0
expect_usage_error negative_lr 'lr must be >= 0' "${common[@]}" --dataset=synthetic --lr=-0.1
expect_usage_error unknown_strategy "unknown strategy 'foo'" "${common[@]}" --dataset=synthetic --strategy=foo
expect_usage_error unknown_flag 'unknown flag --no_such_flag' "${common[@]}" --no_such_flag=1
expect_usage_error dataset_beyond_memory 'memory available \(MemAvailable\)' "${common[@]}" --dataset=synthetic:train=140737488355328
expect_usage_error ps_dataset_beyond_memory 'memory available \(MemAvailable\)' "${common[@]}" --strategy=ps --dataset=synthetic:train=140737488355328
expect_usage_error did_you_mean 'unknown flag --wrokers; did you mean --workers\?' "${common[@]}" --wrokers=2
expect_usage_error bad_flag_value "bad value for --batch: Illegal value 'many'" "${common[@]}" --batch=many
expect_usage_error bad_bool_value "bad value for --resume" "${common[@]}" --resume=maybe
expect_usage_error missing_value "--out needs a value" "${common[@]}" --out
expect_usage_error unknown_command "unknown command 'fly' \(expected demo, train" fly
expect_usage_error verb_typo "unknown command 'trian'; did you mean 'train'\?" trian
expect_usage_error flag_before_verb "expected a verb before --batch=1" --batch=1 train
expect_usage_error other_verbs_typo 'unknown flag --wrokers; did you mean --workers \(a flag of `train`\)\?' report "$T" --wrokers=2
expect_usage_error foreign_flag 'is not a flag of `report`' report "$T" --workers=99 --strategy=bogus
expect_usage_error report_no_dir '`report` needs a directory written by compare \(DIR\)' report
expect_usage_error launch_elastic "elastic node counts are not supported" launch --nnodes=1:4 -- true
expect_usage_error launch_two_endpoints "either --rdzv_endpoint or --master_addr" launch --rdzv-endpoint=a:1 --master-port=7 -- true
expect_usage_error launch_no_program '`launch` needs a command' launch --nproc_per_node=2
expect_usage_error report_two_dirs "unexpected argument 'b'" report a b
expect_usage_error train_word "unexpected argument 'extra'" "${common[@]}" extra
expect_usage_error unknown_bench "unknown benchmark 'nope' \(expected step, allreduce or pushpull\)" bench nope
expect_usage_error ddp_bad_backend "--backend=bogus is not a process-group backend \\(gloo or nccl\\)" train --strategy=ddp --backend=bogus
expect_usage_error ddp_bad_allreduce "allreduce" train --strategy=ddp --allreduce=bogus
expect_usage_error compare_no_spec "compare needs --spec=FILE" compare --out="$T/c"
expect_usage_error simulate_no_calibration "simulate needs --cluster=NAME\\|FILE \\(a described cluster\\) or --calibration=FILE" simulate
# Devices. On a machine without a GPU (CI), --device=cuda fails before any data loads,
# naming why: a build without CUDA, or no usable GPU.
expect_usage_error bad_device "--device must be cpu, cuda or cuda:K \(K >= 0\), got 'gpu'" "${common[@]}" --dataset=synthetic --device=gpu
expect_usage_error bad_precision "--precision must be fp32, tf32 or bf16, got 'fp16'" "${common[@]}" --dataset=synthetic --precision=fp16
expect_usage_error precision_on_cpu "--precision=tf32 needs --device=cuda" "${common[@]}" --dataset=synthetic --precision=tf32
expect_usage_error ddp_cuda_gloo "--device=cuda with --strategy=ddp needs --backend=nccl \(--backend=gloo reduces host memory\)" "${common[@]}" --dataset=synthetic --strategy=ddp --device=cuda
expect_usage_error ddp_nccl_cpu "--backend=nccl reduces GPU memory: add --device=cuda" "${common[@]}" --dataset=synthetic --strategy=ddp --backend=nccl
if [ ! -e /dev/nvidia0 ]; then
  expect_run_error no_gpu_train "--device=cuda: (this ringside was built without CUDA|no usable GPU)" "${common[@]}" --dataset=synthetic --device=cuda
  expect_run_error no_gpu_device_index "--device=cuda: (this ringside was built without CUDA|no usable GPU)" "${common[@]}" --dataset=synthetic --device=cuda:7
  expect_run_error no_gpu_bench "--device=cuda: (this ringside was built without CUDA|no usable GPU)" bench step --device=cuda --steps=1
  # PS and DDP on the GPU: a build without CUDA refuses before any process starts
  # (usage); a CUDA build fails in the workers, naming the missing GPU.
  if "$RINGSIDE" --version 2>/dev/null | grep -qi "build: cuda"; then :; else
    expect_usage_error no_cuda_ps "--device=cuda: this ringside was built without CUDA" "${common[@]}" --dataset=synthetic --strategy=ps --workers=2 --device=cuda:0
    expect_usage_error no_cuda_ddp "--backend=nccl: this ringside was built without CUDA" "${common[@]}" --dataset=synthetic --strategy=ddp --workers=2 --backend=nccl --device=cuda
  fi
  # A build without CUDA refuses before any rank starts (usage); a CUDA build fails in
  # every rank, naming the missing GPU.
  if "$RINGSIDE" --version 2>/dev/null | grep -qi "build: cuda"; then :; else
    expect_usage_error nccl_bench_without_cuda "--backend=nccl: this ringside was built without CUDA" bench allreduce --backend=nccl --workers=2
  fi
else
  echo "skip no_gpu_*: this machine has a GPU (/dev/nvidia0); the GPU bundle's check covers it"
fi
expect_run_error report_missing_dir 'has no cells/' report "$T/no-such-report"
# A matrix whose every cell failed: one line, no gnuplot error.
mkdir -p "$T/all-failed/cells/ddp-n2-r0"
printf 'name: "x"\nstrategies { kind: "ddp" }\nworkers: 2\nmodel: "mlp:4-2"\nbatch_per_worker: 8\nsteps: 2\n' \
  >"$T/all-failed/spec.textproto"
printf 'cell: "ddp-n2-r0"\nlabel: "ddp"\nkind: "ddp"\nworkers: 2\nstatus: "failed"\nreason: "exited with status 1"\n' \
  >"$T/all-failed/cells/ddp-n2-r0/result.textproto"
expect_run_error report_all_failed 'no cell finished ok, nothing to report' report "$T/all-failed"
expect_run_error simulate_missing_calibration 'no-such.json' simulate --calibration="$T/no-such.json"

# Labs: a lab that does not exist, no number, an unknown lab command.
expect_usage_error lab_missing "there is no lab '10' \(labs: 1, 2, 3, 4, 5, 6, 7, 8, 9\)" lab check 10
expect_usage_error lab_not_a_number "there is no lab 'x'" lab check x
expect_usage_error lab_no_number '`lab check` needs a lab number' lab check
expect_usage_error lab_unknown_command "unknown lab command 'run'" lab run 1
expect_usage_error lab_no_command 'needs list, or check and a lab number' lab

# Checkpoints: unreadable, garbage, of another model.
mkdir -p "$T/ckpt-garbage" "$T/ckpt-unreadable" "$T/ckpt-other"
echo "garbage" >"$T/ckpt-garbage/checkpoint.bin"
expect_run_error garbage_checkpoint 'not a ringside checkpoint' "${common[@]}" --dataset=synthetic:train=64,test=16 --out="$T/ckpt-garbage" --resume
mkdir -p "$T/ckpt-unreadable/checkpoint.bin"  # A directory where the file should be.
expect_run_error unreadable_checkpoint 'checkpoint.bin is not a regular file' "${common[@]}" --dataset=synthetic:train=64,test=16 --out="$T/ckpt-unreadable" --resume
# No checkpoint yet is not an error: --resume starts from step 0 and says so.
timeout 120 "$RINGSIDE" "${common[@]}" --dataset=synthetic:train=64,test=16 --out="$T/ckpt-none" --resume >/dev/null 2>"$T/ckpt-none.err" \
  && grep -q 'no checkpoint in .* yet, starting from step 0' "$T/ckpt-none.err" \
  || fail "missing_checkpoint: --resume without a checkpoint did not start fresh"
if ! timeout 120 "$RINGSIDE" "${common[@]}" --dataset=synthetic:train=64,test=16 --out="$T/ckpt-other" >/dev/null 2>&1; then
  fail "could not write a checkpoint to resume from"
fi
expect_run_error other_model_checkpoint "holds model 'mlp:784-256-256-10'" "${common[@]}" --dataset=synthetic:train=64,test=16 --model=mlp:784-32-10 --out="$T/ckpt-other" --resume

if [ "$failures" -ne 0 ]; then echo "$failures case(s) failed"; exit 1; fi
echo "all cases passed"
