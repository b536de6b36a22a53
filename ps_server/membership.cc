#include "ps_server/membership.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside {
namespace {

// A session number no other process can guess: 64 bits from the OS's entropy source
// (never 0, which means "absent" on the wire).
uint64_t NewSession() {
  std::random_device entropy;
  uint64_t session = 0;
  while (session == 0) {
    session = (static_cast<uint64_t>(entropy()) << 32) ^ static_cast<uint64_t>(entropy());
  }
  return session;
}

}  // namespace

Membership::Membership(int num_workers, bool elastic)
    : num_workers_(num_workers),
      elastic_(elastic),
      registered_(num_workers, false),
      sessions_(num_workers, 0),
      clocks_(num_workers, 0),
      pushed_in_step_(num_workers, 0),
      goodbye_(num_workers, false),
      lost_(num_workers, false),
      joining_(num_workers, false),
      join_step_(num_workers, kFromStart) {}

absl::StatusOr<bool> Membership::Register(int w) {
  // Elastic PS: a lost worker registers again (a new session); it counts again once
  // its first PARAMS pull makes it rejoin (RejoinOf).
  const bool rejoin = elastic_ && lost_[w] && !joining_[w];
  if (registered_[w] && !rejoin) {
    return absl::AlreadyExistsError(absl::StrCat("worker id ", w, " is registered already"));
  }
  any_registered_ = true;
  registered_[w] = true;
  sessions_[w] = NewSession();
  if (rejoin) {
    joining_[w] = true;
    goodbye_[w] = false;
  }
  return rejoin;
}

absl::Status Membership::CheckWorker(int w) const {
  if (w < 0 || w >= num_workers_) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown worker id ", w, " (workers are 0..", num_workers_ - 1, ")"));
  }
  if (!registered_[w]) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", w, " has not registered"));
  }
  return absl::OkStatus();
}

absl::Status Membership::CheckSession(int w, uint64_t session) const {
  if (absl::Status s = CheckWorker(w); !s.ok()) return s;
  // One 64-bit integer comparison (no early exit on a differing byte, so nothing to
  // time); a wrong guess is one refused call among 2^64.
  if (session != sessions_[w]) {
    return absl::PermissionDeniedError(
        absl::StrCat("call for worker ", w, " without its session (not the registered worker)"));
  }
  if (goodbye_[w]) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", w, " said goodbye already"));
  }
  if (lost_[w] && !joining_[w]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", w, " was dropped from the job (lost); start it again to rejoin"));
  }
  return absl::OkStatus();
}

std::string Membership::WhereAre(const std::vector<int>& workers) const {
  std::vector<std::string> known;
  for (int w : workers) {
    auto it = peers_.find(w);
    if (it != peers_.end()) known.push_back(absl::StrCat("worker ", w, " at ", it->second));
  }
  return known.empty() ? "" : absl::StrCat(" (", absl::StrJoin(known, ", "), ")");
}

void Membership::StartAt(int64_t step) { std::fill(clocks_.begin(), clocks_.end(), step); }

absl::Status Membership::CheckPush(int w, int64_t step) const {
  if (lost_[w]) {  // Elastic PS.
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", w, " was dropped from the job (lost); push refused"));
  }
  // Under BSP a worker cannot pull step t + 1, so cannot compute it, before finishing
  // step t; SSP and ASP keep the same order.
  if (step != clocks_[w]) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", w, " pushed step ", step,
                                                      ", its current step is ", clocks_[w]));
  }
  return absl::OkStatus();
}

bool Membership::ChunkPushed(int w, int64_t step, int64_t num_chunks) {
  if (++pushed_in_step_[w] != num_chunks) return false;
  pushed_in_step_[w] = 0;
  clocks_[w] = step + 1;
  return true;
}

int64_t Membership::MinClock() const { return *std::min_element(clocks_.begin(), clocks_.end()); }

absl::Status Membership::Goodbye(int w) {
  if (goodbye_[w]) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", w, " said goodbye twice"));
  }
  if (pushed_in_step_[w] != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", w, " said goodbye in the middle of pushing step ", clocks_[w]));
  }
  goodbye_[w] = true;
  return absl::OkStatus();
}

bool Membership::AllGone() const {
  int gone = 0;  // Said goodbye, or (elastic PS) lost.
  for (int w = 0; w < num_workers_; ++w) gone += goodbye_[w] || lost_[w];
  return any_registered_ && gone == num_workers_;
}

int Membership::live() const { return static_cast<int>(std::count(lost_.begin(), lost_.end(), false)); }

absl::Status Membership::CheckPull(int w) const {
  if (!lost_[w]) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "worker ", w, " was dropped from the job (lost)", joining_[w] ? " and has not rejoined" : ""));
}

int64_t Membership::StartOf(int w, int64_t start) const { return std::max(start, join_step_[w]); }

std::vector<int> Membership::ToDrop(const std::vector<int>& workers, uint64_t session) {
  std::vector<int> dropped;
  for (int w : workers) {
    if (w < 0 || w >= num_workers_) continue;
    if (session != 0 && any_registered_ && session != sessions_[w]) continue;  // Stale.
    if (joining_[w]) {
      // Registered again and lost before it rejoined: it did not count anyway.
      joining_[w] = false;
      continue;
    }
    if (lost_[w]) continue;  // Dropped already.
    dropped.push_back(w);
  }
  return dropped;
}

std::vector<int> Membership::LostWith(const std::vector<int>& dropped) const {
  std::vector<int> all = dropped;
  for (int w = 0; w < num_workers_; ++w) {
    if (lost_[w]) all.push_back(w);
  }
  std::sort(all.begin(), all.end());
  return all;
}

void Membership::MarkLost(const std::vector<int>& dropped) {
  for (int w : dropped) lost_[w] = true;
}

Membership::Rejoin Membership::RejoinOf(int w, int64_t step) const {
  if (!elastic_ || w < 0 || w >= num_workers_ || !any_registered_) return Rejoin::kNone;
  if (joining_[w]) return Rejoin::kJoin;
  // A rejoined worker that has pushed nothing since may move to a later step (another
  // shard was past the first one it tried).
  const bool moving = !lost_[w] && join_step_[w] != kFromStart && clocks_[w] == join_step_[w] &&
                      pushed_in_step_[w] == 0 && step > join_step_[w];
  return moving ? Rejoin::kMove : Rejoin::kNone;
}

void Membership::Rejoined(int w, int64_t step) {
  lost_[w] = false;
  joining_[w] = false;
  join_step_[w] = step;
  clocks_[w] = step;
  pushed_in_step_[w] = 0;
}

int Membership::CountingIn(int64_t step) const {
  int n = 0;
  for (int w = 0; w < num_workers_; ++w) {
    if (!lost_[w] && join_step_[w] <= step) ++n;
  }
  return n;
}

bool Membership::TakesPart(int w, int64_t position) const {
  return !lost_[w] && join_step_[w] < position;
}

}  // namespace ringside
