// `ringside launch [--nproc_per_node ...] -- PROGRAM ARGS...`: torchrun-style.
#include "absl/flags/flag.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/launch/launcher.h"

namespace ringside {

absl::Status RunLaunchVerb(const CommandArgs& args) {
  LaunchOptions lo;
  lo.nproc_per_node = absl::GetFlag(FLAGS_nproc_per_node);
  lo.nnodes = absl::GetFlag(FLAGS_nnodes);
  lo.node_rank = absl::GetFlag(FLAGS_node_rank);
  lo.master_addr = absl::GetFlag(FLAGS_master_addr);
  lo.master_port = absl::GetFlag(FLAGS_master_port);
  lo.command = args.positional;
  return Launch(lo);
}

}  // namespace ringside
