#include "ddp_ring/local_ranks.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ddp_ring/gloo_process_group.h"
#include "ddp_ring/store.h"

namespace ringside {

absl::Status RunLocalGlooRanks(int world, const ProcessGroupOptions& options,
                               const std::function<absl::Status(ProcessGroup& group)>& body) {
  if (world < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ranks must be at least 1 (got ", world, ")"));
  }
  // One store per call: its keys cannot meet another call's groups.
  std::unique_ptr<Store> store = NewInMemoryStore();
  std::vector<absl::Status> results(world);
  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      ProcessGroupOptions mine = options;
      mine.rank = rank;
      mine.world_size = world;
      absl::StatusOr<std::unique_ptr<ProcessGroup>> group = NewGlooProcessGroup(store.get(), mine);
      results[rank] = group.ok() ? body(**group) : group.status();
      // The group is destroyed here, in its own thread: its final barrier waits for
      // the peers still running their bodies.
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < world; ++rank) {
    if (!results[rank].ok()) {
      return absl::Status(results[rank].code(),
                          absl::StrCat("rank ", rank, ": ", results[rank].message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace ringside
