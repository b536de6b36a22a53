#include "ps_server/barrier_table.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringside {
namespace {

// Whether `name` is worker w's next barrier (ps.proto's BarrierRequest): "end", or
// "<eval|checkpoint>/<passed>". InvalidArgument for a name outside the protocol,
// FailedPrecondition for another number.
absl::Status CheckBarrierName(int w, const std::string& name, int64_t passed) {
  if (name == "end") return absl::OkStatus();
  const size_t slash = name.find('/');
  int64_t number = -1;
  const std::string kind = name.substr(0, slash);
  if (slash == std::string::npos || (kind != "eval" && kind != "checkpoint") ||
      !absl::SimpleAtoi(name.substr(slash + 1), &number) || number < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", w, ": '", name, "' is not a barrier of the protocol (end, eval/N, checkpoint/N)"));
  }
  if (number != passed) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", w, " entered barrier '", name,
                                                      "', its next barrier is number ", passed));
  }
  return absl::OkStatus();
}

}  // namespace

BarrierTable::BarrierTable(int num_workers)
    : num_workers_(num_workers), passed_(num_workers, 0), base_(num_workers, 0) {}

absl::StatusOr<std::string> BarrierTable::Enter(int w, const std::string& name,
                                                const std::vector<double>& values,
                                                int64_t position, int64_t join_step) {
  if (absl::Status s = CheckBarrierName(w, name, passed_[w]); !s.ok()) return s;
  std::string key = name;
  int64_t number = -1;
  if (name != "end") {
    if (base_[w] < 0) {
      base_[w] = std::count_if(positions_.begin(), positions_.end(),
                               [join_step](int64_t p) { return p <= join_step; });
    }
    number = passed_[w] + base_[w];
    key = absl::StrCat(name.substr(0, name.find('/') + 1), number);
  }
  auto found = barriers_.find(key);
  if (found != barriers_.end()) {
    const Barrier& b = found->second;
    if (b.arrived[w]) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", w, " entered barrier '", name, "' twice"));
    }
    if (values.size() != b.values[b.first].size()) {
      return absl::InvalidArgumentError(absl::StrCat("barrier '", name, "': worker ", w, " sent ",
                                                     values.size(), " values, others ",
                                                     b.values[b.first].size()));
    }
  }
  Barrier& b = barriers_[key];
  if (b.arrived.empty()) {
    b.arrived.assign(num_workers_, false);
    b.values.resize(num_workers_);
    b.first = w;
    b.left = num_workers_;
    b.position = position;
    if (number == static_cast<int64_t>(positions_.size())) positions_.push_back(b.position);
  }
  b.arrived[w] = true;
  b.values[w] = values;
  ++passed_[w];
  return key;
}

std::vector<int> BarrierTable::Missing(const std::string& key, TakesPart takes_part) const {
  const Barrier& b = barriers_.at(key);
  std::vector<int> missing;
  for (int w = 0; w < num_workers_; ++w) {
    if (!b.arrived[w] && takes_part(w, b.position)) missing.push_back(w);
  }
  return missing;
}

std::vector<double> BarrierTable::Leave(const std::string& key) {
  Barrier& b = barriers_.at(key);
  if (!b.done) {
    b.done = true;
    // Each worker that arrived reads the result once (all of them, unless elastic).
    b.left = static_cast<int>(std::count(b.arrived.begin(), b.arrived.end(), true));
    const size_t count = b.values[b.first].size();
    if (count > 0) {
      // In worker-id order: the same sums whatever the order of arrival.
      b.sums.assign(count, 0.0);
      for (int w = 0; w < num_workers_; ++w) {
        if (!b.arrived[w]) continue;
        for (size_t i = 0; i < count; ++i) b.sums[i] += b.values[w][i];
      }
    }
  }
  std::vector<double> sums = b.sums;
  if (--b.left == 0) barriers_.erase(key);
  return sums;
}

void BarrierTable::Restart(int w) {
  passed_[w] = 0;
  base_[w] = -1;
}

}  // namespace ringside
