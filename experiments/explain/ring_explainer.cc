#include "experiments/explain/ring_explainer.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/random.h"
#include "common/status_macros.h"
#include "ddp_ring/local_ranks.h"
#include "ddp_ring/process_group.h"

namespace ringside {
namespace {

// How many values of a chunk the text shows before cutting it.
constexpr int64_t kShownValues = 8;
// The same in a frame's boxes and arrow labels (narrower).
constexpr int64_t kFrameValues = 4;

int Mod(int a, int w) { return (a % w + w) % w; }

std::vector<float> Values(const std::vector<float>& data, const RingChunk& c) {
  return std::vector<float>(data.begin() + c.begin, data.begin() + c.begin + c.count);
}

// "12", "-3.5", "0.0123457": integers as such, others to 6 significant digits (the text
// is for reading; the check compares every bit).
std::string Number(float v) {
  if (std::isfinite(v) && v == std::nearbyint(v) && std::fabs(v) < 1e7f) {
    return absl::StrFormat("%.0f", v);
  }
  return absl::StrFormat("%.6g", v);
}
std::string ShortNumber(float v) {
  if (std::isfinite(v) && v == std::nearbyint(v) && std::fabs(v) < 1e7f) {
    return absl::StrFormat("%.0f", v);
  }
  return absl::StrFormat("%.3g", v);
}

// "[4 5 6]", or "[1 2 ... 3 more]" past `shown` values.
std::string List(const std::vector<float>& values, int64_t shown = kShownValues,
                 std::string (*number)(float) = Number) {
  std::vector<std::string> parts;
  const int64_t n = static_cast<int64_t>(values.size());
  for (int64_t i = 0; i < n && i < shown; ++i) parts.push_back(number(values[i]));
  if (n > shown) parts.push_back(absl::StrCat("... ", n - shown, " more"));
  return absl::StrCat("[", absl::StrJoin(parts, " "), "]");
}

// A rank's whole vector, its chunks separated by " | ".
std::string Buffer(const std::vector<float>& data, int world) {
  const int64_t n = static_cast<int64_t>(data.size());
  std::vector<std::string> parts;
  for (int c = 0; c < world; ++c) {
    const std::string list = List(Values(data, RingChunkOf(n, world, c)), kShownValues / 2);
    parts.push_back(list.substr(1, list.size() - 2));
  }
  return absl::StrCat("[", absl::StrJoin(parts, " | "), "]");
}

std::string ChunkName(const RingChunk& c) {
  return absl::StrCat("chunk ", c.index, " [", c.begin, ", ", c.begin + c.count, ")");
}

const char* PhaseName(RingPhase phase) {
  return phase == RingPhase::kReduceScatter ? "reduce-scatter" : "all-gather";
}

}  // namespace

std::vector<std::vector<float>> RingInputs(int world, int64_t n, RingValues values, uint64_t seed) {
  std::vector<std::vector<float>> inputs(world, std::vector<float>(n));
  Rng rng(Mix64(seed ^ 0x72696e67ULL));  // "ring".
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      if (values == RingValues::kReadable) {
        inputs[r][i] = static_cast<float>(10 * r + i);
      } else {
        // A mantissa in [1, 2), a binary exponent in [-8, 8], a sign: sums of such
        // values round differently in different orders.
        const float mantissa = 1.0f + rng.UniformFloat();
        const int exponent = static_cast<int>(rng.Below(17)) - 8;
        const float sign = (rng.Next() & 1) ? -1.0f : 1.0f;
        inputs[r][i] = sign * std::ldexp(mantissa, exponent);
      }
    }
  }
  return inputs;
}

RingExplanation ExplainRing(const std::vector<std::vector<float>>& inputs) {
  RingExplanation e;
  e.world = static_cast<int>(inputs.size());
  e.elements = inputs.empty() ? 0 : static_cast<int64_t>(inputs[0].size());
  e.inputs = inputs;
  e.chunks_sent.assign(e.world, 0);
  e.floats_sent.assign(e.world, 0);
  e.floats_received.assign(e.world, 0);
  const int w = e.world;
  const int64_t n = e.elements;
  std::vector<std::vector<float>> data = inputs;
  // The backend's schedule, one transfer per step: reduce-scatter, then all-gather.
  std::vector<RingSchedule> schedules;
  for (int r = 0; r < w; ++r) schedules.push_back(RingSchedule::Unsegmented(n, w, r));
  const int64_t transfers = w > 1 ? schedules[0].transfers() : 0;
  for (int64_t t = 0; t < transfers; ++t) {
    RingStep step;
    step.ranks.resize(w);
    // Every rank sends from its vector as it was before the step: the chunk a rank
    // receives in a step is never the one it sends in it.
    for (int r = 0; r < w; ++r) {
      const RingTransfer x = schedules[r].At(t);
      step.phase = x.phase;
      step.step = x.step;
      RingRankStep& rs = step.ranks[r];
      rs.rank = r;
      rs.sent = x.send_chunk;
      rs.received = x.recv_chunk;
      rs.sent_values = Values(data[r], rs.sent);
    }
    const bool reduce = step.phase == RingPhase::kReduceScatter;
    for (int r = 0; r < w; ++r) {
      RingRankStep& rs = step.ranks[r];
      const RingRankStep& left = step.ranks[Mod(r - 1, w)];
      rs.received_values = left.sent_values;  // left.sent is rs.received.
      rs.old_values = Values(data[r], rs.received);
      rs.new_values = rs.received_values;
      if (reduce) {
        // The backend's `sum[i] += received[i]`: this rank's running copy plus the
        // left neighbour's running sum, one float addition per element.
        for (int64_t i = 0; i < rs.received.count; ++i) {
          rs.new_values[i] = rs.old_values[i] + rs.received_values[i];
        }
      }
      std::memcpy(data[r].data() + rs.received.begin, rs.new_values.data(),
                  rs.received.count * sizeof(float));
      e.chunks_sent[r] += 1;
      e.floats_sent[r] += rs.sent.count;
      e.floats_received[r] += rs.received.count;
    }
    step.buffers = data;
    e.steps.push_back(std::move(step));
  }
  e.result = std::move(data);
  return e;
}

absl::StatusOr<RingBackendRun> RunGlooRing(const std::vector<std::vector<float>>& inputs,
                                           int timeout_s) {
  const int w = static_cast<int>(inputs.size());
  const int64_t n = inputs.empty() ? 0 : static_cast<int64_t>(inputs[0].size());
  RingBackendRun run;
  run.buffers = inputs;
  run.bytes_sent.assign(w, 0);
  run.bytes_received.assign(w, 0);
  ProcessGroupOptions options;
  options.timeout = absl::Seconds(timeout_s);
  // kAuto would run recursive doubling below 4 MiB: the ring is what is explained.
  options.algorithm = AllReduceAlgorithm::kRing;
  const absl::Status status = RunLocalGlooRanks(w, options, [&](ProcessGroup& group) {
    const int r = group.rank();
    std::shared_ptr<Work> work = group.AllReduce(run.buffers[r].data(), n, ReduceOp::kSum);
    RINGSIDE_RETURN_IF_ERROR(work->Wait());
    run.bytes_sent[r] = work->bytes().sent;
    run.bytes_received[r] = work->bytes().received;
    return absl::OkStatus();
  });
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("the Gloo ring all-reduce failed: ", status.message()));
  }
  return run;
}

absl::Status CompareWithBackend(const RingExplanation& explanation, const RingBackendRun& run) {
  if (run.buffers.size() != explanation.result.size()) {
    return absl::InternalError(absl::StrCat("the backend returned ", run.buffers.size(),
                                            " buffers for ", explanation.result.size(), " ranks"));
  }
  for (int r = 0; r < explanation.world; ++r) {
    const std::vector<float>& want = explanation.result[r];
    const std::vector<float>& got = run.buffers[r];
    if (got.size() != want.size()) {
      return absl::InternalError(absl::StrCat("rank ", r, ": the backend's buffer holds ",
                                              got.size(), " floats, the explanation's ",
                                              want.size()));
    }
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
        return absl::InternalError(absl::StrFormat(
            "rank %d element %d: the Gloo ring all-reduce gives %.9g, the explanation %.9g", r, i,
            got[i], want[i]));
      }
    }
    const int64_t sent = 4 * explanation.floats_sent[r];
    const int64_t received = 4 * explanation.floats_received[r];
    if (run.bytes_sent[r] != sent || run.bytes_received[r] != received) {
      return absl::InternalError(absl::StrCat(
          "rank ", r, ": the backend counted ", run.bytes_sent[r], " bytes sent and ",
          run.bytes_received[r], " received, the explanation ", sent, " and ", received));
    }
  }
  return absl::OkStatus();
}

std::string FormatRingExplanation(const RingExplanation& e) {
  const int w = e.world;
  const int64_t n = e.elements;
  std::string out =
      absl::StrCat("ring all-reduce (sum) of ", n, " floats over ", w, w == 1 ? " rank" : " ranks",
                   ", as ringside's Gloo backend runs it (--allreduce=ring)\n");
  absl::StrAppend(&out, "chunks: the vector is cut into ", w, " chunks, chunk c = elements [", n,
                  " c / ", w, ", ", n, " (c + 1) / ", w, ")\n");
  for (int c = 0; c < w; ++c) {
    const RingChunk chunk = RingChunkOf(n, w, c);
    absl::StrAppend(&out, "  ", ChunkName(chunk), ": ", chunk.count, " floats\n");
  }
  if (w > 1) {
    std::vector<std::string> ring;
    for (int r = 0; r < w; ++r) ring.push_back(absl::StrCat(r));
    absl::StrAppend(
        &out, "the ring: ", absl::StrJoin(ring, " -> "),
        " -> 0; each rank sends to its right neighbour and receives from its left one\n");
  }
  absl::StrAppend(&out, "\nstart (chunks separated by |):\n");
  for (int r = 0; r < w; ++r) {
    absl::StrAppend(&out, "  rank ", r, ": ", Buffer(e.inputs[r], w), "\n");
  }
  for (const RingStep& step : e.steps) {
    const bool reduce = step.phase == RingPhase::kReduceScatter;
    if (step.step == 0) {
      absl::StrAppend(
          &out, "\n", PhaseName(step.phase), ": ", w - 1, " steps; ",
          reduce ? "in each, every rank passes one chunk's running sum to the right and adds "
                   "the one it gets from the left to its own copy\n"
                 : "in each, every rank passes one finished chunk to the right and stores the "
                   "one it gets from the left\n");
    }
    absl::StrAppend(&out, "\n", PhaseName(step.phase), " step ", step.step + 1, " of ", w - 1,
                    ":\n");
    for (const RingRankStep& rs : step.ranks) {
      absl::StrAppend(&out, "  rank ", rs.rank, " sends chunk ", rs.sent.index, " ",
                      List(rs.sent_values), " to rank ", Mod(rs.rank + 1, w), "; gets chunk ",
                      rs.received.index, " from rank ", Mod(rs.rank - 1, w), ": ");
      if (reduce) {
        absl::StrAppend(&out, List(rs.old_values), " + ", List(rs.received_values), " = ",
                        List(rs.new_values), "\n");
      } else {
        absl::StrAppend(&out, List(rs.received_values), " replaces ", List(rs.old_values), "\n");
      }
    }
    absl::StrAppend(&out, "  after it:\n");
    for (int r = 0; r < w; ++r) {
      absl::StrAppend(&out, "    rank ", r, ": ", Buffer(step.buffers[r], w), "\n");
    }
    if (reduce && step.step == w - 2) {
      std::vector<std::string> holds;
      for (int r = 0; r < w; ++r) {
        holds.push_back(absl::StrCat("rank ", r, " chunk ", Mod(r + 1, w)));
      }
      absl::StrAppend(&out, "  each rank now holds the full sum of one chunk: ",
                      absl::StrJoin(holds, ", "), "\n");
    }
  }
  absl::StrAppend(&out, "\nresult: every rank holds the sum ", Buffer(e.result.front(), w), "\n");
  int64_t total = 0;
  for (int r = 0; r < w; ++r) total += e.floats_sent[r];
  absl::StrAppend(&out, "traffic: each rank sent 2(N-1) = ", 2 * (w - 1),
                  " chunks to its right neighbour and received as many from its left one:\n");
  for (int r = 0; r < w; ++r) {
    absl::StrAppend(&out, "  rank ", r, ": sent ", e.floats_sent[r], " floats (",
                    4 * e.floats_sent[r], " bytes), received ", e.floats_received[r], " floats (",
                    4 * e.floats_received[r], " bytes)\n");
  }
  if (w > 1) {
    absl::StrAppend(
        &out, absl::StrFormat("  on average %.2f floats per rank = 2(N-1)/N x %d: about twice "
                              "the vector, whatever N (a parameter server's single master would "
                              "receive N x %d = %d and send as many)\n",
                              static_cast<double>(total) / w, n, n, w * n));
  }
  return out;
}

std::vector<Frame> RingFrames(const RingExplanation& e) {
  const int w = e.world;
  const int64_t n = e.elements;
  // Ranks on an ellipse, rank 0 at the top, clockwise.
  constexpr double kCenterX = kFrameWidth / 2, kCenterY = 400, kRadiusX = 370, kRadiusY = 215;
  constexpr double kBoxWidth = 180;
  // Many ranks: tighter lines, and the ranks half a step round so that none sits at
  // the ellipse's flat left and right ends, where neighbours come closest.
  const double line_height = w >= 6 ? 11 : 13;
  const double box_height = 24 + line_height * w;
  const double turn = w >= 6 ? 0.5 : 0;
  auto boxes = [&](const std::vector<std::vector<float>>& data, const RingStep* step) {
    std::vector<FrameBox> out;
    for (int r = 0; r < w; ++r) {
      const double angle = 2 * M_PI * (r + turn) / w - M_PI / 2;
      FrameBox box;
      box.title = absl::StrCat("rank ", r);
      box.width = kBoxWidth;
      box.height = box_height;
      box.line_height = line_height;
      box.x = kCenterX + kRadiusX * std::cos(angle) - kBoxWidth / 2;
      box.y = kCenterY + kRadiusY * std::sin(angle) - box_height / 2;
      for (int c = 0; c < w; ++c) {
        const RingChunk chunk = RingChunkOf(n, w, c);
        std::string mark = "  ";
        if (step != nullptr && step->ranks[r].received.index == c) {
          mark = step->phase == RingPhase::kReduceScatter ? "+=" : "<-";
        } else if (step != nullptr && step->ranks[r].sent.index == c) {
          mark = "->";
        }
        box.lines.push_back(absl::StrCat(mark, "c", c, " ",
                                         List(Values(data[r], chunk), kFrameValues, ShortNumber)));
      }
      out.push_back(std::move(box));
    }
    return out;
  };
  std::vector<Frame> frames;
  Frame start;
  start.title = absl::StrCat("start: ", w, " ranks, ", n, " floats each, ", w, " chunks");
  start.caption = {absl::StrCat("chunk c = elements [", n, " c / ", w, ", ", n, " (c + 1) / ", w,
                                "); each rank sends to the next one clockwise"),
                   "next: reduce-scatter (running sums travel the ring), then all-gather"};
  start.boxes = boxes(e.inputs, nullptr);
  frames.push_back(std::move(start));
  for (const RingStep& step : e.steps) {
    const bool reduce = step.phase == RingPhase::kReduceScatter;
    Frame f;
    f.title = absl::StrCat(PhaseName(step.phase), " step ", step.step + 1, " of ", w - 1);
    f.caption.push_back(reduce
                            ? "each rank sends (->) one chunk's running sum to the right and adds "
                              "what it receives (+=) to its own copy"
                            : "each rank sends (->) one finished chunk to the right and stores "
                              "what it receives (<-)");
    if (reduce && step.step == w - 2) {
      f.caption.push_back("now rank r holds the full sum of chunk r + 1");
    } else if (!reduce && step.step == w - 2) {
      f.caption.push_back("done: every rank holds the whole sum");
    }
    f.boxes = boxes(step.buffers, &step);
    for (const RingRankStep& rs : step.ranks) {
      f.arrows.push_back({rs.rank, Mod(rs.rank + 1, w),
                          absl::StrCat("c", rs.sent.index, " ",
                                       List(rs.sent_values, kFrameValues / 2 + 1, ShortNumber))});
    }
    frames.push_back(std::move(f));
  }
  return frames;
}

}  // namespace ringside
