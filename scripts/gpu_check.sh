#!/usr/bin/env bash
# The GPU check: runs every GPU test binary and the GPU step benchmarks (ringside next to
# PyTorch) from the portable GPU bundle, checks training on the GPU (DDP over NCCL and
# PS with GPU workers end where one GPU and Gloo DDP on the CPU do; a rank killed
# mid-run is named by the survivors in time; NCCL all-reduce has no wrong element; DDP's
# step time against PyTorch DDP), and writes one report. Built for a machine with an
# NVIDIA GPU, its driver and the CUDA runtime libraries, and no build tools; see
# docs/build.md, "The GPU bundle".
#
#   gpu_check.sh [--out DIR] [--quick]
#
# Run it from the bundle (gpu_bundle/gpu_check.sh, a copy made by scripts/gpu_bundle.sh);
# scripts/gpu_check.sh in a checkout uses the checkout's gpu_bundle/.
#   --out DIR  where the two output files go: DIR/gpu_report.md (the report) and
#              DIR/gpu_check.log (every command's full output). Default: $OUT if set,
#              else ./gpu_report.
#   --quick    shorter benchmarks (fewer steps, one ringside repeat).
# Exit status: 0 only if a GPU is present, every test binary passed (a binary whose
# tests all skipped on a machine with a GPU counts as failed), every ringside
# benchmark produced its result line and every training check held (a check whose
# result is missing fails); 1 if anything failed; 2 for bad usage or a missing
# bundle; 3 if this machine has no GPU (nothing on the GPU path was verified). The last
# lines on stdout are a summary (the report's tables and the verdict).
set -uo pipefail

usage() {
  sed -n '2,22s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

OUTDIR=""
QUICK=0
while (($#)); do
  case "$1" in
    --out) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; OUTDIR=$2; shift 2 ;;
    --out=*) OUTDIR=${1#--out=}; shift ;;
    --quick) QUICK=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -x $HERE/bin/ringside ]]; then
  B=$HERE
elif [[ -x $HERE/../gpu_bundle/bin/ringside ]]; then
  B=$(cd "$HERE/../gpu_bundle" && pwd)
else
  echo "gpu_check: FAIL: no bundle beside this script (no bin/ringside in $HERE or" \
       "$HERE/../gpu_bundle); build one with scripts/gpu_bundle.sh" >&2
  exit 2
fi

OUTDIR=${OUTDIR:-${OUT:-./gpu_report}}
mkdir -p "$OUTDIR" || { echo "gpu_check: cannot create $OUTDIR" >&2; exit 2; }
OUTDIR=$(cd "$OUTDIR" && pwd)
REPORT=$OUTDIR/gpu_report.md
LOG=$OUTDIR/gpu_check.log
: >"$REPORT"
: >"$LOG"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Every step's timeout comes out of one budget, so the whole check ends in time
# (GPU_CHECK_BUDGET_S, default 540 s: under the 10 minutes the check is promised in).
BUDGET=${GPU_CHECK_BUDGET_S:-540}
START=$SECONDS
# tmo WANT: WANT seconds, or what is left of the budget if less (at least 5).
tmo() {
  local left=$((BUDGET - (SECONDS - START)))
  ((left < $1)) && { ((left < 5)) && echo 5 || echo "$left"; return; }
  echo "$1"
}
say() { echo "gpu_check: $*"; echo "gpu_check: $*" >>"$LOG"; }
rep() { printf '%s\n' "$*" >>"$REPORT"; }
logblock() {  # logblock TITLE FILE: FILE's contents into the log under a header
  { echo; echo "===== $1"; cat "$2"; } >>"$LOG"
}

cd "$B" || exit 2
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}

# ---- 0. Libraries the bundle ships compressed (scripts/gpu_bundle.sh xz's the large
# ones, e.g. OpenBLAS, to keep the bundle small): unpack them once into lib/, or, where
# lib/ is read-only, into a private folder put on LD_LIBRARY_PATH.
unxz_to() {  # unxz_to SRC DST
  if command -v xz >/dev/null 2>&1; then
    xz -dc "$1" >"$2"
  else
    local py
    py=$(command -v python3 || echo /usr/bin/python3)
    "$py" -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as s, open(sys.argv[2], "wb") as d: shutil.copyfileobj(s, d)' "$1" "$2"
  fi
}
UNPACK_DIR=lib
if [[ ! -w lib ]]; then
  UNPACK_DIR=$WORK/lib
  mkdir -p "$UNPACK_DIR"
  export LD_LIBRARY_PATH=$UNPACK_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
for f in lib/*.xz; do
  [[ -e $f ]] || continue
  name=$(basename "${f%.xz}")
  [[ -e lib/$name ]] && continue
  if unxz_to "$f" "$UNPACK_DIR/$name.part" && mv "$UNPACK_DIR/$name.part" "$UNPACK_DIR/$name"; then
    say "unpacked $f into $UNPACK_DIR/$name"
  else
    say "FAIL: cannot unpack $f (needs xz or python3's lzma)"
  fi
done

TESTS=()
if [[ -f tests/LIST ]]; then
  while read -r t; do [[ -n $t && -x tests/$t ]] && TESTS+=("tests/$t"); done <tests/LIST
else
  for t in tests/*; do [[ -f $t && -x $t ]] && TESTS+=("$t"); done
fi
BINARIES=(bin/ringside "${TESTS[@]}")

# ---- 1. CUDA libraries. The bundle carries libcudart; cuBLAS, cuBLASLt and NCCL come
# from this machine. Where the loader does not find one, search the usual places in
# order and put the folders that hold a missing library in front of LD_LIBRARY_PATH.
missing_libs() {
  ldd "${BINARIES[@]}" 2>/dev/null | awk '/=> not found/ {print $1}' | sort -u
}
python_nvidia_lib_dirs() {  # the nvidia/*/lib folders of every python3's site-packages
  local py
  for py in $(command -v python3 2>/dev/null) /usr/bin/python3 /usr/local/bin/python3; do
    [[ -x $py ]] || continue
    "$py" - 2>/dev/null <<'EOF'
import glob, os, site, sys
roots = []
try:
    roots += site.getsitepackages()
except Exception:
    pass
try:
    roots.append(site.getusersitepackages())
except Exception:
    pass
roots += glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages"))
roots += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
dirs = []
try:
    import nvidia
    for p in nvidia.__path__:
        dirs += sorted(glob.glob(os.path.join(p, "*", "lib")))
except Exception:
    pass
for r in roots:
    dirs += sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib")))
for d in dirs:
    if os.path.isdir(d):
        print(os.path.realpath(d))
EOF
  done | awk '!seen[$0]++'
}
CUDA_LIB_NOTE="none needed: the loader found every library"
MISSING=$(missing_libs)
if [[ -n $MISSING ]]; then
  say "not found by the loader: $(echo $MISSING)"
  CANDIDATES=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
              /usr/lib/x86_64-linux-gnu)
  for d in /usr/local/cuda-*/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib; do
    [[ -d $d ]] && CANDIDATES+=("$d")
  done
  while read -r d; do [[ -n $d ]] && CANDIDATES+=("$d"); done < <(python_nvidia_lib_dirs)
  # Repeat while it helps: a library found may itself need one from another folder
  # (ldd only names the dependencies of what it could load).
  ADDED=()
  for _ in 1 2 3; do
    before=${#ADDED[@]}
    for d in "${CANDIDATES[@]}"; do
      [[ -d $d ]] || continue
      for lib in $MISSING; do
        if [[ -e $d/$lib ]]; then
          ADDED+=("$d")
          MISSING=$(echo "$MISSING" | grep -vxF "$lib")
        fi
      done
    done
    ADDED=($(printf '%s\n' "${ADDED[@]}" | awk 'NF && !seen[$0]++'))
    ((${#ADDED[@]} > before)) || break
    LDP=$(IFS=:; echo "${ADDED[*]}")
    export LD_LIBRARY_PATH=$LDP${ORIG_LD_LIBRARY_PATH:+:$ORIG_LD_LIBRARY_PATH}
    [[ $UNPACK_DIR == lib ]] || LD_LIBRARY_PATH=$UNPACK_DIR:$LD_LIBRARY_PATH
    MISSING=$(missing_libs)
    [[ -n $MISSING ]] || break
  done
  if ((${#ADDED[@]})); then
    CUDA_LIB_NOTE="LD_LIBRARY_PATH prepended with $LDP"
    say "CUDA libraries: $CUDA_LIB_NOTE"
  fi
  MISSING=$(missing_libs)
  if [[ -n $MISSING ]]; then
    CUDA_LIB_NOTE="$CUDA_LIB_NOTE; STILL NOT FOUND: $(echo $MISSING)"
    say "FAIL: still not found: $(echo $MISSING) (searched: ${CANDIDATES[*]})"
  fi
else
  say "CUDA libraries: $CUDA_LIB_NOTE"
fi
ldd bin/ringside >"$WORK/ldd" 2>&1
logblock "ldd bin/ringside (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})" "$WORK/ldd"
LDD_VERSION_ERRORS=$(ldd "${BINARIES[@]}" 2>&1 | grep "version .* not found" | sort -u)
[[ -n $LDD_VERSION_ERRORS ]] && say "FAIL: this machine's libraries are too old: $LDD_VERSION_ERRORS"

# ---- 2. The machine.
HAVE_GPU=0
GPU_NOTE=""
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 60 nvidia-smi >"$WORK/smi" 2>&1
  logblock "nvidia-smi" "$WORK/smi"
  SMI_L=$(timeout 30 nvidia-smi -L 2>&1)
  DRIVER=$(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
  SMI_CUDA=$(grep -o 'CUDA Version: *[0-9.]*' "$WORK/smi" | head -1)
  grep -q '^GPU [0-9]' <<<"$SMI_L" && HAVE_GPU=1
  ((HAVE_GPU)) || GPU_NOTE="nvidia-smi lists no GPU: $SMI_L"
else
  SMI_L="(no nvidia-smi)"
  DRIVER=$(sed -n 's/.*Kernel Module  *\([0-9.]*\).*/\1/p' /proc/driver/nvidia/version 2>/dev/null | head -1)
  SMI_CUDA=""
  if ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    HAVE_GPU=1
  else
    GPU_NOTE="no nvidia-smi and no /dev/nvidia0"
  fi
fi
HOST=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)
LIBC=$(ldd --version 2>&1 | head -1)
COMMIT=$(grep -m1 '^commit' VERSION 2>/dev/null | sed 's/^commit[:=]* *//')
COMMIT=${COMMIT:-unknown}
NEEDS=$(grep -m1 '^needs' VERSION 2>/dev/null | sed 's/^needs[:=]* *//')

rep "# ringside GPU check"
rep ""
rep "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
rep "- host: $HOST"
rep "- GPU: $(echo "$SMI_L" | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
rep "- driver: ${DRIVER:-unknown}${SMI_CUDA:+ ($SMI_CUDA)}"
rep "- C library: $LIBC${NEEDS:+ (bundle needs $NEEDS)}"
rep "- bundle commit: $COMMIT"
rep "- CUDA libraries: $CUDA_LIB_NOTE"
[[ -n $LDD_VERSION_ERRORS ]] && rep "- library version errors: $LDD_VERSION_ERRORS"
rep "- command: gpu_check.sh$( ((QUICK)) && echo ' --quick') (full output: gpu_check.log beside this report)"
rep ""
say "host $HOST; GPU: $(echo "$SMI_L" | head -1); driver ${DRIVER:-unknown}; $LIBC; bundle $COMMIT"
((HAVE_GPU)) || say "no GPU: $GPU_NOTE"

# ---- 3. Tests.
FAILURES=()
TEST_ROWS=()
rep "## Tests"
rep ""
rep "| test binary | result | passed | failed | skipped | time s | notes |"
rep "|---|---|---|---|---|---|---|"
for t in "${TESTS[@]}"; do
  name=$(basename "$t")
  tmp=$(mktemp -d "$WORK/t.XXXXXX")
  say "running $t"
  t0=$SECONDS
  TEST_TMPDIR=$tmp timeout -k 10 "$(tmo 300)" "$t" --gtest_color=no >"$WORK/out" 2>&1
  rc=$?
  secs=$((SECONDS - t0))
  logblock "$t (exit $rc, ${secs} s)" "$WORK/out"
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$WORK/out" | tail -1)
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$WORK/out" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$WORK/out" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$WORK/out" | tail -1)
  ran=${ran:-0} passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0}
  failing=$(sed -n 's/^\[  FAILED  \] \([A-Za-z_0-9/.]*\).*/\1/p' "$WORK/out" | grep -v '^[0-9]*$' | awk 'NF && !seen[$0]++' | tr '\n' ' ' | sed 's/ $//')
  skip_reason=$(awk '/: Skipped$/ {getline; print; exit}' "$WORK/out")
  notes=""
  if ((rc == 124 || rc == 137)); then
    status=TIMEOUT; notes="killed after the time limit"
  elif ((rc != 0)); then
    status=FAIL
    if [[ -n $failing ]]; then
      notes="failing: $failing"
    else
      notes="exit $rc: $(grep -v '^\s*$' "$WORK/out" | tail -2 | tr '\n' ' ' | cut -c1-200)"
    fi
  elif ((ran == 0)); then
    status=FAIL; notes="no test ran"
  elif ((skipped == ran)); then
    if ((HAVE_GPU)); then
      status=FAIL; notes="every test SKIPPED on a machine with a GPU: ${skip_reason}"
    else
      status=SKIPPED; notes="${skip_reason}"
    fi
  else
    status=PASS
    ((skipped)) && notes="skipped: ${skip_reason}"
  fi
  [[ $status == PASS || $status == SKIPPED ]] || FAILURES+=("$name $status ($(echo "$notes" | cut -c1-120))")
  rep "| $name | $status | $passed | $failed | $skipped | $secs | $(echo "$notes" | tr '|' '/') |"
  TEST_ROWS+=("$(printf '%-28s %-8s passed %3s failed %3s skipped %3s  %4ss  %s' "$name" "$status" "$passed" "$failed" "$skipped" "$secs" "$(echo "$notes" | cut -c1-90)")")
  rm -rf "$tmp"
done
((${#TESTS[@]})) || { FAILURES+=("no test binaries in tests/"); rep "| (none) | FAIL | | | | | no test binaries in tests/ |"; }
rep ""

# ---- 3b. The command line on the GPU: a short training run, its checkpoint resumed on
# the CPU (checkpoints are portable), and a device index the machine does not have.
CLI_ROWS=()
cli_case() {  # cli_case NAME WANT_RC REGEX ARGS...: runs bin/ringside ARGS
  local name=$1 want=$2 regex=$3; shift 3
  timeout -k 5 "$(tmo 120)" bin/ringside "$@" >"$WORK/out" 2>&1
  local rc=$? status=PASS
  logblock "cli $name: ringside $* (exit $rc)" "$WORK/out"
  if ((rc != want)) || ! grep -qE -- "$regex" "$WORK/out"; then
    status=FAIL
    FAILURES+=("cli $name: exit $rc (want $want), /$regex/ $(grep -qE -- "$regex" "$WORK/out" && echo found || echo 'not found')")
  fi
  rep "| $name | $status | $rc | \`ringside $*\` | $(grep -E -- "$regex" "$WORK/out" | tail -1 | cut -c1-120 | tr '|' '/') |"
  CLI_ROWS+=("$(printf '%-22s %-5s exit %s  %s' "$name" "$status" "$rc" "$(grep -E -- "$regex" "$WORK/out" | tail -1 | cut -c1-100)")")
}
if ((HAVE_GPU)); then
  rep "## Command line on the GPU"
  rep ""
  rep "| case | result | exit | command | line checked |"
  rep "|---|---|---|---|---|"
  CLI_DATA="--dataset=synthetic:train=4096,test=1024 --batch=64 --epochs=1 --threads=4"
  cli_case train_cuda 0 'test accuracy' train --device=cuda --model=cnn:lenet $CLI_DATA \
    --steps=30 --out="$WORK/cli"
  cli_case resume_on_cpu 0 'test accuracy' train --device=cpu --model=cnn:lenet $CLI_DATA \
    --steps=60 --out="$WORK/cli" --resume
  cli_case train_cuda_tf32 0 'test accuracy' train --device=cuda --precision=tf32 \
    --model=mlp:784-512-512-10 $CLI_DATA --steps=30
  cli_case missing_gpu_index 1 'cuda:7: this machine has' train --device=cuda:7 \
    --model=mlp:784-64-10 $CLI_DATA --steps=1
  rep ""
fi

# ---- 3c. Training over NCCL and with GPU workers ends where the reference runs do
# (issue #20): the CPU suite's recipe (tests/ddp_equivalence_test.sh and
# tests/ps_equivalence_test.sh: same model, data, seed, steps, lr, momentum, weight
# decay; batch B per rank against one process at batch N x B), FP32, on the GPU. Final
# checkpoints compared by compare_checkpoints.py (max |a - b| / max |b|): DDP over NCCL
# at N = 2 and 4 against one GPU at the big batch (1e-5) and against Gloo DDP on the CPU
# (1e-4); PS with 2 GPU workers (shards on the CPU) against one GPU (1e-5). Ranks
# outnumbering GPUs must say "emulated" in their step records.
EQ_ROWS=()
EQ_B=8
# 2400 samples: every global batch (16, 32) divides the data, so the batches line up
# without --drop_last (20 steps stay inside the first epoch).
# shellcheck disable=SC2054  # the commas are the dataset's, not array separators
EQ_COMMON=(--model=mlp:784-48-24-10 --dataset=synthetic:train=2400,test=240,seed=5 --epochs=1
           --steps=20 --lr=0.05 --momentum=0.9 --weight_decay=1e-4 --seed=3 --threads=1
           --eval_batch=240)
GPUS=$(grep -c '^GPU [0-9]' <<<"$SMI_L")
CK_PY=""  # a python3 with numpy, for compare_checkpoints.py
for c in $(command -v python3 2>/dev/null) /usr/bin/python3 /usr/local/bin/python3; do
  [[ -x $c ]] || continue
  if LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH "$c" -c 'import numpy' >/dev/null 2>&1; then CK_PY=$c; break; fi
done
eq_train() {  # eq_train NAME ARGS...: ringside train ARGS + the recipe into $WORK/eq/NAME
  local name=$1 rc; shift
  say "train $name"
  timeout -k 5 "$(tmo 120)" bin/ringside train "$@" "${EQ_COMMON[@]}" --out="$WORK/eq/$name" \
    >"$WORK/eq/$name.log" 2>&1
  rc=$?
  logblock "train $name: ringside train $* ${EQ_COMMON[*]} --out=DIR (exit $rc)" "$WORK/eq/$name.log"
  rep "| $name | \`ringside train $*\` | exit $rc |"
  if ((rc != 0)) || [[ ! -s $WORK/eq/$name/checkpoint.bin ]]; then
    FAILURES+=("train $name: exit $rc$([[ -s $WORK/eq/$name/checkpoint.bin ]] || echo ', no checkpoint'): $(grep -m1 'error' "$WORK/eq/$name.log" | cut -c1-120)")
    return 1
  fi
}
eq_labels() {  # eq_labels NAME N: each rank's records name a GPU; emulated where N > GPUs
  local name=$1 n=$2 r f dev emu want bad=""
  want=$((n > GPUS ? 1 : 0))
  for ((r = 0; r < n; r++)); do
    f=$WORK/eq/$name/metrics.rank$r.jsonl
    dev=$(grep -o '"device":"[^"]*"' "$f" 2>/dev/null | head -1 | cut -d'"' -f4)
    emu=$(grep -c '"emulated":true' "$f" 2>/dev/null)
    [[ $dev == cuda* ]] || bad="$bad rank $r device '${dev}';"
    if ((want)) && ((${emu:-0} == 0)); then bad="$bad rank $r not emulated;"; fi
    if ((!want)) && ((${emu:-0} > 0)); then bad="$bad rank $r emulated;"; fi
  done
  if [[ -n $bad ]]; then
    FAILURES+=("$name step records:$bad (want a cuda device$( ((want)) && echo ', emulated: true'))")
    EQ_ROWS+=("$(printf '%-34s %-5s%s' "$name records" FAIL "$bad")")
  else
    EQ_ROWS+=("$(printf '%-34s %-5s device %s, emulated %s on every rank' "$name records" PASS "$dev" "$( ((want)) && echo true || echo false)")")
  fi
}
eq_compare() {  # eq_compare CASE TOL REF OTHER (checkpoint names under $WORK/eq)
  local case=$1 tol=$2 ref=$WORK/eq/$3/checkpoint.bin other=$WORK/eq/$4/checkpoint.bin out rc rel status=PASS
  if [[ -z $CK_PY ]]; then
    status=FAIL; rel="not compared: no python3 with numpy"
  elif [[ ! -s $ref || ! -s $other ]]; then
    status=FAIL; rel="not compared: $([[ -s $ref ]] || echo "no $3 checkpoint ")$([[ -s $other ]] || echo "no $4 checkpoint")"
  else
    out=$(LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout 60 "$CK_PY" compare_checkpoints.py "$tol" "$ref" "$other" 2>&1)
    rc=$?
    { echo; echo "===== compare_checkpoints.py $tol $3 $4 (exit $rc)"; echo "$out"; } >>"$LOG"
    rel=$(sed -n 's/.*max relative difference \([^ ]*\).*/\1/p' <<<"$out" | head -1)
    if ((rc != 0)) || [[ -z $rel ]]; then
      status=FAIL; rel=${rel:-"$(tail -1 <<<"$out" | cut -c1-100)"}
    fi
  fi
  [[ $status == PASS ]] || FAILURES+=("$case: max relative difference $rel (bound $tol)")
  CMP_ROWS+=("| $case | $status | $rel | $tol |")
  EQ_ROWS+=("$(printf '%-34s %-5s max relative difference %s (bound %s)' "$case" "$status" "$rel" "$tol")")
}
if ((!HAVE_GPU)); then
  rep "## Training on the GPU: DDP over NCCL, PS with GPU workers, a killed rank, DDP step time"
  rep ""
  rep "Not run: no GPU on this machine ($GPU_NOTE)."
  rep ""
else
  mkdir -p "$WORK/eq"
  CMP_ROWS=()
  rep "## DDP over NCCL and PS with GPU workers: final parameters"
  rep ""
  rep "Recipe (tests/ddp_equivalence_test.sh, tests/ps_equivalence_test.sh), every run: \`${EQ_COMMON[*]}\`; batch $EQ_B per rank, the single-process references at N x $EQ_B; FP32. $GPUS GPU(s): ranks beyond that share a GPU (emulated, NCCL over sockets)."
  rep ""
  rep "| run | command (plus the recipe) | exit |"
  rep "|---|---|---|"
  for N in 2 4; do
    eq_train "big$N" --strategy=single --device=cuda --batch=$((N * EQ_B))
    eq_train "nccl$N" --strategy=ddp --backend=nccl --device=cuda --workers=$N --batch=$EQ_B \
      --timeout_s=60 && eq_labels "nccl$N" "$N"
    eq_train "gloo$N" --strategy=ddp --backend=gloo --device=cpu --workers=$N --batch=$EQ_B --timeout_s=60
  done
  eq_train ps2 --strategy=ps --device=cuda --workers=2 --ps_shards=2 --batch=$EQ_B --timeout_s=60
  for N in 2 4; do
    eq_compare "DDP NCCL x$N vs one GPU, batch $((N * EQ_B))" 1e-5 "big$N" "nccl$N"
    eq_compare "DDP NCCL x$N vs DDP Gloo (CPU) x$N" 1e-4 "gloo$N" "nccl$N"
  done
  eq_compare "PS, 2 GPU workers vs one GPU, batch $((2 * EQ_B))" 1e-5 big2 ps2
  rep ""
  rep "| comparison | result | max relative difference | bound |"
  rep "|---|---|---|---|"
  printf '%s\n' "${CMP_ROWS[@]}" >>"$REPORT"
  rep ""
fi

# ---- 3d. A rank killed mid-run: DDP over NCCL, 3 ranks, started directly with the
# launcher's variables (as tests/ddp_faults_test.sh case 1, so that the ranks' own
# failure detection is tested, not the launcher's), --timeout_s=10. Rank 2 is killed
# (SIGKILL) once rank 0 prints its step progress; ranks 0 and 1 must exit non-zero
# within 2 x the timeout, each with a last line naming rank 2.
KILL_ROWS=()
KILL_T=10
free_port() {
  local py
  for py in $(command -v python3 2>/dev/null) /usr/bin/python3; do
    [[ -x $py ]] || continue
    LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null && return
  done
  echo $((20000 + RANDOM % 20000))
}
alive() {  # alive PID: running (not exited, not a zombie)
  kill -0 "$1" 2>/dev/null || return 1
  ! grep -qE '^[0-9]+ \(.*\) Z' "/proc/$1/stat" 2>/dev/null
}
now() { date +%s.%N; }
if ((HAVE_GPU)); then
  rep "## A rank killed mid-run (DDP over NCCL, 3 ranks)"
  rep ""
  port=$(free_port)
  # shellcheck disable=SC2054
  KILL_ARGS=(train --strategy=ddp --backend=nccl --device=cuda --timeout_s="$KILL_T" --threads=1
             --model=mlp:784-64-10 --batch=32 --dataset=synthetic:train=60000,test=100 --epochs=50)
  rep "- each rank: \`RANK=r WORLD_SIZE=3 LOCAL_RANK=r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port ringside ${KILL_ARGS[*]}\`; rank 2 killed (SIGKILL) after rank 0's first progress line past step 10"
  KPID=()
  for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      RINGSIDE_RUN_ID=gpu-check-kill bin/ringside "${KILL_ARGS[@]}" >"$WORK/kill$r.log" 2>&1 &
    KPID[r]=$!
  done
  disown "${KPID[2]}"  # no "Killed" notice from the shell for the rank killed on purpose
  deadline=$((SECONDS + $(tmo 90)))
  until grep -qE 'step [1-9][0-9]+/' "$WORK/kill0.log" 2>/dev/null; do
    ((SECONDS >= deadline)) && break
    alive "${KPID[0]}" || break
    sleep 0.2
  done
  if grep -qE 'step [1-9][0-9]+/' "$WORK/kill0.log" 2>/dev/null; then
    kill -KILL "${KPID[2]}" 2>/dev/null
    t0=$(now)
    declare -A KEND=()
    limit=$((2 * KILL_T + 10))  # watch a little past 2 x timeout, to report how late
    while :; do
      for r in 0 1; do
        [[ -z ${KEND[$r]:-} ]] && ! alive "${KPID[r]}" && KEND[$r]=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
      done
      [[ -n ${KEND[0]:-} && -n ${KEND[1]:-} ]] && break
      awk -v a="$(now)" -v b="$t0" -v l="$limit" 'BEGIN { exit !(a - b > l) }' && break
      sleep 0.1
    done
    for r in 0 1; do
      status=PASS why=""
      if [[ -z ${KEND[$r]:-} ]]; then
        kill -KILL "${KPID[r]}" 2>/dev/null
        wait "${KPID[r]}" 2>/dev/null
        status=FAIL; why="still running ${limit} s after rank 2 was killed"; rc=killed; secs=">$limit"
      else
        wait "${KPID[r]}"; rc=$?
        secs=${KEND[$r]}
        if ((rc == 0)); then status=FAIL; why="exit 0"; fi
        if awk -v s="$secs" -v l="$((2 * KILL_T))" 'BEGIN { exit !(s >= l) }'; then
          status=FAIL; why="$why exited ${secs} s after the kill (bound $((2 * KILL_T)) s)"
        fi
      fi
      last=$(grep -v '^\s*$' "$WORK/kill$r.log" | tail -1)
      if ! grep -qE 'rank ([0-9]+, )*2\b' <<<"$last"; then status=FAIL; why="$why last line does not name rank 2"; fi
      logblock "killed-rank case: rank $r (exit $rc, ${secs} s after the kill)" "$WORK/kill$r.log"
      [[ $status == PASS ]] || FAILURES+=("rank 2 killed: rank $r:$why")
      rep "- rank $r: $status, exit $rc, ${secs} s after the kill (bound $((2 * KILL_T)) s); last line: \`$(cut -c1-200 <<<"$last" | tr '`' "'")\`"
      KILL_ROWS+=("$(printf 'rank %s  %-5s exit %-6s %6s s  %s' "$r" "$status" "$rc" "$secs" "$(cut -c1-100 <<<"$last")")")
    done
  else
    FAILURES+=("rank 2 killed: training never reached step 10 on rank 0: $(grep -v '^\s*$' "$WORK/kill0.log" | tail -1 | cut -c1-120)")
    rep "- FAIL: training never reached step 10 on rank 0 (see the log)"
    KILL_ROWS+=("FAIL: training never reached step 10 on rank 0")
    for r in 0 1; do kill -KILL "${KPID[r]}" 2>/dev/null; done
    kill -KILL "${KPID[2]}" 2>/dev/null
    for r in 0 1; do logblock "killed-rank case: rank $r" "$WORK/kill$r.log"; done
  fi
  wait "${KPID[0]}" "${KPID[1]}" "${KPID[2]}" 2>/dev/null
  logblock "killed-rank case: rank 2 (killed)" "$WORK/kill2.log"
  rep ""
fi

# ---- 3e. GPU cells from an experiment spec (issue #20): `ringside compare` runs one GPU,
# PS with GPU workers and DDP over NCCL at 1 and 2 workers (a small version of
# experiments/matrix/specs/gpu.textproto, to fit the budget); every cell must end "ok"
# with a cuda device in summary.csv, cells whose ranks outnumber the GPUs labelled
# emulated. The matrix's folder is copied to OUT/gpu_cells (records, no traces) so that
# `ringside report` can render it where gnuplot is installed.
CELL_ROWS=()
if ((HAVE_GPU)); then
  rep "## GPU cells from a spec (ringside compare)"
  rep ""
  cat >"$WORK/gpu_cells.textproto" <<'SPEC'
name: "gpu-check"
device: "cuda"
strategies { kind: "single" }
strategies { kind: "ps" ps_shards: 2 }
strategies { kind: "ddp" backend: "nccl" }
workers: 1
workers: 2
model: "mlp:784-1024-1024-10"
dataset: "synthetic:train=4096,test=256"
batch_per_worker: 64
steps: 20
epochs: 1
timeout_s: 60
cell_timeout_s: 120
SPEC
  rep "- \`bin/ringside compare --spec=SPEC --out=DIR\` with SPEC: $(grep -v '^$' "$WORK/gpu_cells.textproto" | tr '\n' ' ')"
  say "compare: GPU cells"
  timeout -k 5 "$(tmo 240)" bin/ringside compare --spec="$WORK/gpu_cells.textproto" \
    --out="$WORK/gpu_cells" >"$WORK/out" 2>&1
  rc=$?
  logblock "ringside compare (GPU cells) (exit $rc)" "$WORK/out"
  csv=$WORK/gpu_cells/summary.csv
  bad=""
  if ((rc != 0)) || [[ ! -s $csv ]]; then
    bad="compare exit $rc$([[ -s $csv ]] || echo ', no summary.csv')"
  else
    # cell,label,kind,workers,...,status (6),...,device (21),emulated (22)
    while IFS=, read -r cell _ _ workers _ status rest; do
      device=$(cut -d, -f15 <<<"$rest") emulated=$(cut -d, -f16 <<<"$rest")
      want_emu=$((workers > GPUS ? 1 : 0))
      [[ $status == ok ]] || bad="$bad $cell $status;"
      [[ $device == cuda* ]] || bad="$bad $cell device '$device';"
      [[ $emulated == "$want_emu" ]] || bad="$bad $cell emulated=$emulated (want $want_emu);"
      CELL_ROWS+=("$(printf '%-22s %-7s device %-8s emulated %s' "$cell" "$status" "$device" "$emulated")")
    done < <(tail -n +2 "$csv")
    [[ ${#CELL_ROWS[@]} -eq 5 ]] || bad="$bad ${#CELL_ROWS[@]} cells, expected 5;"
  fi
  if [[ -n $bad ]]; then
    FAILURES+=("GPU cells:$bad")
    rep "- **FAIL**:$bad"
  else
    rep "- PASS: 5 cells ok, every one on a cuda device, emulated where ranks outnumber the $GPUS GPU(s)"
  fi
  rep ""
  rep '```'
  [[ -s $csv ]] && cut -d, -f1,4,6,8,9,21,22 "$csv" >>"$REPORT"
  rep '```'
  rep ""
  if [[ -d $WORK/gpu_cells ]]; then
    mkdir -p "$OUTDIR/gpu_cells"
    (cd "$WORK/gpu_cells" && find . -name 'trace*.json' -prune -o -type f -print |
      while read -r f; do mkdir -p "$OUTDIR/gpu_cells/$(dirname "$f")"; cp "$f" "$OUTDIR/gpu_cells/$f"; done)
  fi
fi

# ---- 4. Benchmarks: ringside next to PyTorch, same model, batch and precision (FP32,
# TF32 off), same run.
ROWS=("mlp:784-4096-4096-4096-10 256" "mlp:784-4096-4096-4096-10 1024"
      "mlp:784-512-512-10 128" "cnn:lenet 64")
if ((QUICK)); then
  R_ARGS=(--warmup=10 --steps=50 --repeats=1); T_ARGS=(--warmup=10 --steps=50)
else
  R_ARGS=(--warmup=20 --steps=200 --repeats=3); T_ARGS=(--warmup=20 --steps=200)
fi
kv() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -1; }
BENCH_ROWS=()
rep "## Step benchmarks (FP32, TF32 off)"
rep ""
if ((!HAVE_GPU)); then
  rep "Not run: no GPU on this machine ($GPU_NOTE)."
  say "benchmarks not run: no GPU"
else
  PY=""
  TORCH_NOTE=""
  for c in $(command -v python3 2>/dev/null) /usr/bin/python3 /usr/local/bin/python3; do
    [[ -x $c ]] || continue
    info=$(LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout 120 "$c" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>/dev/null) || continue
    if [[ $info == *True ]]; then PY=$c; TORCH_NOTE="$c: torch $info"; break; fi
    TORCH_NOTE="$c: torch $info (no CUDA)"
  done
  [[ -n $TORCH_NOTE ]] || TORCH_NOTE="no python3 with torch"
  [[ -z $PY ]] && TORCH_NOTE="$TORCH_NOTE: torch column left empty"
  say "PyTorch: $TORCH_NOTE"
  rep "- ringside: \`bin/ringside bench step --device=cuda --precision=fp32 --model=M --batch=B ${R_ARGS[*]}\`"
  rep "- PyTorch: \`python3 torch_step_bench.py --device=cuda --precision=fp32 --model=M --batch=B ${T_ARGS[*]}\` ($TORCH_NOTE)"
  rep "- ratio = torch ms / ringside ms (>= 1: ringside at least as fast); TFLOP/s = the step's GEMM flops / median step time; sgemm = the cuBLAS SGEMM rate ringside measures"
  rep ""
  rep "| model | batch | ringside ms | torch ms | torch/ringside | ringside TFLOP/s | torch TFLOP/s | cuBLAS sgemm TFLOP/s | torch, one CUDA graph per step, ms |"
  rep "|---|---|---|---|---|---|---|---|---|"
  SGEMM=""
  for row in "${ROWS[@]}"; do
    set -- $row
    m=$1 b=$2
    say "bench ringside $m batch $b"
    timeout -k 5 "$(tmo 150)" bin/ringside bench step --device=cuda --precision=fp32 \
      --model="$m" --batch="$b" "${R_ARGS[@]}" >"$WORK/out" 2>&1
    rc=$?
    logblock "ringside bench step --device=cuda --model=$m --batch=$b (exit $rc)" "$WORK/out"
    line=$(grep '^result:' "$WORK/out" | tail -1)
    r_ms=$(kv step_ms "$line") r_tf=$(kv tflops "$line")
    s=$(grep -o 'sgemm_tflops=[0-9.eE+-]*' "$WORK/out" | head -1 | cut -d= -f2)
    [[ -n $s ]] && SGEMM=$s
    if ((rc != 0)) || [[ -z $r_ms ]]; then
      FAILURES+=("ringside bench $m batch $b: exit $rc, $( [[ -z $r_ms ]] && echo 'no result: line with step_ms' || echo 'result line present')")
      r_ms="FAIL"
    fi
    t_ms="" t_tf="" g_ms=""
    if [[ -n $PY ]]; then
      say "bench torch $m batch $b"
      LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout -k 5 "$(tmo 150)" "$PY" torch_step_bench.py \
        --device=cuda --precision=fp32 --model="$m" --batch="$b" "${T_ARGS[@]}" >"$WORK/out" 2>&1
      rc=$?
      logblock "torch_step_bench.py --device=cuda --model=$m --batch=$b (exit $rc)" "$WORK/out"
      line=$(grep '^result:' "$WORK/out" | tail -1)
      t_ms=$(kv step_ms "$line") t_tf=$(kv tflops "$line")
      [[ -z $t_ms ]] && t_ms="FAIL"
      # For the record: the same step captured in one CUDA graph (what removing every
      # launch gap buys; not compared with ringside's eager step).
      say "bench torch (CUDA graph) $m batch $b"
      LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout -k 5 "$(tmo 150)" "$PY" torch_step_bench.py \
        --device=cuda --precision=fp32 --cuda_graph --model="$m" --batch="$b" "${T_ARGS[@]}" \
        >"$WORK/out" 2>&1
      rc=$?
      logblock "torch_step_bench.py --device=cuda --cuda_graph --model=$m --batch=$b (exit $rc)" "$WORK/out"
      g_ms=$(kv step_ms "$(grep '^result:' "$WORK/out" | tail -1)")
    fi
    ratio=""
    if [[ $r_ms =~ ^[0-9.]+$ && $t_ms =~ ^[0-9.]+$ ]]; then
      ratio=$(awk -v t="$t_ms" -v r="$r_ms" 'BEGIN { if (r > 0) printf "%.2f", t / r }')
    fi
    rep "| $m | $b | $r_ms | $t_ms | $ratio | $r_tf | $t_tf | ${s:-$SGEMM} | ${g_ms:--} |"
    BENCH_ROWS+=("$(printf '%-26s %5s %10s %10s %7s %9s %9s %9s %9s' "$m" "$b" "$r_ms" "${t_ms:--}" "${ratio:--}" "${r_tf:--}" "${t_tf:--}" "${s:-${SGEMM:--}}" "${g_ms:--}")")
  done
  SLOWER=0
  for r in "${BENCH_ROWS[@]}"; do
    ratio=$(awk '{print $5}' <<<"$r")
    [[ $ratio =~ ^[0-9.]+$ ]] && awk -v x="$ratio" 'BEGIN { exit !(x < 1) }' && SLOWER=$((SLOWER + 1))
  done
  rep ""
  if ((SLOWER)); then
    rep "ringside is slower than PyTorch on $SLOWER of ${#ROWS[@]} rows."
    FAILURES+=("ringside slower than PyTorch on $SLOWER of ${#ROWS[@]} benchmark rows")
  fi
  # The explicit faster precisions, for the record (not compared: PyTorch's bf16 is
  # autocast, ringside's rounds the GEMM operands only).
  for prec in tf32 bf16; do
    say "bench ringside $prec"
    timeout -k 5 "$(tmo 60)" bin/ringside bench step --device=cuda --precision=$prec \
      --model=mlp:784-4096-4096-4096-10 --batch=1024 --warmup=10 --steps=50 --repeats=1 \
      >"$WORK/out" 2>&1
    logblock "ringside bench step --precision=$prec (exit $?)" "$WORK/out"
    line=$(grep '^result:' "$WORK/out" | tail -1)
    rep "- $prec: mlp:784-4096-4096-4096-10 batch 1024: ringside $(kv step_ms "$line") ms, $(kv tflops "$line") TFLOP/s (GEMM $(kv sgemm_tflops "$line") TFLOP/s at 4096^3)"
    BENCH_ROWS+=("$(printf '%-26s %5s %10s %10s %7s %9s %9s %9s' "mlp-4096 ($prec)" 1024 "$(kv step_ms "$line")" - - "$(kv tflops "$line")" - "$(kv sgemm_tflops "$line")")")
  done
fi
rep ""

# ---- 4b. NCCL all-reduce (issue #20's first slice): ringside's NCCL process group
# against PyTorch's NCCL all-reduce, same ranks, same sizes, same run. Where ranks
# outnumber GPUs each rank has its own NCCL_HOSTID: NCCL over sockets, emulated.
NCCL_ROWS=()
# sweep_rows FILE: rank 0's table rows, "bytes busbw wrong", one per line.
sweep_rows() { sed -n 's/^\[rank 0\] *//p' "$1" | awk '$1 ~ /^[0-9]+$/ && NF >= 6 {print $1, $5, $6}'; }
if ((HAVE_GPU)); then
  rep "## NCCL all-reduce, ringside vs PyTorch"
  rep ""
  for ranks in 2 4; do
    say "bench allreduce nccl, $ranks ranks"
    timeout -k 5 "$(tmo 150)" bin/ringside bench allreduce --backend=nccl --workers=$ranks \
      --timeout_s=60 >"$WORK/r_nccl" 2>&1
    rc=$?
    logblock "ringside bench allreduce --backend=nccl --workers=$ranks (exit $rc)" "$WORK/r_nccl"
    t_ok=0
    if [[ -n $PY ]]; then
      LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout -k 5 "$(tmo 150)" bin/ringside launch \
        --nproc_per_node=$ranks --master_port=0 -- "$PY" torch_allreduce_bench.py --backend=nccl \
        >"$WORK/t_nccl" 2>&1 && t_ok=1
      logblock "torch_allreduce_bench.py --backend=nccl, $ranks ranks (finished: $t_ok)" "$WORK/t_nccl"
    fi
    header=$(sed -n 's/^\[rank 0\] *# all-reduce/all-reduce/p' "$WORK/r_nccl" | head -1)
    rep "$ranks ranks: $header"
    rep ""
    rep "| bytes | ringside busbw GB/s | torch busbw GB/s | ringside / torch | ringside #wrong | torch #wrong |"
    rep "|---|---|---|---|---|---|"
    sweep_rows "$WORK/r_nccl" >"$WORK/r_rows"
    sweep_rows "$WORK/t_nccl" 2>/dev/null >"$WORK/t_rows"
    if ((rc != 0)) || [[ ! -s $WORK/r_rows ]]; then
      FAILURES+=("bench allreduce --backend=nccl at $ranks ranks: exit $rc, $(wc -l <"$WORK/r_rows") rows")
    fi
    # #wrong must be 0 at every size of the sweep, 1 KiB to 256 MiB (19 sizes): a
    # missing size or a #wrong that is not a number fails as a wrong one does.
    wrong_total=$(awk '$3 ~ /^[0-9]+$/ {s += $3} END {print s + 0}' "$WORK/r_rows")
    wrong_sizes=$(awk '$3 !~ /^0$/ {printf "%s%s (#wrong %s)", sep, $1, $3; sep = ", "}' "$WORK/r_rows")
    rows_n=$(wc -l <"$WORK/r_rows")
    [[ -z $wrong_sizes ]] || FAILURES+=("bench allreduce --backend=nccl at $ranks ranks: $wrong_total wrong elements, at $wrong_sizes")
    if ((rows_n != 19)) || [[ $(head -1 "$WORK/r_rows" | cut -d' ' -f1) != 1024 || $(tail -1 "$WORK/r_rows" | cut -d' ' -f1) != $((256 << 20)) ]]; then
      FAILURES+=("bench allreduce --backend=nccl at $ranks ranks: $rows_n sizes from $(head -1 "$WORK/r_rows" | cut -d' ' -f1) to $(tail -1 "$WORK/r_rows" | cut -d' ' -f1) bytes (want 19, 1024 to $((256 << 20)))")
    fi
    wrong_note="#wrong at $ranks ranks: $wrong_total in all, over $rows_n sizes$([[ -n $wrong_sizes ]] && echo ", NOT 0 at $wrong_sizes")."
    while read -r bytes busbw wrong; do
      tb=$(awk -v b="$bytes" '$1 == b {print $2}' "$WORK/t_rows")
      tw=$(awk -v b="$bytes" '$1 == b {print $3}' "$WORK/t_rows")
      ratio=""
      [[ -n $tb ]] && ratio=$(awk -v r="$busbw" -v t="$tb" 'BEGIN { if (t > 0) printf "%.2f", r / t }')
      rep "| $bytes | $busbw | ${tb:--} | ${ratio:--} | $wrong | ${tw:--} |"
      if ((bytes >= 64 << 20)); then
        NCCL_ROWS+=("$(printf '%5s ranks %10s bytes  ringside %8s  torch %8s  ratio %5s  wrong %s' "$ranks" "$bytes" "$busbw" "${tb:--}" "${ratio:--}" "$wrong")")
      fi
    done <"$WORK/r_rows"
    rep ""
    rep "$wrong_note"
    rep ""
  done
fi

# ---- 4c. DDP step time against PyTorch DDP (issue #20's bar: at least as fast): both
# over NCCL on this machine's GPU(s), 2 ranks, mlp:784-4096-4096-4096-10 at batch 256 per
# rank, FP32, same run. ringside: the median step_ms of rank 0's records after the first
# 10% of steps; PyTorch: torch_ddp_bench.py --spawn 2 (mp.spawn, data made on the GPU,
# each step timed between device synchronisations), rank 0's median after as many
# warm-up steps. On one GPU both sides are emulated alike (one NCCL_HOSTID per rank).
DDPB_ROWS=()
if ((HAVE_GPU)); then
  if ((QUICK)); then D_STEPS=40; else D_STEPS=100; fi
  D_WARM=$((D_STEPS / 10))
  D_MODEL=784-4096-4096-4096-10
  # shellcheck disable=SC2054
  D_ARGS=(train --strategy=ddp --backend=nccl --device=cuda --precision=fp32 --workers=2
          --model="mlp:$D_MODEL" --batch=256 --dataset=synthetic:train=65536,test=256 --epochs=1
          --steps="$D_STEPS" --lr=0.02 --momentum=0.9 --timeout_s=60)
  T_DDP_ARGS=(--spawn 2 --device=cuda --backend=nccl --widths="$D_MODEL" --batch=256
              --synthetic=16384 --lr=0.02 --momentum=0.9 --warmup="$D_WARM" --steps="$((D_STEPS - D_WARM))")
  rep "## DDP step time, ringside vs PyTorch DDP (NCCL, 2 ranks, $GPUS GPU(s))"
  rep ""
  rep "- ringside: \`bin/ringside ${D_ARGS[*]} --out=DIR\`; step ms = median of rank 0's step_ms (metrics.rank0.jsonl) after the first $D_WARM steps"
  rep "- PyTorch: \`python3 torch_ddp_bench.py ${T_DDP_ARGS[*]}\` ($TORCH_NOTE); step ms = rank 0's median over the timed steps"
  say "ddp step time: ringside"
  timeout -k 5 "$(tmo 180)" bin/ringside "${D_ARGS[@]}" --out="$WORK/ddpbench" >"$WORK/out" 2>&1
  rc=$?
  logblock "ringside ${D_ARGS[*]} (exit $rc)" "$WORK/out"
  f=$WORK/ddpbench/metrics.rank0.jsonl
  r_ms=$(grep -o '"step_ms":[0-9.eE+-]*' "$f" 2>/dev/null | cut -d: -f2 |
    awk '{v[NR] = $1} END {for (i = int(NR / 10) + 1; i <= NR; i++) print v[i]}' | sort -g |
    awk '{a[NR] = $1} END {if (NR == 0) exit; if (NR % 2) printf "%.3f", a[(NR + 1) / 2]; else printf "%.3f", (a[NR / 2] + a[NR / 2 + 1]) / 2}')
  r_emu=$(grep -c '"emulated":true' "$f" 2>/dev/null)
  r_dev=$(grep -o '"device":"[^"]*"' "$f" 2>/dev/null | head -1 | cut -d'"' -f4)
  if ((rc != 0)) || [[ -z $r_ms ]]; then
    FAILURES+=("ddp step time: ringside exit $rc, $( [[ -z $r_ms ]] && echo 'no step records' || echo "median $r_ms ms")")
    r_ms=FAIL
  fi
  t_ms="" t_emu=""
  if [[ -z $PY ]]; then
    FAILURES+=("ddp step time: no PyTorch with CUDA to compare with ($TORCH_NOTE)")
    t_ms=missing
  else
    say "ddp step time: torch"
    LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout -k 5 "$(tmo 240)" "$PY" torch_ddp_bench.py \
      "${T_DDP_ARGS[@]}" >"$WORK/out" 2>&1
    rc=$?
    logblock "torch_ddp_bench.py ${T_DDP_ARGS[*]} (exit $rc)" "$WORK/out"
    line=$(grep '^result:' "$WORK/out" | tail -1)
    t_ms=$(kv step_ms "$line") t_emu=$(kv emulated "$line")
    if ((rc != 0)) || [[ -z $t_ms ]]; then
      FAILURES+=("ddp step time: torch_ddp_bench.py exit $rc, $( [[ -z $t_ms ]] && echo 'no result: line' || echo "step_ms $t_ms")")
      t_ms=FAIL
    fi
  fi
  ratio=""
  if [[ $r_ms =~ ^[0-9.]+$ && $t_ms =~ ^[0-9.]+$ ]]; then
    ratio=$(awk -v t="$t_ms" -v r="$r_ms" 'BEGIN { if (r > 0) printf "%.2f", t / r }')
    if awk -v x="$ratio" 'BEGIN { exit !(x < 1) }'; then
      FAILURES+=("ddp step time: ringside $r_ms ms slower than PyTorch DDP $t_ms ms (ratio $ratio)")
    fi
  fi
  r_label="${r_dev:-?}$( ((${r_emu:-0} > 0)) && echo ', emulated')"
  t_label="cuda$( [[ $t_emu == 1 ]] && echo ', emulated')"
  rep ""
  rep "| model | batch per rank | ranks | ringside ms | torch ms | torch/ringside | ringside device | torch device |"
  rep "|---|---|---|---|---|---|---|---|"
  rep "| mlp:$D_MODEL | 256 | 2 | $r_ms | ${t_ms:--} | ${ratio:--} | $r_label | $t_label |"
  rep ""
  DDPB_ROWS+=("$(printf 'mlp:%s batch 256 x 2 ranks: ringside %s ms (%s), torch %s ms (%s), torch/ringside %s' \
    "$D_MODEL" "$r_ms" "$r_label" "${t_ms:--}" "$t_label" "${ratio:--}")")
fi

# ---- 5. Verdict.
if ((${#FAILURES[@]})); then
  VERDICT="FAIL: $(printf '%s; ' "${FAILURES[@]}" | sed 's/; $//')"
  ((HAVE_GPU)) || VERDICT="$VERDICT; and NO GPU ($GPU_NOTE): nothing on the GPU path was verified"
  RC=1
elif ((!HAVE_GPU)); then
  VERDICT="NO GPU: $GPU_NOTE; the GPU tests skipped and the GPU benchmarks and training checks did not run, so nothing on the GPU path was verified"
  RC=3
else
  VERDICT="PASS: every GPU test binary passed on $(echo "$SMI_L" | head -1 | sed 's/ (UUID.*//')"
  RC=0
fi
rep "## Verdict"
rep ""
rep "$VERDICT (exit $RC; $((SECONDS - START)) s)"

echo
echo "==== ringside GPU check: $(date -u '+%Y-%m-%d %H:%M UTC'), $HOST, bundle $COMMIT"
echo "GPU: $(echo "$SMI_L" | head -1 | sed 's/ (UUID.*//'); driver ${DRIVER:-unknown}; $LIBC"
echo "CUDA libraries: $CUDA_LIB_NOTE"
echo "---- tests"
printf '%s\n' "${TEST_ROWS[@]}"
if ((${#CLI_ROWS[@]})); then
  echo "---- command line on the GPU"
  printf '%s\n' "${CLI_ROWS[@]}"
fi
if ((${#EQ_ROWS[@]})); then
  echo "---- DDP over NCCL and PS with GPU workers: final parameters against the references"
  printf '%s\n' "${EQ_ROWS[@]}"
fi
if ((${#KILL_ROWS[@]})); then
  echo "---- a rank killed mid-run (DDP over NCCL, 3 ranks, --timeout_s=$KILL_T): the survivors"
  printf '%s\n' "${KILL_ROWS[@]}"
fi
if ((${#CELL_ROWS[@]})); then
  echo "---- GPU cells from a spec (ringside compare): status, device, emulated"
  printf '%s\n' "${CELL_ROWS[@]}"
fi
if ((${#DDPB_ROWS[@]})); then
  echo "---- DDP step time against PyTorch DDP (NCCL; ratio >= 1: ringside at least as fast)"
  printf '%s\n' "${DDPB_ROWS[@]}"
fi
if ((${#NCCL_ROWS[@]})); then
  echo "---- NCCL all-reduce busbw GB/s at 64 MiB and above (ringside / torch; same ranks)"
  printf '%s\n' "${NCCL_ROWS[@]}"
fi
if ((${#BENCH_ROWS[@]})); then
  echo "---- step benchmarks, FP32 (ms = median step; ratio = torch/ringside, >= 1: ringside at least as fast)"
  printf '%-26s %5s %10s %10s %7s %9s %9s %9s %9s\n' model batch ringside torch ratio r_TFLOPs t_TFLOPs sgemm t_graph
  printf '%s\n' "${BENCH_ROWS[@]}"
fi
echo "---- $VERDICT"
echo "report: $REPORT; full log: $LOG; $((SECONDS - START)) s"
exit "$RC"
