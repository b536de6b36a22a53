#include "experiments/explain/ps_explainer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/model.h"
#include "common/ops_factory.h"
#include "common/output_files.h"
#include "common/ps_layout.h"
#include "common/ps_placement.h"
#include "common/ringside.pb.h"
#include "common/status_macros.h"
#include "experiments/sys/files.h"
#include "experiments/sys/subprocess.h"
#include "ps_server/ps.pb.h"
#include "ps_server/sharding.h"
#include "ps_server/wire_chunk.h"

namespace ringside {
namespace {


// "1,077,288".
std::string Commas(int64_t v) {
  std::string digits = absl::StrCat(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// "1.08 MB", "10.7 MB", "431 MB", "812 kB" (decimal units, as the metrics' MB).
std::string Size(double bytes) {
  if (bytes >= 1e6) {
    const double mb = bytes / 1e6;
    return mb >= 100 ? absl::StrFormat("%.0f MB", mb) : absl::StrFormat("%.3g MB", mb);
  }
  if (bytes >= 1e3) return absl::StrFormat("%.3g kB", bytes / 1e3);
  return absl::StrFormat("%.0f B", bytes);
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// The last `lines` lines of `text`.
std::string Tail(const std::string& text, int lines) {
  std::vector<absl::string_view> all =
      absl::StrSplit(absl::StripTrailingAsciiWhitespace(text), '\n');
  const size_t from = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  return absl::StrJoin(all.begin() + from, all.end(), " | ");
}

// The most bytes (in + out) one shard moves per step.
int64_t BusiestShardBytes(const PsExplanation& e) {
  int64_t busiest = 0;
  for (const PsShardPart& p : e.shards) busiest = std::max(busiest, p.wire_in + p.wire_out);
  return busiest;
}

}  // namespace

absl::StatusOr<int64_t> ModelParamCount(const std::string& model) {
  // Threads 0: leaves the process's BLAS setting alone; nothing is computed.
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 0));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Model> built,
                            Model::Create(model, Shape{1, 28, 28}, 10, ops.get()));
  return built->num_params();
}

int64_t ChunkWireBytes(int worker, int64_t step, ps::TensorKind kind, int64_t offset,
                       int64_t payload_bytes) {
  // A registered worker's session is never 0, and a fixed64 takes 8 bytes whatever it is.
  const uint64_t session = kind == ps::GRADIENTS ? ~uint64_t{0} : 0;
  return WireChunk::EncodedBytes(worker, step, kind, offset, session, payload_bytes);
}

absl::StatusOr<PsExplanation> ExplainPs(const PsExplainOptions& options, int64_t step) {
  if (options.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers must be >= 1, got ", options.workers));
  }
  if (options.shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--shards must be >= 1, got ", options.shards));
  }
  PsExplanation e;
  e.options = options;
  e.step = step;
  RINGSIDE_ASSIGN_OR_RETURN(e.num_params, ModelParamCount(options.model));
  if (absl::Status s = ValidateSharding(e.num_params, options.shards); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--shards=", options.shards, ": ", s.message()));
  }
  RINGSIDE_ASSIGN_OR_RETURN(e.chunk_floats, ChunkFloats(options.chunk_bytes));
  const int n = options.workers;
  e.worker_out.assign(n, 0);
  e.worker_in.assign(n, 0);
  // The cut the shards of a balanced job hold (JobPartition, as every shard takes it).
  RINGSIDE_ASSIGN_OR_RETURN(const PsPartition cut, JobPartition(RunConfig(), options.shards, e.num_params, {}));
  for (int s = 0; s < options.shards; ++s) {
    const Slice slice{cut.shard(s).offset, cut.shard(s).size};
    PsShardPart part;
    part.shard = s;
    part.offset = slice.offset;
    part.floats = slice.size;
    part.chunks = NumChunks(slice.size, e.chunk_floats);
    part.payload_in = part.payload_out = int64_t{4} * n * slice.size;
    for (int w = 0; w < n; ++w) {
      for (int64_t k = 0; k < part.chunks; ++k) {
        const Slice c = ChunkOf(slice.size, e.chunk_floats, k);
        // Push: the worker's gradients of `step`; pull: the parameters of step + 1.
        const int64_t push = ChunkWireBytes(w, step, ps::GRADIENTS, c.offset, 4 * c.size);
        const int64_t pull = ChunkWireBytes(w, step + 1, ps::PARAMS, c.offset, 4 * c.size);
        part.wire_in += push;
        part.wire_out += pull;
        e.worker_out[w] += push;
        e.worker_in[w] += pull;
      }
    }
    e.master_in += part.wire_in;
    e.master_out += part.wire_out;
    e.shards.push_back(part);
  }
  return e;
}

std::string FormatPsExplanation(const PsExplanation& e) {
  const int n = e.options.workers;
  const int shards = e.options.shards;
  const int64_t model_bytes = 4 * e.num_params;
  std::string out =
      absl::StrCat("parameter server, BSP: ", Plural(n, "worker", "workers"), ", ",
                   Plural(shards, "shard", "shards"), "; model ", e.options.model, " = ",
                   Commas(e.num_params), " floats = ", Size(model_bytes), "\n");
  absl::StrAppend(&out,
                  "slicing: shard s owns floats [floor(s P / S), floor((s + 1) P / S)) of "
                  "the P = ",
                  Commas(e.num_params), " parameters, sent in chunks of up to ",
                  Commas(e.chunk_floats), " floats (--ps_chunk_kb=", e.options.chunk_bytes / 1024,
                  "):\n");
  for (const PsShardPart& p : e.shards) {
    absl::StrAppend(&out, "  shard ", p.shard, ": floats [", Commas(p.offset), ", ",
                    Commas(p.offset + p.floats), ")  ", Commas(p.floats),
                    " floats = ", Size(4 * p.floats), " in ", Plural(p.chunks, "chunk", "chunks"),
                    "\n");
  }
  const PsShardPart& first = e.shards.front();
  absl::StrAppend(
      &out, "\none step (every worker does the same; the step's numbers are for shard 0):\n",
      "  1. push: each worker computes its gradients on its own batch and sends each shard its "
      "slice of them\n",
      "       worker w -> shard 0: ", Commas(4 * first.floats), " bytes of floats + ",
      Commas(first.wire_in / n - 4 * first.floats), " bytes of gRPC's protobuf framing (",
      Plural(first.chunks, "chunk message", "chunk messages"),
      ": tags, worker, step, kind, offset, the 8-byte session, the payload's length)\n",
      "  2. aggregate: each shard adds up the ", n,
      " workers' gradients of its slice (BSP: it "
      "waits for the slowest worker)\n",
      "       shard 0: ", n, " x ", Commas(first.floats), " floats in\n",
      "  3. update: each shard runs SGD (momentum, weight decay) on its slice with the averaged "
      "gradient\n",
      "  4. pull: each shard sends every worker the updated parameters of its slice; the "
      "workers' next step uses them\n",
      "       shard 0 -> worker w: ", Commas(first.wire_out / n),
      " bytes (the same framing without the session)\n");
  absl::StrAppend(&out, "\nbytes through each node per step (payload + framing):\n");
  for (int w = 0; w < n; ++w) {
    absl::StrAppend(&out, "  worker ", w, ": out ", Commas(e.worker_out[w]), " (push), in ",
                    Commas(e.worker_in[w]), " (pull)\n");
  }
  for (const PsShardPart& p : e.shards) {
    absl::StrAppend(&out, "  shard ", p.shard, ":  in ", Commas(p.wire_in), ", out ",
                    Commas(p.wire_out), " = ", Size(p.wire_in + p.wire_out), " (in + out)\n");
  }
  const int64_t master = e.master_in + e.master_out;
  absl::StrAppend(&out, "  master (all shards): in ", Commas(e.master_in), ", out ",
                  Commas(e.master_out), " = ", Size(master), " (in + out)\n");
  // The bottleneck, in one line: one node carries N x the model twice.
  const int64_t busiest = BusiestShardBytes(e);
  if (shards == 1) {
    absl::StrAppend(&out, "\n", Plural(n, "worker", "workers"), ", 1 shard: the master moves ",
                    Size(master), " per step (in + out)");
    if (n > 1) {
      absl::StrAppend(&out, "; with ", n, " shards each moves ",
                      Size(static_cast<double>(master) / n));
    }
    absl::StrAppend(&out, "\n");
  } else {
    absl::StrAppend(&out, "\n", Plural(n, "worker", "workers"), ", ", shards,
                    " shards: each shard moves ", Size(busiest), " per step (in + out), the ",
                    "master as a whole ", Size(master), "; with 1 shard one node would move ",
                    Size(master), "\n");
  }
  if (n > 1) {
    absl::StrAppend(
        &out, absl::StrFormat("(a DDP ring rank moves 2 x 2(N-1)/N x %s = %s per step in + out, "
                              "whatever N: `ringside explain ring`)\n",
                              Size(model_bytes), Size(4.0 * (n - 1) / n * model_bytes)));
  }
  return out;
}

namespace {

// `count` boxes of `height` at `y`, spread evenly across the frame (PsFrames).
std::vector<FrameBox> PsBoxRow(int count, double y, double height) {
  std::vector<FrameBox> boxes(count);
  const double slot = (kFrameWidth - 40) / count;
  const double width = std::min(200.0, slot - 12);
  for (int i = 0; i < count; ++i) {
    boxes[i].x = 20 + slot * i + (slot - width) / 2;
    boxes[i].y = y;
    boxes[i].width = width;
    boxes[i].height = height;
  }
  return boxes;
}

// A frame of `e`'s boxes as `phase` ("start", "push", "aggregate", "update", "pull")
// shows them: the shards in a row at the top (boxes 0 .. S-1), the workers in a row at
// the bottom (boxes S .. S+N-1); no title, caption or arrows.
Frame PsFrame(const PsExplanation& e, const std::string& phase) {
  const int n = e.options.workers;
  const int shards = e.options.shards;
  Frame f;
  std::vector<FrameBox> top = PsBoxRow(shards, 150, 64);
  std::vector<FrameBox> bottom = PsBoxRow(n, 540, 64);
  for (int s = 0; s < shards; ++s) {
    const PsShardPart& p = e.shards[s];
    FrameBox& b = top[s];
    b.title = absl::StrCat("shard ", s);
    b.lines.push_back(absl::StrCat("[", p.offset, ", ", p.offset + p.floats, ")"));
    if (phase == "aggregate") {
      b.lines.push_back(absl::StrCat("sum of ", n, " grads"));
      b.highlight = true;
    } else if (phase == "update") {
      b.lines.push_back("SGD on the slice");
      b.highlight = true;
    } else if (phase == "push") {
      b.lines.push_back(absl::StrCat("in ", Size(p.wire_in)));
    } else if (phase == "pull") {
      b.lines.push_back(absl::StrCat("out ", Size(p.wire_out)));
    } else {
      b.lines.push_back(absl::StrCat(Commas(p.floats), " floats"));
    }
  }
  for (int w = 0; w < n; ++w) {
    FrameBox& b = bottom[w];
    b.title = absl::StrCat("worker ", w);
    if (phase == "push") b.lines.push_back(absl::StrCat("out ", Size(e.worker_out[w])));
    if (phase == "pull") b.lines.push_back(absl::StrCat("in ", Size(e.worker_in[w])));
    if (phase == "start") b.lines.push_back("full model copy");
  }
  for (FrameBox& b : top) f.boxes.push_back(std::move(b));
  for (FrameBox& b : bottom) f.boxes.push_back(std::move(b));
  return f;
}

}  // namespace

std::vector<Frame> PsFrames(const PsExplanation& e) {
  const int n = e.options.workers;
  const int shards = e.options.shards;
  // Arrow labels only while they fit.
  const bool labels = n * shards <= 8;
  const std::string totals = absl::StrCat("master (all shards) per step: in ", Size(e.master_in),
                                          ", out ", Size(e.master_out));
  std::vector<Frame> frames;
  Frame start = PsFrame(e, "start");
  start.title = absl::StrCat("parameter server: ", n, " workers, ", shards, " shards, ",
                             Commas(e.num_params), " floats");
  start.caption = {
      "shard s owns floats [floor(s P / S), floor((s + 1) P / S)); every worker "
      "holds the whole model",
      "one BSP step: push, aggregate, update, pull"};
  frames.push_back(std::move(start));

  Frame push = PsFrame(e, "push");
  push.title = "1. push: each worker sends each shard its slice of the gradients";
  push.caption = {totals};
  for (int w = 0; w < n; ++w) {
    for (int s = 0; s < shards; ++s) {
      push.arrows.push_back(
          {shards + w, s, labels ? Size(e.shards[s].wire_in / n) : std::string()});
    }
  }
  frames.push_back(std::move(push));

  Frame aggregate = PsFrame(e, "aggregate");
  aggregate.title = absl::StrCat("2. aggregate: each shard sums the ", n, " workers' gradients");
  aggregate.caption = {"BSP: a shard waits for the slowest worker's push before it goes on"};
  frames.push_back(std::move(aggregate));

  Frame update = PsFrame(e, "update");
  update.title = "3. update: each shard runs SGD on its slice";
  update.caption = {"the averaged gradient, momentum and weight decay, one optimizer per slice"};
  frames.push_back(std::move(update));

  Frame pull = PsFrame(e, "pull");
  pull.title = "4. pull: each worker receives each shard's updated slice";
  pull.caption = {totals, absl::StrCat("the busiest shard moves ", Size(BusiestShardBytes(e)),
                                       " per step (in + out)")};
  for (int s = 0; s < shards; ++s) {
    for (int w = 0; w < n; ++w) {
      pull.arrows.push_back(
          {s, shards + w, labels ? Size(e.shards[s].wire_out / n) : std::string()});
    }
  }
  frames.push_back(std::move(pull));
  return frames;
}

absl::StatusOr<std::vector<PsMeasuredStep>> RunPsJob(const std::string& binary,
                                                     const PsExplainOptions& options, int steps,
                                                     int batch, int timeout_s) {
  // Removed with the run's files whatever happens below.
  RINGSIDE_ASSIGN_OR_RETURN(ScopedTempDir run_dir, ScopedTempDir::Create("ringside-explain-ps"));
  const std::string& dir = run_dir.path();
  const int64_t samples = int64_t{options.workers} * batch * (steps + 1);
  const std::vector<std::string> argv = {
      binary,
      "train",
      "--strategy=ps",
      "--ps_sync=bsp",
      // The framing explained and counted is gRPC's (the TCP data plane, the default,
      // frames a chunk its own way).
      "--ps_transport=grpc",
      absl::StrCat("--workers=", options.workers),
      absl::StrCat("--ps_shards=", options.shards),
      absl::StrCat("--model=", options.model),
      absl::StrCat("--ps_chunk_kb=", options.chunk_bytes / 1024),
      absl::StrCat("--steps=", steps),
      "--epochs=1",
      absl::StrCat("--batch=", batch),
      absl::StrCat("--dataset=synthetic:train=", samples, ",test=", 8 * options.workers),
      "--eval_batch=64",
      "--threads=1",
      absl::StrCat("--timeout_s=", std::max(10, timeout_s / 2)),
      absl::StrCat("--out=", dir),
  };
  RINGSIDE_ASSIGN_OR_RETURN(CommandOutput run, RunCommand(argv, absl::Seconds(timeout_s)));
  if (!run.ok()) {
    return absl::InternalError(
        absl::StrCat("the real run (", absl::StrJoin(argv.begin() + 1, argv.end(), " "), ") ",
                     run.exit_code >= 0 ? absl::StrCat("exited with status ", run.exit_code)
                                        : absl::StrCat("was killed by signal ", run.term_signal),
                     ": ", Tail(run.stdout_text + run.stderr_text, 3)));
  }
  std::vector<PsMeasuredStep> measured;
  for (int s = 0; s < options.shards; ++s) {
    const std::string path =
        absl::StrCat(dir, "/", OutputFileName(OutputFile::kMetrics, OutputOwner::kShard, s));
    RINGSIDE_ASSIGN_OR_RETURN(std::vector<StepMetrics> records, ReadMetricsFile(path));
    for (const StepMetrics& m : records) {
      measured.push_back({m.rank(), m.step(), m.bytes_received(), m.bytes_sent()});
    }
  }
  return measured;
}

absl::Status ComparePsBytes(const PsExplainOptions& options, int steps,
                            const std::vector<PsMeasuredStep>& measured, double tolerance,
                            std::string* report) {
  std::map<int64_t, PsExplanation> predictions;  // By step.
  std::map<std::pair<int, int64_t>, int> seen;   // (shard, step) -> records.
  absl::Status first_error;
  int exact = 0;
  for (const PsMeasuredStep& m : measured) {
    if (m.shard < 0 || m.shard >= options.shards) {
      return absl::FailedPreconditionError(
          absl::StrCat("a shard record names shard ", m.shard, " of ", options.shards));
    }
    auto it = predictions.find(m.step);
    if (it == predictions.end()) {
      RINGSIDE_ASSIGN_OR_RETURN(PsExplanation e, ExplainPs(options, m.step));
      it = predictions.emplace(m.step, std::move(e)).first;
    }
    const PsShardPart& p = it->second.shards[m.shard];
    ++seen[{m.shard, m.step}];
    absl::StrAppend(report, "  shard ", m.shard, " step ", m.step, ": predicted in ",
                    Commas(p.wire_in), " out ", Commas(p.wire_out), ", measured in ",
                    Commas(m.bytes_received), " out ", Commas(m.bytes_sent), "\n");
    if (m.bytes_received == p.wire_in && m.bytes_sent == p.wire_out) ++exact;
    for (const auto& [what, got, want] :
         {std::tuple<const char*, int64_t, int64_t>{"in", m.bytes_received, p.wire_in},
          std::tuple<const char*, int64_t, int64_t>{"out", m.bytes_sent, p.wire_out}}) {
      const double off =
          want == 0 ? (got == 0 ? 0.0 : 1.0) : std::abs(static_cast<double>(got - want)) / want;
      if (off > tolerance && first_error.ok()) {
        first_error = absl::FailedPreconditionError(absl::StrFormat(
            "shard %d step %d: measured %s %d bytes, predicted %d (off by %.2f%%, more than "
            "%.2f%%)",
            m.shard, m.step, what, got, want, 100 * off, 100 * tolerance));
      }
    }
  }
  for (int s = 0; s < options.shards && first_error.ok(); ++s) {
    for (int64_t t = 0; t < steps; ++t) {
      const auto it = seen.find({s, t});
      if (it == seen.end() || it->second != 1) {
        first_error = absl::FailedPreconditionError(
            absl::StrCat("shard ", s, " reported step ", t, " ", it == seen.end() ? 0 : it->second,
                         " times, expected once"));
        break;
      }
    }
  }
  if (first_error.ok() &&
      static_cast<int64_t>(measured.size()) != int64_t{steps} * options.shards) {
    first_error = absl::FailedPreconditionError(
        absl::StrCat("the shards reported ", measured.size(), " step records, expected ", steps,
                     " x ", options.shards));
  }
  absl::StrAppend(report, "  ", exact, " of ", measured.size(), " records exact to the byte\n");
  return first_error;
}

}  // namespace ringside
