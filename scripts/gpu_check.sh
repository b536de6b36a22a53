#!/usr/bin/env bash
# The GPU check: runs every GPU test binary and the GPU step benchmarks (ringside next to
# PyTorch) from the portable GPU bundle, and writes one report. Built for a machine with
# an NVIDIA GPU, its driver and the CUDA runtime libraries, and no build tools; see
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
# tests all skipped on a machine with a GPU counts as failed) and every ringside
# benchmark produced its result line; 1 if anything failed; 2 for bad usage or a missing
# bundle; 3 if this machine has no GPU (nothing on the GPU path was verified). The last
# lines on stdout are a summary (the report's tables and the verdict).
set -uo pipefail

usage() {
  sed -n '2,20s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
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
    wrong_total=$(awk '{s += $3} END {print s + 0}' "$WORK/r_rows")
    ((wrong_total == 0)) || FAILURES+=("bench allreduce --backend=nccl at $ranks ranks: $wrong_total wrong elements")
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
  done
fi

# ---- 5. Verdict.
if ((${#FAILURES[@]})); then
  VERDICT="FAIL: $(printf '%s; ' "${FAILURES[@]}" | sed 's/; $//')"
  ((HAVE_GPU)) || VERDICT="$VERDICT; and NO GPU ($GPU_NOTE): nothing on the GPU path was verified"
  RC=1
elif ((!HAVE_GPU)); then
  VERDICT="NO GPU: $GPU_NOTE; the GPU tests skipped and the GPU benchmarks did not run, so nothing on the GPU path was verified"
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
