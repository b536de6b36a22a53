// The statistics of one shard: a record per step, opened by the step's first gradient
// and closed, written to the metrics file as one StepMetrics line (and traced as a
// "step" span with its "wait for workers"), once every worker the step waits for has
// pushed it whole and been served the next step's parameters; and the job's totals
// (ps::ShardStats) the closed records add up to.
//
// Thread-safety: not thread-safe; the Shard's mu_ guards it. TracePush only writes
// spans (TraceWriter is thread-safe) and needs no lock.
#ifndef RINGSIDE_PS_SERVER_STEP_RECORDS_H_
#define RINGSIDE_PS_SERVER_STEP_RECORDS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "common/metrics.h"
#include "common/trace.h"
#include "ps_server/ps.pb.h"

namespace ringside {

// The spans of worker `worker`'s push of chunk k of `step` on `trace` (not null):
// "aggregate" and "update", each when not empty.
void TracePush(TraceWriter* trace, int worker, int64_t step, int64_t k, int64_t wire_bytes,
               const TraceInterval& aggregate, const TraceInterval& update);

class StepRecords {
 public:
  // Records of shard `shard`; `metrics` and `trace` are borrowed and may be null.
  StepRecords(int shard, MetricsWriter* metrics, TraceWriter* trace);

  // Initialisation bytes received (counted in the totals only).
  void CountInit(int64_t wire_bytes);
  // A gradient chunk of `step` of `wire_bytes` was taken, with `queue_depth` streams
  // open; its aggregation and update spans (empty: not done).
  void CountPush(int64_t step, int64_t wire_bytes, int queue_depth,
                 const TraceInterval& aggregate, const TraceInterval& update);
  // Worker `worker`'s push of `step` is complete (the last one so far is the step's
  // late worker).
  void PushDone(int64_t step, int worker);
  // A served chunk of `wire_bytes` (totals only: start-up, rejoin, checkpoint pulls).
  void CountServedBytes(int64_t wire_bytes);
  // ... and one of step `step` + 1's parameters, served after `step`.
  void CountServed(int64_t step, int64_t wire_bytes);
  // Closes step `step`'s record (if open) once `expected` workers pushed it whole and
  // were served `expected` x `num_chunks` chunks of the next step.
  void MaybeFinish(int64_t step, int expected, int64_t num_chunks);
  // The steps whose records are open, ascending.
  std::vector<int64_t> OpenSteps() const;
  const ps::ShardStats& totals() const { return totals_; }

 private:
  struct StepRecord {
    int64_t start_us = 0;  // First gradient byte of the step arrived.
    int64_t bytes_in = 0;
    int64_t bytes_out = 0;
    int pushes_done = 0;        // Workers whose whole push of the step arrived.
    int64_t chunks_served = 0;  // Parameter chunks of step + 1 sent back.
    int64_t first_push_done_us = 0;
    int64_t last_push_done_us = 0;
    int late_worker = 0;  // Whose complete push came last (so far).
    double aggregate_ms = 0;
    double update_ms = 0;
    int queue_depth = 0;
  };
  // Statistics of step `step`; created on first use.
  StepRecord& Record(int64_t step);
  void TraceStep(int64_t step, const StepRecord& r) const;

  const int shard_;
  MetricsWriter* const metrics_;
  TraceWriter* const trace_;
  std::map<int64_t, StepRecord> records_;
  ps::ShardStats totals_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_STEP_RECORDS_H_
