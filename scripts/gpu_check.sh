#!/usr/bin/env bash
# The GPU check: runs the GPU test binaries and the suite's own equivalence and fault
# tests (tests/*.sh, in GPU mode: RINGSIDE_TEST_DEVICE=cuda, RINGSIDE_TEST_BACKEND=nccl,
# read by tests/test_lib.sh) against the bundle's bin/ringside, then checks NCCL's
# all-reduce for wrong elements, and writes one report. Built for a machine with an
# NVIDIA GPU, its driver and the CUDA runtime libraries, and no build tools; see
# docs/build.md, "The GPU bundle", and docs/gpu.md.
#
#   gpu_check.sh [--out DIR] [--bench [--quick]] [--stand-in] [--only TEST[,TEST...]] [--files]
#
# Run it from the bundle (gpu_bundle/gpu_check.sh); scripts/gpu_check.sh in a checkout
# uses the checkout's gpu_bundle/.
#   --out DIR   DIR/gpu_report.md (the report) and DIR/gpu_check.log (every command's
#               full output). Default: $OUT if set, else ./gpu_report.
#   --bench     then the benchmarks (gpu_bench.sh: step time and DDP step time next to
#               PyTorch; --quick: fewer steps); a call with them may take 9 minutes.
#   --stand-in  the CPU stands in for the GPU (cuda -> cpu, nccl -> gloo): no GPU
#               needed, the GPU test binaries and the NCCL check are not run; proves
#               the runner and the bundle's tests here. RINGSIDE_GPU_CHECK_PLANT=ddp_lr
#               (honoured in this mode only, for demonstration) plants a fault: every
#               DDP run trains with another learning rate, so the equivalence fails.
#   --only      run only these shell tests (names as in --files, without .sh).
#   --files     print the files the bundle's sh/ folder must carry, and exit.
# Exit status: 0 only if every test passed (a binary whose tests all skipped on a
# machine with a GPU counts as failed); 1 if anything failed; 2 for bad usage or a
# missing bundle; 3 at once, in one line naming why, if this machine has no GPU (and
# --stand-in was not given). The last lines on stdout summarise the report.
set -uo pipefail

# The suite's shell tests the check runs, each with the helpers it takes after the
# ringside binary (all from tests/; scripts/gpu_bundle.sh copies them into sh/).
SHELL_TESTS=(
  "ddp_equivalence_test.sh compare_checkpoints.py"
  "ps_equivalence_test.sh compare_checkpoints.py check_shard_bytes.py"
  "ddp_faults_test.sh"
)
SHELL_LIBS=(test_lib.sh)

usage() { sed -n '2,27s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
OUTDIR="" STAND_IN=0 ONLY="" BENCH=0 BENCH_QUICK=0
while (($#)); do
  case "$1" in
    --out) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; OUTDIR=$2; shift 2 ;;
    --out=*) OUTDIR=${1#--out=}; shift ;;
    --stand-in) STAND_IN=1; shift ;;
    --bench) BENCH=1; shift ;;
    --quick) BENCH_QUICK=1; shift ;;
    --only) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; ONLY=$2; shift 2 ;;
    --only=*) ONLY=${1#--only=}; shift ;;
    --files) printf '%s\n' "${SHELL_LIBS[@]}" "${SHELL_TESTS[@]}" | tr ' ' '\n' | sort -u; exit 0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

# ---- The GPU, first: without one (and without --stand-in) nothing here can be checked.
GPUS=0 SMI_L="" DRIVER=""
if command -v nvidia-smi >/dev/null 2>&1; then
  SMI_L=$(timeout 30 nvidia-smi -L 2>&1)
  GPUS=$(grep -c '^GPU [0-9]' <<<"$SMI_L")
  DRIVER=$(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
  NO_GPU="nvidia-smi lists no GPU: $(head -1 <<<"$SMI_L")"
else
  ls /dev/nvidia[0-9]* >/dev/null 2>&1 && GPUS=$(ls /dev/nvidia[0-9]* | wc -l)
  NO_GPU="no nvidia-smi and no /dev/nvidia0"
fi
if ((STAND_IN)); then
  echo "gpu_check: STAND-IN mode: the CPU stands in for the GPU (cuda -> cpu, nccl -> gloo);" \
       "the GPU test binaries and the NCCL check are not run: nothing on the GPU path is verified"
elif ((GPUS == 0)); then
  echo "gpu_check: NO GPU: $NO_GPU; nothing was run (exit 3)"
  exit 3
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
is_bundle() { [[ -x $1/bin/ringside || -f $1/bin/ringside.xz ]]; }
if is_bundle "$HERE"; then B=$HERE
elif is_bundle "$HERE/../gpu_bundle"; then B=$(cd "$HERE/../gpu_bundle" && pwd)
else
  echo "gpu_check: FAIL: no bundle beside this script (no bin/ringside in $HERE or" \
       "$HERE/../gpu_bundle); build one with scripts/gpu_bundle.sh" >&2
  exit 2
fi
OUTDIR=${OUTDIR:-${OUT:-./gpu_report}}
mkdir -p "$OUTDIR" || { echo "gpu_check: cannot create $OUTDIR" >&2; exit 2; }
OUTDIR=$(cd "$OUTDIR" && pwd)
REPORT=$OUTDIR/gpu_report.md LOG=$OUTDIR/gpu_check.log
: >"$REPORT"; : >"$LOG"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$B" || exit 2

# Every step's time limit comes out of one budget (GPU_CHECK_BUDGET_S, default 290 s:
# one call within 5 minutes of device time; 540 s with --bench). tmo WANT: WANT s, or
# what is left (>= 5).
BUDGET=${GPU_CHECK_BUDGET_S:-$( ((BENCH)) && echo 540 || echo 290)} START=$SECONDS
tmo() { local left=$((BUDGET - (SECONDS - START))); ((left < $1)) && { ((left < 5)) && echo 5 || echo "$left"; } || echo "$1"; }
say() { echo "gpu_check: $*"; echo "gpu_check: $*" >>"$LOG"; }
rep() { printf '%s\n' "$*" >>"$REPORT"; }
logblock() { { echo; echo "===== $1"; cat "$2"; } >>"$LOG"; }  # logblock TITLE FILE
FAILURES=() ROWS=()
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}  # for PyTorch (gpu_bench.sh): its own CUDA libraries

# ---- Files the bundle ships compressed (scripts/gpu_bundle.sh xz's the binaries and
# libraries over 1 MiB): unpacked once in place, or, where the bundle is read-only, in
# a private copy of it.
if compgen -G '*/*.xz' >/dev/null && [[ ! -w bin || ! -w tests || ! -w lib ]]; then
  cp -r "$B" "$WORK/bundle" && B=$WORK/bundle && cd "$B" || exit 2
  say "the bundle is read-only: unpacking a copy in $B"
fi
for f in */*.xz; do
  [[ -e $f && ! -e ${f%.xz} ]] || continue
  if { xz -dc "$f" 2>/dev/null || python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as s: shutil.copyfileobj(s, sys.stdout.buffer)' "$f"; } >"${f%.xz}.part" &&
     mv "${f%.xz}.part" "${f%.xz}"; then
    [[ $f == lib/* ]] || chmod 755 "${f%.xz}"
    say "unpacked $f"
  else
    FAILURES+=("cannot unpack $f (needs xz or python3's lzma)")
  fi
done

# ---- CUDA libraries: cuBLAS, cuBLASLt and NCCL come from this machine. Where the
# loader misses one, the usual folders (CUDA toolkits, PyTorch's nvidia wheels) are
# searched and the ones that hold it put in front of LD_LIBRARY_PATH.
BINARIES=(bin/ringside)
[[ -f tests/LIST ]] && while read -r t; do [[ -x tests/$t ]] && BINARIES+=("tests/$t"); done <tests/LIST
missing_libs() { ldd "${BINARIES[@]}" 2>/dev/null | awk '/=> not found/ {print $1}' | sort -u; }
LIB_NOTE="the loader found every library"
MISSING=$(missing_libs)
if [[ -n $MISSING ]]; then
  DIRS=$( { ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu
            python3 -c 'import glob, site; print("\n".join(d for s in site.getsitepackages()
                        for d in sorted(glob.glob(s + "/nvidia/*/lib"))))'; } 2>/dev/null)
  ADD=""
  for lib in $MISSING; do
    d=$(for d in $DIRS; do [[ -e $d/$lib ]] && { echo "$d"; break; }; done)
    [[ -n $d && :$ADD: != *:$d:* ]] && ADD=$ADD${ADD:+:}$d
  done
  [[ -n $ADD ]] && export LD_LIBRARY_PATH=$ADD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  LIB_NOTE="LD_LIBRARY_PATH prepended with ${ADD:-nothing}"
  MISSING=$(missing_libs)
  [[ -z $MISSING ]] || { LIB_NOTE="$LIB_NOTE; NOT FOUND: $(echo $MISSING)"; FAILURES+=("libraries not found: $(echo $MISSING)"); }
fi
say "libraries: $LIB_NOTE"

# A python3 with numpy, for the tests' checkpoint comparisons.
PY=""
for c in $(command -v python3) /usr/bin/python3 /usr/local/bin/python3; do
  [[ -x $c ]] && "$c" -c 'import numpy' 2>/dev/null && { PY=$c; break; }
done
[[ -n $PY ]] || FAILURES+=("no python3 with numpy (the tests compare checkpoints with it)")
# What the shell tests call besides ringside (docs/testing.md: every shell test needs them).
for tool in bc pkill pgrep timeout /usr/bin/python3; do
  command -v "$tool" >/dev/null || FAILURES+=("the shell tests need $tool, missing here")
done

COMMIT=$(sed -n 's/^commit: *//p' VERSION 2>/dev/null | head -1)
rep "# ringside GPU check$( ((STAND_IN)) && echo ' (STAND-IN: the CPU stands in for the GPU)')"
rep ""
rep "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host: $(hostname 2>/dev/null)"
rep "- GPU: $( ((GPUS)) && echo "$SMI_L" | tr '\n' ';' || echo "none ($NO_GPU)"); driver: ${DRIVER:-unknown}"
rep "- C library: $(ldd --version 2>&1 | head -1); bundle commit: ${COMMIT:-unknown}; libraries: $LIB_NOTE"
rep "- command: gpu_check.sh$( ((BENCH)) && echo ' --bench')$( ((BENCH_QUICK)) && echo ' --quick')$( ((STAND_IN)) && echo ' --stand-in')${ONLY:+ --only $ONLY} (full output: gpu_check.log beside this report)"
rep ""

# ---- The GPU test binaries (GoogleTest). Not in stand-in mode.
if ((!STAND_IN)) && [[ -f tests/LIST ]]; then
  rep "## Test binaries"; rep ""
  rep "| test binary | result | passed | failed | skipped | time s | notes |"; rep "|---|---|---|---|---|---|---|"
  while read -r name; do
    say "running tests/$name"
    t0=$SECONDS
    TEST_TMPDIR=$(mktemp -d "$WORK/t.XXXXXX") timeout -k 10 "$(tmo 240)" "tests/$name" --gtest_color=no >"$WORK/out" 2>&1
    rc=$? secs=$((SECONDS - t0))
    logblock "tests/$name (exit $rc, $secs s)" "$WORK/out"
    count() { sed -n "s/^\[  *$1 *\] \([0-9]*\) tests\{0,1\}[.,].*/\1/p" "$WORK/out" | tail -1; }
    passed=$(count PASSED) failed=$(count FAILED) skipped=$(count SKIPPED)
    notes=$(sed -n 's/^\[  FAILED  \] \([A-Za-z_0-9/.]*\)$/\1/p' "$WORK/out" | sort -u | tr '\n' ' ')
    if ((rc != 0)); then status=FAIL notes="exit $rc ${notes:-$(tail -1 "$WORK/out" | cut -c1-120)}"
    elif [[ -z $passed || $passed == 0 ]]; then status=FAIL notes="no test passed (every one skipped on a machine with a GPU?)"
    else status=PASS; fi
    [[ $status == PASS ]] || FAILURES+=("$name: $notes")
    rep "| $name | $status | ${passed:-0} | ${failed:-0} | ${skipped:-0} | $secs | $(tr '|' '/' <<<"$notes") |"
    ROWS+=("$(printf '%-34s %-5s %4s s  passed %s, skipped %s %s' "$name" "$status" "$secs" "${passed:-0}" "${skipped:-0}" "$notes")")
  done <tests/LIST
  rep ""
fi

# ---- The suite's shell tests, in GPU mode (or with the CPU standing in).
if ((STAND_IN)); then DEVICE=cpu BACKEND=gloo; else DEVICE=cuda BACKEND=nccl; fi
RINGSIDE=$B/bin/ringside
if ((STAND_IN)) && [[ ${RINGSIDE_GPU_CHECK_PLANT:-} == ddp_lr ]]; then
  # The planted fault: DDP runs train with lr 0.07 (the last --lr wins), their references not.
  RINGSIDE=$WORK/ringside_planted
  printf '#!/usr/bin/env bash\nfor a; do [[ $a == --strategy=ddp ]] && exec %q "$@" --lr=0.07; done\nexec %q "$@"\n' \
    "$B/bin/ringside" "$B/bin/ringside" >"$RINGSIDE"
  chmod +x "$RINGSIDE"
  say "PLANTED FAULT (RINGSIDE_GPU_CHECK_PLANT=ddp_lr): every DDP run trains with --lr=0.07"
  rep "- **planted fault** (RINGSIDE_GPU_CHECK_PLANT=ddp_lr): every DDP run trains with --lr=0.07"; rep ""
elif [[ -n ${RINGSIDE_GPU_CHECK_PLANT:-} ]]; then
  echo "gpu_check: RINGSIDE_GPU_CHECK_PLANT=$RINGSIDE_GPU_CHECK_PLANT: only ddp_lr, with --stand-in" >&2; exit 2
fi
rep "## The suite's tests, RINGSIDE_TEST_DEVICE=$DEVICE RINGSIDE_TEST_BACKEND=$BACKEND"; rep ""
rep "| test | result | time s | first failures |"; rep "|---|---|---|---|"
for entry in "${SHELL_TESTS[@]}"; do
  read -r script helpers <<<"$entry"
  name=${script%.sh}
  [[ -z $ONLY || ,$ONLY, == *,$name,* ]] || continue
  args=()
  for h in $helpers; do args+=("$B/sh/$h"); done
  say "running sh/$script ($DEVICE, $BACKEND)"
  t0=$SECONDS
  RINGSIDE_TEST_DEVICE=$DEVICE RINGSIDE_TEST_BACKEND=$BACKEND RINGSIDE_TEST_GPUS=$GPUS \
    RINGSIDE_TEST_PYTHON=${PY:-/usr/bin/python3} TEST_TMPDIR=$(mktemp -d "$WORK/s.XXXXXX") \
    timeout -k 10 "$(tmo 180)" bash "sh/$script" "$RINGSIDE" "${args[@]}" >"$WORK/out" 2>&1
  rc=$? secs=$((SECONDS - t0))
  logblock "sh/$script (exit $rc, $secs s)" "$WORK/out"
  notes=$( { grep -m3 -E '^FAIL|SKIPPED: |error' "$WORK/out" || grep -v '^\s*$' "$WORK/out" | tail -n 1; } |
    cut -c1-160 | tr '\n|' ';/')
  if ((rc == 0)) && grep -qx PASS "$WORK/out" && ! grep -q '^SKIPPED: ' "$WORK/out"; then status=PASS notes=""
  elif ((rc == 124 || rc == 137)); then status=TIMEOUT
  else status=FAIL; fi
  [[ $status == PASS ]] || FAILURES+=("$name $status: ${notes:-exit $rc}")
  rep "| $name | $status | $secs | $notes |"
  ROWS+=("$(printf '%-34s %-5s %4s s  %s' "$name ($DEVICE/$BACKEND)" "$status" "$secs" "$notes")")
done
rep ""

# ---- NCCL's all-reduce at 4 ranks (emulated where they share a GPU): #wrong must be 0
# at every size of the sweep, 1 KiB to 256 MiB (19 sizes). No test covers this.
if ((!STAND_IN)) && [[ -z $ONLY ]]; then
  say "bench allreduce --backend=nccl --workers=4"
  timeout -k 5 "$(tmo 120)" bin/ringside bench allreduce --backend=nccl --workers=4 --timeout_s=60 >"$WORK/out" 2>&1
  rc=$?
  logblock "ringside bench allreduce --backend=nccl --workers=4 (exit $rc)" "$WORK/out"
  sed -n 's/^\[rank 0\] *//p' "$WORK/out" | awk '$1 ~ /^[0-9]+$/ && NF >= 6 {print $1, $6}' >"$WORK/rows"
  wrong=$(awk '$2 != "0" {printf "%s%s bytes: %s", s, $1, $2; s = ", "}' "$WORK/rows")
  sizes=$(wc -l <"$WORK/rows")
  status=PASS
  if ((rc != 0 || sizes != 19)) || [[ -n $wrong ]]; then
    status=FAIL; FAILURES+=("NCCL all-reduce, 4 ranks: exit $rc, $sizes of 19 sizes${wrong:+, wrong elements at $wrong}")
  fi
  rep "## NCCL all-reduce, 4 ranks"; rep ""
  rep "$status: \`bin/ringside bench allreduce --backend=nccl --workers=4\`: exit $rc, $sizes sizes, #wrong ${wrong:-0 at every size}"; rep ""
  ROWS+=("$(printf '%-34s %-5s exit %s, %s sizes, #wrong %s' "nccl all-reduce x4" "$status" "$rc" "$sizes" "${wrong:-0}")")
fi

# ---- The benchmarks (--bench), next to PyTorch.
if ((BENCH && !STAND_IN)); then
  # shellcheck source=scripts/gpu_bench.sh
  source "$HERE/gpu_bench.sh"
fi

# ---- Verdict.
if ((${#FAILURES[@]})); then
  VERDICT="FAIL: $(printf '%s; ' "${FAILURES[@]}" | sed 's/; $//')" RC=1
elif ((STAND_IN)); then
  VERDICT="PASS (STAND-IN: the CPU stood in for the GPU; nothing on the GPU path was verified)" RC=0
else
  VERDICT="PASS: every test passed on $(head -1 <<<"$SMI_L" | sed 's/ (UUID.*//')" RC=0
fi
rep "## Verdict"; rep ""; rep "$VERDICT (exit $RC; $((SECONDS - START)) s)"
echo "==== ringside GPU check: $(date -u '+%Y-%m-%d %H:%M UTC'), bundle ${COMMIT:-unknown}$( ((STAND_IN)) && echo ', STAND-IN')"
printf '%s\n' "${ROWS[@]}"
echo "---- $VERDICT"
echo "report: $REPORT; full log: $LOG; $((SECONDS - START)) s"
exit "$RC"
