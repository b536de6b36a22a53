// `ringside explain ring --ranks=N --elements=E` and `ringside explain ps --workers=N
// --shards=S`: step-by-step views of the ring all-reduce and of a parameter server's
// step (experiments/explain/explain.h), each ending with a check against the real
// thing, and optionally written as frames (--frames=FILE.svg|FILE.html).
#include "experiments/explain/explain.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"
#include "experiments/sys/process_info.h"

namespace ringside {
namespace {

// Bounds that keep the explanation readable and its memory small (every step keeps
// every rank's vector): for sizes, `ringside bench allreduce`.
constexpr int kMaxRanks = 16;
constexpr int64_t kMaxElements = 100000;
// The real run of `explain ps` starts workers + shards processes.
constexpr int kMaxPsProcesses = 32;
constexpr int kPsCheckSteps = 2;
constexpr int kPsCheckTimeoutS = 120;
constexpr double kPsCheckTolerance = 0.01;

std::string Plural(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// Writes the frames to `path` (--frames) if it is not empty and says where.
absl::Status MaybeWriteFrames(const std::string& path, const std::vector<Frame>& frames,
                              const std::string& title) {
  if (path.empty()) return absl::OkStatus();
  if (absl::Status s = WriteFrames(path, frames, title); !s.ok()) return s;
  absl::PrintF("frames: %s (%s)\n", path, Plural(frames.size(), "frame", "frames"));
  return absl::OkStatus();
}

// Explains, runs the backend on the same input, compares.
absl::Status CheckRing(const RingExplanation& e, const std::string& what) {
  absl::StatusOr<RingBackendRun> run = RunGlooRing(e.inputs);
  if (!run.ok()) return run.status();
  if (absl::Status s = CompareWithBackend(e, *run); !s.ok()) {
    return absl::InternalError(absl::StrCat("check failed", what, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ExplainRingVerb(const CommandArgs& args, const std::string& frames) {
  const int ranks = absl::GetFlag(FLAGS_ranks);
  const int64_t elements = absl::GetFlag(FLAGS_elements);
  if (ranks < 1 || ranks > kMaxRanks) {
    return UsageError(absl::StrCat("--ranks must be in [1, ", kMaxRanks, "], got ", ranks));
  }
  if (elements < 0 || elements > kMaxElements) {
    return UsageError(
        absl::StrCat("--elements must be in [0, ", kMaxElements, "], got ", elements));
  }
  // --seed given: random values, where a different order of additions would show.
  const bool random = args.flags_given.count("seed") > 0;
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const RingExplanation e = ExplainRing(
      RingInputs(ranks, elements, random ? RingValues::kRandom : RingValues::kReadable, seed));
  absl::PrintF("%s", FormatRingExplanation(e));
  if (random) absl::PrintF("values: random (--seed=%d), shown to 6 digits\n", seed);
  RINGSIDE_RETURN_IF_ERROR(CheckRing(e, ""));
  absl::PrintF("check: the Gloo ring all-reduce on the same input gives the same %s, bit for bit\n",
               Plural(ranks, "buffer", "buffers"));
  std::vector<std::string> counted;
  for (int r = 0; r < ranks; ++r) {
    counted.push_back(absl::StrCat(4 * e.floats_sent[r], "/", 4 * e.floats_received[r]));
  }
  absl::PrintF(
      "check: its Work::bytes() count the same traffic on every rank (sent/received "
      "bytes: %s)\n",
      absl::StrJoin(counted, ", "));
  if (!random && ranks > 1 && elements > 0) {
    // Small integers add up exactly in any order; random floats do not, so this check
    // shows that the order of the additions is the backend's too.
    const RingExplanation r = ExplainRing(RingInputs(ranks, elements, RingValues::kRandom, seed));
    RINGSIDE_RETURN_IF_ERROR(CheckRing(r, " on random values"));
    absl::PrintF(
        "check: so it does on random floats (seed %d), whose sums depend on the order "
        "of the additions\n",
        seed);
  }
  return MaybeWriteFrames(
      frames, RingFrames(e), absl::StrCat("ring all-reduce: ", ranks, " ranks, ", elements, " floats"));
}

absl::Status ExplainPsVerb(const std::string& frames) {
  PsExplainOptions options;
  options.workers = absl::GetFlag(FLAGS_workers);
  options.shards = absl::GetFlag(FLAGS_shards);
  options.model = absl::GetFlag(FLAGS_model);
  options.chunk_bytes = int64_t{absl::GetFlag(FLAGS_ps_chunk_kb)} * 1024;
  if (options.workers < 1) {
    return UsageError(absl::StrCat("--workers must be >= 1, got ", options.workers));
  }
  if (options.shards < 1) {
    return UsageError(absl::StrCat("--shards must be >= 1, got ", options.shards));
  }
  if (options.workers + options.shards > kMaxPsProcesses) {
    return UsageError(absl::StrCat("--workers + --shards must be at most ", kMaxPsProcesses,
                                   " (each is a process of the real run), got ",
                                   options.workers + options.shards));
  }
  const int batch = absl::GetFlag(FLAGS_batch);
  if (batch < 1) return UsageError(absl::StrCat("--batch must be >= 1, got ", batch));
  absl::StatusOr<PsExplanation> e = ExplainPs(options);
  if (!e.ok()) return AsUsageError(e.status());
  absl::PrintF("%s", FormatPsExplanation(*e));

  absl::StatusOr<std::string> self = SelfExePath();
  if (!self.ok()) return self.status();
  absl::PrintF(
      "\nthe real thing: ringside train --strategy=ps --ps_transport=grpc --workers=%d --ps_shards=%d "
      "--model=%s --steps=%d (synthetic data) ...\n",
      options.workers, options.shards, options.model, kPsCheckSteps);
  std::fflush(stdout);
  absl::StatusOr<std::vector<PsMeasuredStep>> measured =
      RunPsJob(*self, options, kPsCheckSteps, batch, kPsCheckTimeoutS);
  if (!measured.ok()) return measured.status();
  std::string table;
  const absl::Status compared =
      ComparePsBytes(options, kPsCheckSteps, *measured, kPsCheckTolerance, &table);
  absl::PrintF("%s", table);
  if (!compared.ok()) {
    return absl::InternalError(absl::StrCat("check failed: ", compared.message()));
  }
  absl::PrintF(
      "check: every shard's bytes in and out per step, measured by the real run, are "
      "within 1%% of the prediction\n");
  return MaybeWriteFrames(frames, PsFrames(*e),
                          absl::StrCat("parameter server: ", options.workers, " workers, ",
                                       options.shards, " shards"));
}

}  // namespace

absl::Status RunExplainVerb(const CommandArgs& args) {
  const std::string what = args.positional.empty() ? "" : args.positional[0];
  if (what != "ring" && what != "ps") {
    return UsageError(
        absl::StrCat("explain: unknown subject '", what, "': explain ring or explain ps"));
  }
  const std::string frames = absl::GetFlag(FLAGS_frames);
  if (!frames.empty()) {
    if (absl::Status s = CheckFramesPath(frames); !s.ok()) return AsUsageError(s);
  }
  return what == "ring" ? ExplainRingVerb(args, frames) : ExplainPsVerb(frames);
}

}  // namespace ringside
