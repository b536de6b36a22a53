// What a training job runs, checked once for every strategy: the RunConfig's
// validation, the options every job takes besides it, the SGD settings it names, and
// the "same configuration on every rank" comparison that names the differing field
// (DDP ranks compare through the store, PS shards at registration).
#ifndef RINGSIDE_COMMON_RUN_CONFIG_H_
#define RINGSIDE_COMMON_RUN_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/ops.h"
#include "common/ringside.pb.h"

namespace ringside {

// How long a process of a distributed job waits on its peers (rendezvous, a
// collective, the slowest worker) before the job fails.
inline constexpr absl::Duration kDefaultPeerTimeout = absl::Seconds(60);
// Samples per forward pass when evaluating.
inline constexpr int kDefaultEvalBatch = 1000;

// What every strategy's job takes besides its strategy-specific options.
struct RunOptions {
  RunConfig config;               // model, dataset, epochs, batch, SGD, seed, ...
  std::string out_dir;            // metrics.jsonl, trace.json, checkpoint.bin; empty: none.
  bool resume = false;            // Continue from out_dir/checkpoint.bin.
  int64_t checkpoint_every = 0;   // Also checkpoint every N steps (0: epoch ends only).
  int eval_batch = kDefaultEvalBatch;
};

// The checks every strategy runs before anything is loaded or started. One
// InvalidArgument line naming the flag: "--batch must be >= 1, got 0". Checks batch,
// epochs, steps, lr, grad_accum and threads (Sgd::Create checks the other SGD
// settings; each strategy checks its own fields).
absl::Status ValidateRunConfig(const RunConfig& config);

// SGD hyper-parameters of `config` (lr, momentum, weight_decay, nesterov).
SgdHyper SgdHyperFor(const RunConfig& config);

// Field-by-field comparison, "" when equal; otherwise one line naming every
// difference: "modified: lr: 0.02 -> 0.5; added: ...".
std::string ConfigDifference(const RunConfig& reference, const RunConfig& other);

// FailedPrecondition "<other_name> runs a different configuration than
// <reference_name>: modified: lr: 0.02 -> 0.5" when the two differ; OK otherwise.
absl::Status CheckSameConfig(const RunConfig& reference, absl::string_view reference_name,
                             const RunConfig& other, absl::string_view other_name);

}  // namespace ringside

#endif  // RINGSIDE_COMMON_RUN_CONFIG_H_
