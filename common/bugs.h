// The teaching bug switches (`train --bug=NAME,...`, RunConfig.bugs), named once: the
// sharder, the trainer and the DDP worker act on them, run_config validates them.
// docs/tutorial.md, section 11, shows what each does.
#ifndef RINGSIDE_COMMON_BUGS_H_
#define RINGSIDE_COMMON_BUGS_H_

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ringside {

inline constexpr char kBugNoSetEpoch[] = "no_set_epoch";    // The sampler's epoch is never set.
inline constexpr char kBugNoBroadcast[] = "no_broadcast";   // DDP skips its initial broadcast.
inline constexpr char kBugRankSeeds[] = "rank_seeds";       // Each rank shuffles with its own seed.
inline constexpr char kBugUnevenShards[] = "uneven_shards"; // The sampler does not pad.

struct BugSwitch {
  const char* name;
  bool ddp_only;  // Needs --strategy=ddp (the others act on the sharder every strategy uses).
};
inline constexpr BugSwitch kBugSwitches[] = {{kBugNoSetEpoch, false},
                                             {kBugNoBroadcast, true},
                                             {kBugRankSeeds, true},
                                             {kBugUnevenShards, true}};

// True when the comma-separated `bug_list` names `bug`.
inline bool BugListHas(absl::string_view bug_list, absl::string_view bug) {
  for (absl::string_view name : absl::StrSplit(bug_list, ',')) {
    if (name == bug) return true;
  }
  return false;
}

}  // namespace ringside

#endif  // RINGSIDE_COMMON_BUGS_H_
