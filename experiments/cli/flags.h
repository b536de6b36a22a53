// The command line's flags, defined once for every verb, and the one mapping from
// flags to a job's description (JobSpecFromFlags; its RunConfig is the configuration
// every process of a job must share). Which verb takes which flag is the command
// table's (commands.cc). The RunConfig flags default to DefaultRunConfig()
// (common/run_config.h), as unset fields of a spec do.
#ifndef RINGSIDE_EXPERIMENTS_CLI_FLAGS_H_
#define RINGSIDE_EXPERIMENTS_CLI_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/ringside.pb.h"
#include "common/run_config.h"
#include "experiments/cli/job_flags.h"

ABSL_DECLARE_FLAG(std::string, strategy);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, dataset);
ABSL_DECLARE_FLAG(int32_t, epochs);
ABSL_DECLARE_FLAG(int64_t, steps);
ABSL_DECLARE_FLAG(int32_t, batch);
ABSL_DECLARE_FLAG(double, lr);
ABSL_DECLARE_FLAG(double, momentum);
ABSL_DECLARE_FLAG(double, weight_decay);
ABSL_DECLARE_FLAG(bool, nesterov);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(int32_t, threads);
ABSL_DECLARE_FLAG(std::string, device);
ABSL_DECLARE_FLAG(std::string, precision);
ABSL_DECLARE_FLAG(bool, drop_last);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(bool, resume);
ABSL_DECLARE_FLAG(int64_t, checkpoint_every);
ABSL_DECLARE_FLAG(int32_t, eval_batch);
ABSL_DECLARE_FLAG(int32_t, grad_accum);
ABSL_DECLARE_FLAG(bool, prefetch);
ABSL_DECLARE_FLAG(int32_t, workers);
ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(double, bucket_cap_mb);
ABSL_DECLARE_FLAG(double, first_bucket_mb);
ABSL_DECLARE_FLAG(bool, overlap);
ABSL_DECLARE_FLAG(std::string, compress);
ABSL_DECLARE_FLAG(std::string, allreduce);
ABSL_DECLARE_FLAG(int32_t, timeout_s);
ABSL_DECLARE_FLAG(std::string, network);
ABSL_DECLARE_FLAG(std::string, cluster);
ABSL_DECLARE_FLAG(std::string, node_cpus);
ABSL_DECLARE_FLAG(int32_t, ranks_per_node);
ABSL_DECLARE_FLAG(std::string, slow_node);
ABSL_DECLARE_FLAG(int32_t, ps_shards);
ABSL_DECLARE_FLAG(std::string, ps_sync);
ABSL_DECLARE_FLAG(std::string, ps_transport);
ABSL_DECLARE_FLAG(std::string, ps_placement);
ABSL_DECLARE_FLAG(std::string, ps_mode);
ABSL_DECLARE_FLAG(bool, ps_colocated);
ABSL_DECLARE_FLAG(bool, ps_worker_summers);
ABSL_DECLARE_FLAG(int32_t, ps_chunk_kb);
ABSL_DECLARE_FLAG(std::string, ps_servers);
ABSL_DECLARE_FLAG(int32_t, worker_id);
ABSL_DECLARE_FLAG(int32_t, shard);
ABSL_DECLARE_FLAG(std::string, listen);
ABSL_DECLARE_FLAG(int32_t, warmup);
ABSL_DECLARE_FLAG(int32_t, gap_us);
ABSL_DECLARE_FLAG(std::string, calibration);
ABSL_DECLARE_FLAG(int32_t, calibration_repeats);
ABSL_DECLARE_FLAG(std::string, links);
ABSL_DECLARE_FLAG(int32_t, max_workers);
ABSL_DECLARE_FLAG(double, model_mb);
ABSL_DECLARE_FLAG(std::string, simulate_model);
ABSL_DECLARE_FLAG(int32_t, simulate_batch);
ABSL_DECLARE_FLAG(std::string, simulate_workers);
ABSL_DECLARE_FLAG(std::string, simulate_shards);
ABSL_DECLARE_FLAG(bool, colocated);
ABSL_DECLARE_FLAG(double, step_ms);
ABSL_DECLARE_FLAG(std::string, layers_mb);
ABSL_DECLARE_FLAG(absl::Duration, link_latency);
ABSL_DECLARE_FLAG(double, bucket_mb);
ABSL_DECLARE_FLAG(bool, wire_only);
ABSL_DECLARE_FLAG(std::string, simulate_node_cpus);
ABSL_DECLARE_FLAG(std::string, simulate_slow_node);
ABSL_DECLARE_FLAG(std::string, spec);
ABSL_DECLARE_FLAG(std::string, sizes_mb);
ABSL_DECLARE_FLAG(int64_t, size_bytes);
ABSL_DECLARE_FLAG(std::string, pin_cpus);
ABSL_DECLARE_FLAG(int, pin_cpu);
ABSL_DECLARE_FLAG(int32_t, repeats);
ABSL_DECLARE_FLAG(int32_t, ranks);
ABSL_DECLARE_FLAG(int64_t, elements);
ABSL_DECLARE_FLAG(int32_t, root);
ABSL_DECLARE_FLAG(int32_t, shards);
ABSL_DECLARE_FLAG(std::string, frames);
ABSL_DECLARE_FLAG(bool, dp_interpreter_lock);
ABSL_DECLARE_FLAG(std::string, bug);
// Security (docs/security.md).
ABSL_DECLARE_FLAG(std::string, token_file);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_ca);
// Checkpoints (issue 23).
ABSL_DECLARE_FLAG(int32_t, keep_checkpoints);

namespace ringside {

// Every flag a job description reads (job_flags.h), as the command line set it (or
// its default): the one place that reads them.
JobFlags ReadJobFlags();

// The job the command line describes for `verb`, parsed and checked once:
// ParseJobSpec(ReadJobFlags(), verb, !InLaunchedJob()) (job_flags.h). What `train`,
// `ps-server` and `ps-worker` call first; usage errors (exit 2) name the flag.
absl::StatusOr<JobSpec> JobSpecFromFlags(JobVerb verb);

// The RunConfig a valid `train` command line describes (strategy-specific fields only
// for its strategy, so that ranks compare what matters to them); an empty one when
// the flags are not valid.
RunConfig RunConfigFromFlags();

// --node_cpus (`node_cpus`) for a verb that runs no job of nodes (calibrate): 0 when
// unset or "none", else the CPUs given. "auto" (nothing to divide the machine by) and
// bad values are InvalidArgument naming `verb`, one line.
absl::StatusOr<double> NodeCpusWithoutNodes(const char* verb, const std::string& node_cpus);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLI_FLAGS_H_
