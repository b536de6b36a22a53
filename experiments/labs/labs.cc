#include "experiments/labs/labs.h"

namespace ringside {

absl::Span<const Lab> Labs() {
  static const Lab kLabs[] = {
      {1, "ddp-equals-accumulation", "DDP is gradient accumulation, spread over ranks",
       "Does DDP on N ranks train exactly like one process accumulating gradients over N "
       "micro-batches?",
       "the parameters after 12 steps agree to 1e-5 (relative)", CheckDdpEqualsAccumulation},
      {2, "dp-vs-ddp", "DataParallel vs DistributedDataParallel",
       "Why did DDP replace DataParallel, and where does DP's step time go?",
       "DP's serial part (replicate, scatter, reduce to the master, one update) is a visible "
       "share of its step, and the interpreter-lock emulation serialises the replicas (parallel "
       "apply keeps at most one core busy)",
       CheckDpVsDdp},
      {3, "master-bottleneck", "The parameter server's master bottleneck",
       "How many bytes go through the master per step, and how do shards relieve it?",
       "the busiest shard moves about S times less with S shards", CheckMasterBottleneck},
      {4, "bucket-size", "Gradient bucket size",
       "What does DDP's bucket cap change?",
       "smaller buckets mean more all-reduce calls, and the first one starts earlier in "
       "backward (by half of backward or more), which shortens the step by at least a quarter "
       "of that head start",
       CheckBucketSize},
      {5, "overlap", "Overlapping communication with backward",
       "What does overlapping the all-reduce with backward buy?",
       "with overlap the first bucket's all-reduce starts before backward ends (by half of "
       "backward or more); without, only after it; at least a quarter of that head start "
       "comes back as a shorter step",
       CheckOverlap},
      {6, "staleness", "Stale updates: BSP, SSP and ASP",
       "How stale do parameters get under SSP and ASP, and what does it do to accuracy?",
       "the fast workers' lead over a slow one stays at 1 under BSP, reaches SSP:4's bound "
       "and stays within it, and goes past it under ASP; accuracy is printed for each",
       CheckStaleness},
      {7, "slow-node", "One slow node under BSP, SSP and DDP",
       "What does one slow node do to DDP and to a parameter server in BSP and SSP?",
       "DDP and BSP slow down (by 30% or more) to the slow node's pace, and their records "
       "name it as the rank everyone waited for",
       CheckSlowNode},
      {8, "ps-designs", "Parameter-server designs: whole tensors, balanced slices, summation servers",
       "Why did distributed TensorFlow's PS fall behind the ring on VGG-16, and how do BytePS's "
       "summation servers beat the ring?",
       "whole tensors dealt round-robin put 70% or more of the servers' bytes on one server and slow "
       "the step by 1.5x or more against balanced slices; summation servers at k = 4 communicate at most "
       "1/1.1 of the ring's time per step (k = 0 and k = 2, with a summer in each worker, are reported)",
       CheckPsDesigns},
      {9, "compression", "Gradient compression: when half the bytes pays",
       "When does sending gradients as fp16 make DDP faster, and when does it not?",
       "on links half the cluster's (communication several times the compute) fp16 shortens the "
       "step by a fifth or more; on links 25x the cluster's by less than a tenth",
       CheckCompression},
  };
  return kLabs;
}

const Lab* FindLab(int number) {
  for (const Lab& lab : Labs()) {
    if (lab.number == number) return &lab;
  }
  return nullptr;
}

}  // namespace ringside
