# shellcheck shell=bash
# The GPU check's benchmarks (gpu_check.sh --bench; sourced by it after the tests, with
# its say/rep/logblock/tmo, FAILURES, ROWS and the bundle as the working folder): the
# step time of ringside next to PyTorch (same model, batch and precision: FP32, TF32 off),
# the faster precisions for the record, and DDP's step time against PyTorch DDP over
# NCCL. Not in the default check: one call of it stays within 5 minutes of GPU time
# (docs/gpu.md). BENCH_QUICK=1 (gpu_check.sh --quick): fewer steps, one ringside repeat.

# ---- 4. Benchmarks: ringside next to PyTorch, same model, batch and precision (FP32,
# TF32 off), same run.
BENCH_CASES=("mlp:784-4096-4096-4096-10 256" "mlp:784-4096-4096-4096-10 1024"
      "mlp:784-512-512-10 128" "cnn:lenet 64")
if ((${BENCH_QUICK:-0})); then
  R_ARGS=(--warmup=10 --steps=50 --repeats=1); T_ARGS=(--warmup=10 --steps=50)
else
  R_ARGS=(--warmup=20 --steps=200 --repeats=3); T_ARGS=(--warmup=20 --steps=200)
fi
kv() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -1; }
BENCH_ROWS=()
rep "## Step benchmarks (FP32, TF32 off)"
rep ""
{
  TPY=""
  TORCH_NOTE=""
  for c in $(command -v python3 2>/dev/null) /usr/bin/python3 /usr/local/bin/python3; do
    [[ -x $c ]] || continue
    info=$(LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout 120 "$c" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>/dev/null) || continue
    if [[ $info == *True ]]; then TPY=$c; TORCH_NOTE="$c: torch $info"; break; fi
    TORCH_NOTE="$c: torch $info (no CUDA)"
  done
  [[ -n $TORCH_NOTE ]] || TORCH_NOTE="no python3 with torch"
  [[ -z $TPY ]] && TORCH_NOTE="$TORCH_NOTE: torch column left empty"
  say "PyTorch: $TORCH_NOTE"
  rep "- ringside: \`bin/ringside bench step --device=cuda --precision=fp32 --model=M --batch=B ${R_ARGS[*]}\`"
  rep "- PyTorch: \`python3 torch_step_bench.py --device=cuda --precision=fp32 --model=M --batch=B ${T_ARGS[*]}\` ($TORCH_NOTE)"
  rep "- ratio = torch ms / ringside ms (>= 1: ringside at least as fast); TFLOP/s = the step's GEMM flops / median step time; sgemm = the cuBLAS SGEMM rate ringside measures"
  rep ""
  rep "| model | batch | ringside ms | torch ms | torch/ringside | ringside TFLOP/s | torch TFLOP/s | cuBLAS sgemm TFLOP/s | torch, one CUDA graph per step, ms |"
  rep "|---|---|---|---|---|---|---|---|---|"
  SGEMM=""
  for row in "${BENCH_CASES[@]}"; do
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
    if [[ -n $TPY ]]; then
      say "bench torch $m batch $b"
      LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout -k 5 "$(tmo 150)" "$TPY" torch_step_bench.py \
        --device=cuda --precision=fp32 --model="$m" --batch="$b" "${T_ARGS[@]}" >"$WORK/out" 2>&1
      rc=$?
      logblock "torch_step_bench.py --device=cuda --model=$m --batch=$b (exit $rc)" "$WORK/out"
      line=$(grep '^result:' "$WORK/out" | tail -1)
      t_ms=$(kv step_ms "$line") t_tf=$(kv tflops "$line")
      [[ -z $t_ms ]] && t_ms="FAIL"
      # For the record: the same step captured in one CUDA graph (what removing every
      # launch gap buys; not compared with ringside's eager step).
      say "bench torch (CUDA graph) $m batch $b"
      LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout -k 5 "$(tmo 150)" "$TPY" torch_step_bench.py \
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
    rep "ringside is slower than PyTorch on $SLOWER of ${#BENCH_CASES[@]} rows."
    FAILURES+=("ringside slower than PyTorch on $SLOWER of ${#BENCH_CASES[@]} benchmark rows")
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
}
rep ""
ROWS+=("---- step benchmarks, FP32 (ms = median step; ratio = torch/ringside, >= 1: ringside at least as fast)"
       "$(printf '%-26s %5s %10s %10s %7s %9s %9s %9s %9s' model batch ringside torch ratio r_TFLOPs t_TFLOPs sgemm t_graph)"
       "${BENCH_ROWS[@]}")

# ---- 4c. DDP step time against PyTorch DDP (issue #20's bar: at least as fast): both
# over NCCL on this machine's GPU(s), 2 ranks, mlp:784-4096-4096-4096-10 at batch 256 per
# rank, FP32, same run. ringside: the median step_ms of rank 0's records after the first
# 10% of steps; PyTorch: torch_ddp_bench.py --spawn 2 (mp.spawn, data made on the GPU,
# each step timed between device synchronisations), rank 0's median after as many
# warm-up steps. On one GPU both sides are emulated alike (one NCCL_HOSTID per rank).
{
  if ((${BENCH_QUICK:-0})); then D_STEPS=40; else D_STEPS=100; fi
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
  if [[ -z $TPY ]]; then
    FAILURES+=("ddp step time: no PyTorch with CUDA to compare with ($TORCH_NOTE)")
    t_ms=missing
  else
    say "ddp step time: torch"
    LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH timeout -k 5 "$(tmo 240)" "$TPY" torch_ddp_bench.py \
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
  ROWS+=("---- DDP step time against PyTorch DDP (NCCL; ratio >= 1: ringside at least as fast)")
  ROWS+=("$(printf 'mlp:%s batch 256 x 2 ranks: ringside %s ms (%s), torch %s ms (%s), torch/ringside %s' \
    "$D_MODEL" "$r_ms" "$r_label" "${t_ms:--}" "$t_label" "${ratio:--}")")
}
