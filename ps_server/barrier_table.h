// The barriers of one shard (ps.proto's BarrierRequest: "end", "eval/N",
// "checkpoint/N"): per worker, the number of its next barrier; per open barrier, who
// arrived with which values and who has yet to read the result. The sums are added in
// worker-id order, so every worker gets the same doubles whatever the order of
// arrival. Waiting, timeouts and blame are the Shard's: the table only keeps the state.
//
// Elastic PS: a worker that registered again numbers its barriers from 0; the job's
// number of its first is the count of barriers begun at or before its rejoin step
// (the others pass those before pushing that step, so all are known by then).
//
// Thread-safety: not thread-safe; the Shard's mu_ guards it.
#ifndef RINGSIDE_PS_SERVER_BARRIER_TABLE_H_
#define RINGSIDE_PS_SERVER_BARRIER_TABLE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace ringside {

class BarrierTable {
 public:
  explicit BarrierTable(int num_workers);

  // Worker w enters barrier `name` with `values`, having pushed `position` steps;
  // `join_step`: the step it rejoined at (elastic PS). Returns the key of the barrier
  // it waits at. InvalidArgument for a name outside the protocol or a count of values
  // other than the first arrival's; FailedPrecondition for a number that is not w's
  // next or a second entry. A refused entry changes nothing.
  absl::StatusOr<std::string> Enter(int w, const std::string& name,
                                    const std::vector<double>& values, int64_t position,
                                    int64_t join_step);
  // Whether worker w takes part in a barrier begun at `position` (steps pushed by the
  // worker that began it).
  using TakesPart = absl::FunctionRef<bool(int w, int64_t position)>;
  // The workers that take part in barrier `key` (entered) and have not arrived.
  std::vector<int> Missing(const std::string& key, TakesPart takes_part) const;
  // A worker that arrived leaves barrier `key`, once nobody is missing: the element-wise
  // sums of the arrived workers' values, added in worker-id order (computed at the
  // first Leave). The barrier is forgotten when every worker that arrived has left.
  std::vector<double> Leave(const std::string& key);
  // Worker w registered again: its next barrier is number 0 of its own count.
  void Restart(int w);
  // Barriers entered and not yet left by everybody (for tests).
  size_t open() const { return barriers_.size(); }

 private:
  struct Barrier {
    std::vector<bool> arrived;
    std::vector<std::vector<double>> values;  // Per worker, summed in id order at the end.
    std::vector<double> sums;                 // Once everybody arrived.
    int first = 0;                            // Whose values fixed the count.
    int64_t position = 0;  // Steps pushed by who began it (elastic: who takes part).
    bool done = false;     // Everybody who takes part arrived; sums computed.
    int left = 0;          // Workers that have not yet read the result.
  };

  const int num_workers_;
  std::vector<int64_t> passed_;  // Per worker: barriers passed (its own count).
  // Per worker: the job's number of its barrier 0 (-1: found at its first barrier).
  std::vector<int64_t> base_;
  std::vector<int64_t> positions_;  // [g]: the steps pushed when barrier g began.
  std::map<std::string, Barrier> barriers_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_BARRIER_TABLE_H_
