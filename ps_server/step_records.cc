#include "ps_server/step_records.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringside {
namespace {

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

}  // namespace

void TracePush(TraceWriter* trace, int worker, int64_t step, int64_t k, int64_t wire_bytes,
               const TraceInterval& aggregate, const TraceInterval& update) {
  const TraceArgs args = {{"step", static_cast<double>(step)},
                          {"worker", static_cast<double>(worker)},
                          {"chunk", static_cast<double>(k)},
                          {"bytes", static_cast<double>(wire_bytes)}};
  // Chunks of one worker arrive on one stream at a time, but another worker's push may
  // complete (and update) a chunk meanwhile: lanes keep the spans apart.
  const std::string group = absl::StrCat("pushes of worker ", worker);
  for (const auto& [name, cat, span] :
       {std::make_tuple("aggregate", kCatCompute, aggregate),
        std::make_tuple("update", kCatUpdate, update)}) {
    if (span.end_us <= span.start_us) continue;
    trace->Span(name, cat, trace->Lane(group, span.start_us, span.end_us), span.start_us,
                span.end_us - span.start_us, args);
  }
}

StepRecords::StepRecords(int shard, MetricsWriter* metrics, TraceWriter* trace)
    : shard_(shard), metrics_(metrics), trace_(trace) {
  totals_.set_shard(shard);
}

StepRecords::StepRecord& StepRecords::Record(int64_t step) {
  auto [it, inserted] = records_.try_emplace(step);
  if (inserted) it->second.start_us = NowUs();
  return it->second;
}

void StepRecords::CountInit(int64_t wire_bytes) {
  totals_.set_bytes_in(totals_.bytes_in() + wire_bytes);
}

void StepRecords::CountPush(int64_t step, int64_t wire_bytes, int queue_depth,
                            const TraceInterval& aggregate, const TraceInterval& update) {
  StepRecord& r = Record(step);
  r.bytes_in += wire_bytes;
  r.queue_depth = std::max(r.queue_depth, queue_depth);
  r.aggregate_ms += (aggregate.end_us - aggregate.start_us) / 1e3;
  r.update_ms += (update.end_us - update.start_us) / 1e3;
}

void StepRecords::PushDone(int64_t step, int worker) {
  StepRecord& r = Record(step);
  const int64_t now = NowUs();
  if (r.pushes_done++ == 0) r.first_push_done_us = now;
  r.last_push_done_us = now;
  r.late_worker = worker;
}

void StepRecords::CountServedBytes(int64_t wire_bytes) {
  totals_.set_bytes_out(totals_.bytes_out() + wire_bytes);
}

void StepRecords::CountServed(int64_t step, int64_t wire_bytes) {
  StepRecord& r = Record(step);
  r.bytes_out += wire_bytes;
  ++r.chunks_served;
}

std::vector<int64_t> StepRecords::OpenSteps() const {
  std::vector<int64_t> open;
  for (const auto& [step, r] : records_) open.push_back(step);
  return open;
}

void StepRecords::MaybeFinish(int64_t step, int expected, int64_t num_chunks) {
  auto it = records_.find(step);
  if (it == records_.end()) return;
  const StepRecord& r = it->second;
  if (r.pushes_done < expected || r.chunks_served < expected * num_chunks) return;
  StepMetrics m;
  m.set_step(step);
  m.set_rank(shard_);
  m.set_role("server");
  m.set_start_us(r.start_us);
  m.set_step_ms((NowUs() - r.start_us) / 1e3);
  m.set_bytes_received(r.bytes_in);
  m.set_bytes_sent(r.bytes_out);
  m.set_wait_ms((r.last_push_done_us - r.first_push_done_us) / 1e3);
  m.set_late_worker(r.late_worker);
  m.set_aggregate_ms(r.aggregate_ms);
  m.set_update_ms(r.update_ms);
  m.set_queue_depth(r.queue_depth);
  m.set_live_workers(r.pushes_done);  // Elastic PS: the workers whose push counted.
  m.set_samples(0);
  totals_.set_steps_completed(totals_.steps_completed() + 1);
  totals_.set_bytes_in(totals_.bytes_in() + r.bytes_in);
  totals_.set_wait_ms(totals_.wait_ms() + m.wait_ms());
  totals_.set_aggregate_ms(totals_.aggregate_ms() + r.aggregate_ms);
  totals_.set_update_ms(totals_.update_ms() + r.update_ms);
  totals_.set_max_queue_depth(std::max(totals_.max_queue_depth(), r.queue_depth));
  *totals_.mutable_last_step() = m;
  if (trace_ != nullptr) TraceStep(step, r);
  records_.erase(it);
  if (metrics_ != nullptr) metrics_->Write(m).IgnoreError();
}

void StepRecords::TraceStep(int64_t step, const StepRecord& r) const {
  const int64_t now = NowUs();
  trace_->Span("step", kCatComm, trace_->Lane("steps", r.start_us, now), r.start_us,
               now - r.start_us,
               {{"step", static_cast<double>(step)},
                {"bytes_received", static_cast<double>(r.bytes_in)},
                {"bytes_sent", static_cast<double>(r.bytes_out)},
                {"bytes", static_cast<double>(r.bytes_in + r.bytes_out)},
                {"queue_depth", static_cast<double>(r.queue_depth)}});
  if (r.last_push_done_us > r.first_push_done_us) {
    trace_->Span("wait for workers", kCatWait,
                 trace_->Lane("wait for workers", r.first_push_done_us, r.last_push_done_us),
                 r.first_push_done_us, r.last_push_done_us - r.first_push_done_us,
                 {{"step", static_cast<double>(step)},
                  {"late_worker", static_cast<double>(r.late_worker)}});
  }
}

}  // namespace ringside
