#include "ddp_ring/ddp_worker.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/strings/match.h"
#include "common/common.h"
#include "ddp_ring/process_group_factory.h"
#include "ddp_ring/store.h"
#include "google/protobuf/util/message_differencer.h"

namespace ringside {
namespace {

absl::StatusOr<int> IntFromEnv(const char* name) {
  const char* value = std::getenv(name);
  int parsed = 0;
  if (value == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not set (launch with `ringside launch` or torchrun)"));
  }
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not an integer"));
  }
  return parsed;
}

// Field-by-field comparison of two ranks' configurations, "" when equal.
std::string ConfigDifference(const RunConfig& reference, const RunConfig& mine) {
  google::protobuf::util::MessageDifferencer differ;
  std::string report;
  differ.ReportDifferencesToString(&report);
  if (differ.Compare(reference, mine)) return "";
  // One line: "modified: lr: 0.02 -> 0.05; ...".
  std::string line;
  for (char c : report) line += c == '\n' ? ';' : c;
  while (!line.empty() && (line.back() == ';' || line.back() == ' ')) line.pop_back();
  return line;
}

// This rank's listening address for Gloo: loopback for single-node jobs on loopback,
// otherwise RINGSIDE_HOSTNAME or this host's name.
std::string ListenAddress(const DdpEnv& env) {
  if (const char* h = std::getenv("RINGSIDE_HOSTNAME"); h != nullptr && *h != '\0') return h;
  if (absl::StartsWith(env.master_addr, "127.") || env.master_addr == "localhost") {
    return "127.0.0.1";
  }
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

bool InLaunchedJob() { return std::getenv("RANK") != nullptr; }

absl::StatusOr<DdpEnv> ReadDdpEnv() {
  DdpEnv env;
  RINGSIDE_ASSIGN_OR_RETURN(env.rank, IntFromEnv("RANK"));
  RINGSIDE_ASSIGN_OR_RETURN(env.world_size, IntFromEnv("WORLD_SIZE"));
  RINGSIDE_ASSIGN_OR_RETURN(env.master_port, IntFromEnv("MASTER_PORT"));
  // Optional in torchrun's contract for a single node.
  env.local_rank = IntFromEnv("LOCAL_RANK").value_or(env.rank);
  env.local_world_size = IntFromEnv("LOCAL_WORLD_SIZE").value_or(env.world_size);
  const char* addr = std::getenv("MASTER_ADDR");
  env.master_addr = addr != nullptr ? addr : "";
  const char* run_id = std::getenv("RINGSIDE_RUN_ID");
  env.run_id = run_id != nullptr && *run_id != '\0' ? run_id : "default";
  if (env.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("WORLD_SIZE must be >= 1, got ", env.world_size));
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("RANK=", env.rank, " is outside [0, WORLD_SIZE=", env.world_size, ")"));
  }
  if (env.master_addr.empty()) return absl::InvalidArgumentError("MASTER_ADDR is not set");
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("MASTER_PORT=", env.master_port, " is not a port"));
  }
  return env;
}

absl::StatusOr<DdpResult> RunDdpWorker(const DdpEnv& env, const DdpWorkerOptions& o) {
  const std::string me = absl::StrCat("rank ", env.rank);
  // Before the rendezvous, so that every rank refuses at once and alike.
  RINGSIDE_RETURN_IF_ERROR(CheckProcessGroupBackend(o.backend));
  if (o.backend != "gloo") {
    return absl::FailedPreconditionError(absl::StrCat(
        "--backend=", o.backend, " is not available for training yet: the model "
        "runs on the CPU ops backend, whose gradients live in host memory (use gloo)"));
  }
  RunConfig config = o.config;
  config.set_world_size(env.world_size);

  // Rendezvous step 1: rank 0 hosts the store; everyone connects to it.
  std::unique_ptr<StoreServer> server;
  if (env.rank == 0) {
    absl::StatusOr<std::unique_ptr<StoreServer>> started =
        StoreServer::Start(env.master_addr, env.master_port);
    if (!started.ok()) return Annotate(started.status(), absl::StrCat(me, ": hosting the store"));
    server = std::move(*started);
  }
  absl::StatusOr<std::unique_ptr<Store>> store =
      ConnectStore(env.master_addr, env.master_port, o.timeout, absl::Seconds(10));
  if (!store.ok()) return Annotate(store.status(), me);
  std::unique_ptr<Store> job = NewPrefixStore(absl::StrCat("ringside/", env.run_id), store->get());

  // Rendezvous step 2: every rank publishes its configuration; all compare all.
  RINGSIDE_RETURN_IF_ERROR(job->Set(absl::StrCat("config/", env.rank), config.SerializeAsString()));
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back(absl::StrCat("config/", r));
  if (absl::Status s = job->Wait(keys, o.timeout); !s.ok()) {
    if (!absl::IsDeadlineExceeded(s)) {
      return Annotate(s, absl::StrCat(me, ": waiting for every rank to arrive (rank 0 hosts the store)"));
    }
    std::vector<std::string> missing;
    for (int r = 0; r < env.world_size; ++r) {
      if (!job->Get(keys[r], absl::ZeroDuration()).ok()) missing.push_back(absl::StrCat(r));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        me, ": rank(s) ", absl::StrJoin(missing, ", "), " never arrived within ",
        absl::FormatDuration(o.timeout), " (store at ", env.master_addr, ":", env.master_port, ")"));
  }
  std::string mismatch;
  RunConfig reference;
  for (int r = 0; r < env.world_size && mismatch.empty(); ++r) {
    RINGSIDE_ASSIGN_OR_RETURN(std::string blob, job->Get(keys[r], o.timeout));
    RunConfig theirs;
    if (!theirs.ParseFromString(blob)) {
      return absl::DataLossError(absl::StrCat(me, ": rank ", r, " published an unreadable configuration"));
    }
    if (r == 0) {
      reference = theirs;
    } else if (std::string diff = ConfigDifference(reference, theirs); !diff.empty()) {
      mismatch = absl::StrCat("rank ", r, " runs a different configuration than rank 0: ", diff);
    }
  }
  // Everyone has read every configuration before rank 0 (which hosts the store) may
  // leave, so that all ranks report the same mismatch.
  RINGSIDE_RETURN_IF_ERROR(job->Set(absl::StrCat("config_read/", env.rank), "1"));
  if (env.rank == 0) {
    std::vector<std::string> read_keys;
    for (int r = 0; r < env.world_size; ++r) read_keys.push_back(absl::StrCat("config_read/", r));
    job->Wait(read_keys, o.timeout).IgnoreError();  // A rank that died is found below.
  }
  if (!mismatch.empty()) return absl::FailedPreconditionError(mismatch);

  // Rendezvous step 3: the process group (Gloo's full mesh, through the store).
  std::unique_ptr<Store> pg_store = NewPrefixStore("pg", job.get());
  ProcessGroupOptions pg_options;
  pg_options.rank = env.rank;
  pg_options.world_size = env.world_size;
  pg_options.timeout = o.timeout;
  pg_options.algorithm = o.algorithm;
  pg_options.hostname = ListenAddress(env);
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
      NewProcessGroup(o.backend, pg_store.get(), pg_options);
  if (!group.ok()) return Annotate(group.status(), me);

  // The model and the data, as in single-process training.
  std::unique_ptr<Ops> ops = NewCpuOps(config.threads());
  RINGSIDE_ASSIGN_OR_RETURN(DatasetSplits data, LoadDataset(config.dataset()));
  const Dataset& train = *data.train;
  RINGSIDE_ASSIGN_OR_RETURN(
      std::unique_ptr<Model> model,
      Model::Create(config.model(), Shape{train.channels(), train.height(), train.width()},
                    train.num_classes(), ops.get()));
  SgdHyper hyper;
  hyper.lr = config.lr();
  hyper.momentum = config.momentum();
  hyper.weight_decay = config.weight_decay();
  hyper.nesterov = config.nesterov();
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Reducer> reducer,
                            Reducer::Create(group->get(), model.get(), ops.get(), hyper, o.reducer));
  if (env.rank == 0) {
    absl::FPrintF(stderr, "ddp: %d ranks, backend %s, %d buckets, overlap %s, model %s (%d parameters)\n",
                  env.world_size, (*group)->backend(), reducer->buckets().size(),
                  o.reducer.overlap ? "on" : "off", config.model(), model->num_params());
  }

  TrainerOptions topts;
  topts.config = config;
  topts.rank = env.rank;
  topts.world_size = env.world_size;
  topts.out_dir = o.out_dir;
  topts.resume = o.resume;
  topts.checkpoint_every = o.checkpoint_every;
  topts.write_checkpoints = true;  // The trainer lets rank 0 write.
  topts.eval_batch = o.eval_batch;
  topts.progress = env.rank == 0 ? stderr : nullptr;
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                            Trainer::Create(topts, model.get(), ops.get(), &data, reducer.get()));
  // Start step: every rank continues from rank 0's parameters (initialised or restored).
  if (absl::Status s = reducer->BroadcastParameters(); !s.ok()) return Annotate(s, me);
  absl::StatusOr<TrainResult> result = trainer->Run();
  if (!result.ok()) {
    // Rank 0 hosts the store: keep it up a moment so that the other survivors can
    // find out, through it, which rank was lost.
    if (env.rank == 0) absl::SleepFor(std::min(o.timeout, absl::Seconds(2)));
    return Annotate(result.status(), me);
  }
  // Final step: nobody leaves (and rank 0 does not stop the store) before all are done.
  if (absl::Status s = (*group)->Barrier()->Wait(); !s.ok()) {
    return Annotate(s, absl::StrCat(me, ": final barrier"));
  }
  DdpResult out;
  out.steps = result->steps;
  out.samples_per_sec = result->samples_per_sec * env.world_size;
  out.test_loss = result->test_loss;
  out.test_accuracy = result->test_accuracy;
  return out;
}

}  // namespace ringside
