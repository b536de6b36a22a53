// The workers of a parameter-server job as one shard sees them: who registered and the
// session each registration drew, the address each called from, how far each has
// pushed (its clock), who said goodbye, and, on an elastic shard (--ps_min_workers),
// who was lost, who registered again and is about to rejoin, and the step from which a
// rejoined worker counts. It decides; the Shard acts on the decisions (the chunks, the
// barriers, the abort).
//
// Thread-safety: not thread-safe; the Shard's mu_ guards it.
#ifndef RINGSIDE_PS_SERVER_MEMBERSHIP_H_
#define RINGSIDE_PS_SERVER_MEMBERSHIP_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringside {

// Elastic PS, the first step from which a worker's pushes count: a worker there from
// the start counts in every step; a lost (or not yet rejoined) worker in none.
inline constexpr int64_t kFromStart = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

class Membership {
 public:
  // Workers 0..num_workers-1; `elastic`: lost workers are dropped rather than the job
  // aborted, and may register again.
  Membership(int num_workers, bool elastic);

  int num_workers() const { return num_workers_; }
  bool elastic() const { return elastic_; }

  // ---- Registration and sessions. ----
  // Registers worker w (in range; the caller checked it) and draws its session:
  // AlreadyExists, changing nothing, for a worker registered already, unless it was
  // lost (elastic) and registers again: then it is joining (see RejoinOf) and the
  // result is true.
  absl::StatusOr<bool> Register(int w);
  uint64_t session(int w) const { return sessions_[w]; }
  bool registered(int w) const { return registered_[w]; }
  bool any_registered() const { return any_registered_; }
  // InvalidArgument for an id outside [0, num_workers); FailedPrecondition if that
  // worker has not registered.
  absl::Status CheckWorker(int w) const;
  // CheckWorker, then PermissionDenied unless `session` is w's; FailedPrecondition once
  // w said goodbye or was dropped (and has not registered again).
  absl::Status CheckSession(int w, uint64_t session) const;
  // Liveness: the address w called from, named by WhereAre.
  void NotePeer(int w, const std::string& address) { peers_[w] = address; }
  // " (worker 1 at ipv4:..., ...)" for those of `workers` with a known address; "".
  std::string WhereAre(const std::vector<int>& workers) const;

  // ---- Progress. ----
  // The shard was initialised at `step`: every worker's clock starts there.
  void StartAt(int64_t step);
  // Whether w may push `step` now: FailedPrecondition for a lost worker or a step that
  // is not its current one (every mode: a worker pushes its steps in order, each
  // completely).
  absl::Status CheckPush(int w, int64_t step) const;
  // One chunk of w's push of `step` arrived; true when it completed the push (all
  // `num_chunks`): w's clock moves to step + 1.
  bool ChunkPushed(int w, int64_t step, int64_t num_chunks);
  // clocks()[w]: steps worker w has pushed completely to the shard.
  const std::vector<int64_t>& clocks() const { return clocks_; }
  int64_t MinClock() const;
  // Worker w says goodbye after its last step: FailedPrecondition (changing nothing)
  // twice or in the middle of pushing a step.
  absl::Status Goodbye(int w);
  // Every worker said goodbye or was lost (false before any registration).
  bool AllGone() const;

  // ---- Elastic PS. ----
  const std::vector<bool>& lost() const { return lost_; }
  int live() const;
  // FailedPrecondition for a lost worker (that pull cannot be served).
  absl::Status CheckPull(int w) const;
  // The first step worker w runs: the shard's `start`, or its rejoin step.
  int64_t StartOf(int w, int64_t start) const;
  // Of `workers`, those to drop now: in range, of session `session` (0: any) and not
  // lost yet. A joining worker among them stops joining instead (it did not count).
  std::vector<int> ToDrop(const std::vector<int>& workers, uint64_t session);
  // The workers lost once `dropped` are, ascending.
  std::vector<int> LostWith(const std::vector<int>& dropped) const;
  void MarkLost(const std::vector<int>& dropped);
  // What a pull of `step`'s parameters by w does to its membership: nothing; it
  // rejoins (it registered again); or it moves (it rejoined at an earlier step, has
  // pushed nothing since, and another shard was past that step).
  enum class Rejoin { kNone, kJoin, kMove };
  Rejoin RejoinOf(int w, int64_t step) const;
  // w rejoined at `step`: it counts from there, its clock too.
  void Rejoined(int w, int64_t step);
  // The workers step `step` waits for: those not lost that count in it.
  int CountingIn(int64_t step) const;
  // Whether w takes part in a barrier begun at `position` (steps pushed): not lost,
  // and rejoined before it (if at all).
  bool TakesPart(int w, int64_t position) const;
  int64_t join_step(int w) const { return join_step_[w]; }

 private:
  const int num_workers_;
  const bool elastic_;
  bool any_registered_ = false;
  std::vector<bool> registered_;
  std::vector<uint64_t> sessions_;  // Drawn at Register; 0 before.
  std::map<int, std::string> peers_;
  std::vector<int64_t> clocks_;
  std::vector<int64_t> pushed_in_step_;  // Chunks of step clocks_[w] pushed.
  std::vector<bool> goodbye_;
  // Elastic PS, per worker: dropped and not (yet) back; registered again and waiting
  // for its first PARAMS pull; the step from which it counts (kFromStart for those
  // there from the start).
  std::vector<bool> lost_;
  std::vector<bool> joining_;
  std::vector<int64_t> join_step_;
};

}  // namespace ringside

#endif  // RINGSIDE_PS_SERVER_MEMBERSHIP_H_
