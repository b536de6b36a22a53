#include "ddp_ring/liveness.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace ringside {
namespace {

std::string CheckInKey(int rank) { return absl::StrCat("alive_after_failure/", rank); }

}  // namespace

RankRecords ReadRankRecords(Store* store, int rank, int world_size,
                            absl::FunctionRef<std::string(int r)> key) {
  RankRecords records;
  records.values.resize(world_size);
  for (int r = 0; r < world_size; ++r) {
    if (r == rank) continue;
    absl::StatusOr<std::string> value = store->Get(key(r), absl::ZeroDuration());
    if (absl::IsDeadlineExceeded(value.status()) || absl::IsNotFound(value.status())) continue;
    if (!value.ok()) {
      records.store_ok = false;
      return records;
    }
    records.values[r] = *std::move(value);
  }
  return records;
}

std::string JoinRanks(const std::vector<int>& ranks) { return absl::StrJoin(ranks, ", "); }

CheckIn CheckInAfterFailure(Store* store, int rank, int world_size, absl::Duration window) {
  CheckIn result;
  if (!store->Set(CheckInKey(rank), "1").ok()) {
    result.store_unreachable = true;
    return result;
  }
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(CheckInKey(r));
  const absl::Status waited = store->Wait(keys, window);
  if (waited.ok()) return result;
  if (!absl::IsDeadlineExceeded(waited)) {
    result.store_unreachable = true;
    return result;
  }
  const RankRecords records = ReadRankRecords(store, rank, world_size, CheckInKey);
  if (!records.store_ok) {
    result.store_unreachable = true;
    return result;
  }
  for (int r = 0; r < world_size; ++r) {
    if (r != rank && !records.values[r].has_value()) result.missing.push_back(r);
  }
  return result;
}

}  // namespace ringside
