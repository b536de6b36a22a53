// `ringside launch [FLAGS] -- PROGRAM ARGS...`: torchrun-style, with torchrun's flag
// spellings. Several launchers form one job when they name the same rendezvous
// (--rdzv_endpoint or --master_addr/--master_port, and the run id).
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/rpc_security.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/launch/job_spec.h"
#include "experiments/launch/launcher.h"
#include "experiments/launch/network_placement.h"
#include "experiments/launch/node_plan.h"
#include "experiments/sys/sys.h"

ABSL_FLAG(int32_t, nproc_per_node, 1, "launch: processes on this node");
ABSL_FLAG(std::string, nnodes, "1", "launch: nodes in the job, N (or MIN:MAX with MIN == MAX)");
ABSL_FLAG(int32_t, node_rank, 0, "launch: this node's index in [0, --nnodes)");
ABSL_FLAG(std::string, master_addr, ringside::LaunchOptions().master_addr,
          "launch: address of rank 0 (hosts the store)");
ABSL_FLAG(int32_t, master_port, ringside::LaunchOptions().master_port,
          "launch: port of rank 0's store (0: pick a free one)");
ABSL_FLAG(bool, standalone, false,
          "launch: a single-node job on 127.0.0.1, a free port and a new run id (as torchrun)");
ABSL_FLAG(std::string, rdzv_backend, "static",
          "launch: static or c10d; either way rank 0 hosts the store at the endpoint");
ABSL_FLAG(std::string, rdzv_endpoint, "",
          "launch: HOST[:PORT] of the rendezvous (port 29400 if left out); sets the master "
          "address and port instead of --master_addr/--master_port");
ABSL_FLAG(std::string, rdzv_id, "",
          "launch: the job's run id, the same on every node (default: RINGSIDE_RUN_ID or "
          "TORCHELASTIC_RUN_ID if set, else derived from the rendezvous endpoint)");
ABSL_FLAG(int32_t, max_restarts, 0,
          "launch: restart the group (on every node) this many times after a rank fails; "
          "the program resumes with its own --resume");

namespace ringside {
namespace {

constexpr int kDefaultRdzvPort = 29400;  // torchrun's, for an endpoint without a port.

// "N" or "MIN:MAX" (MIN == MAX): the node count.
absl::StatusOr<int> ParseNnodes(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  int min = 0, max = 0;
  if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &min) ||
      !absl::SimpleAtoi(parts.back(), &max) || min < 1 || max < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes must be N or MIN:MAX with N, MIN, MAX >= 1, got '", text, "'"));
  }
  if (min != max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes=", text, ": elastic node counts are not supported; give a fixed count (N or N:N)"));
  }
  return min;
}

// "HOST[:PORT]" (an IPv6 host in brackets) -> master address and port.
absl::Status ParseEndpoint(const std::string& endpoint, LaunchOptions* lo) {
  std::string host = endpoint, port_text;
  const size_t colon = endpoint.rfind(':');
  const size_t bracket = endpoint.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host = endpoint.substr(0, colon);
    port_text = endpoint.substr(colon + 1);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = kDefaultRdzvPort;
  if (host.empty() || (!port_text.empty() && (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv_endpoint must be HOST or HOST:PORT, got '", endpoint, "'"));
  }
  lo->master_addr = host;
  lo->master_port = port;
  return absl::OkStatus();
}

// The rendezvous flags, as given.
struct RendezvousFlags {
  std::string backend;   // --rdzv_backend
  std::string endpoint;  // --rdzv_endpoint
  std::string run_id;    // --rdzv_id
  bool standalone = false;
};

// The rendezvous flags -> where rank 0 hosts the store and the job's run id. `lo`
// holds --master_addr/--master_port and --nnodes.
absl::Status ApplyRendezvous(const RendezvousFlags& r, LaunchOptions* lo) {
  const std::string& backend = r.backend;
  if (backend != "static" && backend != "c10d") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv_backend=", backend, " is not supported by ringside launch (static or c10d)"));
  }
  const std::string& endpoint = r.endpoint;
  const LaunchOptions defaults;
  const bool master_given = lo->master_addr != defaults.master_addr || lo->master_port != defaults.master_port;
  lo->run_id = r.run_id;
  if (r.standalone) {
    if (!endpoint.empty() || master_given || lo->nnodes != 1) {
      return absl::InvalidArgumentError(
          "--standalone picks its own endpoint on one node: drop --rdzv_endpoint, "
          "--master_addr, --master_port and --nnodes");
    }
    lo->master_addr = "127.0.0.1";
    lo->master_port = 0;  // A free one.
    if (lo->run_id.empty()) lo->run_id = absl::StrCat("standalone-", getpid(), "-", absl::ToUnixMicros(absl::Now()));
    return absl::OkStatus();
  }
  if (!endpoint.empty()) {
    if (master_given) {
      return absl::InvalidArgumentError("give either --rdzv_endpoint or --master_addr/--master_port, not both");
    }
    RINGSIDE_RETURN_IF_ERROR(ParseEndpoint(endpoint, lo));
  }
  // Inherited identity (an outer launcher's or the user's), the same on every node.
  for (const char* name : {"RINGSIDE_RUN_ID", "TORCHELASTIC_RUN_ID"}) {
    const char* value = std::getenv(name);
    if (lo->run_id.empty() && value != nullptr) lo->run_id = value;
  }
  return absl::OkStatus();  // Still empty: Launch derives it from the endpoint.
}

// The emulated nodes `e` asks for, for the processes this launcher starts: the plan of
// PlanDdpNodes (K consecutive local ranks per node). Nothing asked: false, nothing to
// do. Refused with --nnodes > 1 (the emulated nodes exist on this machine only) and,
// with links, an explicit --master_addr or --rdzv_endpoint (`master_given`: rank 0 is
// reached at its node's address).
absl::StatusOr<bool> PlanEmulatedNodes(const EmulationSpec& e, const LaunchOptions& lo,
                                       bool master_given, NodePlan* plan) {
  if (!e.requested()) return false;
  if (lo.nnodes > 1) {
    return absl::InvalidArgumentError(
        "--network, --node_cpus, --ranks_per_node and --slow_node emulate nodes on this "
        "machine only: they need --nnodes=1");
  }
  if (e.network.enabled && master_given) {
    return absl::InvalidArgumentError(
        "--network puts rank 0 on an emulated node whose address the launcher chooses: drop "
        "--master_addr / --rdzv_endpoint");
  }
  RINGSIDE_ASSIGN_OR_RETURN(*plan, PlanDdpNodes(lo.nproc_per_node, e.ranks_per_node, e.slow_node));
  return true;
}

}  // namespace

absl::Status RunLaunchVerb(const CommandArgs& args) {
  LaunchOptions lo;
  // The job's token (--token_file or RINGSIDE_TOKEN), passed to every rank; without
  // one, Launch generates one for a single-node job. TLS too, for the launchers' own
  // rendezvous.
  RINGSIDE_ASSIGN_OR_RETURN(lo.security,
                            LoadRpcSecurity(absl::GetFlag(FLAGS_token_file), absl::GetFlag(FLAGS_tls_cert),
                                            absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)));
  lo.nproc_per_node = absl::GetFlag(FLAGS_nproc_per_node);
  // Flag errors found before anything starts are usage errors (command.h).
  absl::StatusOr<int> nnodes = ParseNnodes(absl::GetFlag(FLAGS_nnodes));
  if (!nnodes.ok()) return AsUsageError(nnodes.status());
  lo.nnodes = *nnodes;
  lo.node_rank = absl::GetFlag(FLAGS_node_rank);
  lo.master_addr = absl::GetFlag(FLAGS_master_addr);
  lo.master_port = absl::GetFlag(FLAGS_master_port);
  lo.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  RendezvousFlags rendezvous;
  rendezvous.backend = absl::GetFlag(FLAGS_rdzv_backend);
  rendezvous.endpoint = absl::GetFlag(FLAGS_rdzv_endpoint);
  rendezvous.run_id = absl::GetFlag(FLAGS_rdzv_id);
  rendezvous.standalone = absl::GetFlag(FLAGS_standalone);
  RINGSIDE_RETURN_IF_ERROR(AsUsageError(ApplyRendezvous(rendezvous, &lo)));
  lo.command = args.positional;
  RINGSIDE_ASSIGN_OR_RETURN(
      const EmulationSpec emulation,
      ParseEmulationSpec(absl::GetFlag(FLAGS_network), absl::GetFlag(FLAGS_node_cpus),
                         absl::GetFlag(FLAGS_ranks_per_node), absl::GetFlag(FLAGS_slow_node)));
  const bool master_given = absl::GetFlag(FLAGS_master_addr) != LaunchOptions().master_addr ||
                            !absl::GetFlag(FLAGS_rdzv_endpoint).empty();
  NodePlan plan;
  RINGSIDE_ASSIGN_OR_RETURN(bool emulated, PlanEmulatedNodes(emulation, lo, master_given, &plan));
  if (!emulated) return Launch(lo);
  ScopedSignalCatcher signals;  // An interrupt must not skip the nodes' teardown.
  RINGSIDE_ASSIGN_OR_RETURN(EmulatedNodes nodes,
                            PlaceRanksOnNodes(emulation.network, emulation.node_cpus, plan, &lo));
  if (signals.caught() != 0) return absl::CancelledError("interrupted while setting up the nodes");
  if (nodes.network != nullptr) {
    // Rank 0 hosts the store on its node's address; every rank names its own address.
    lo.master_addr = nodes.address_of(0);
    for (int r = 0; r < lo.nproc_per_node; ++r) {
      lo.rank_env.push_back({absl::StrCat("RINGSIDE_HOSTNAME=", nodes.address_of(r))});
    }
  }
  return Launch(lo);
}

}  // namespace ringside
