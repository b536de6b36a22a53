// `ringside collective OP --ranks=N --elements=E [--root=R]`: runs one collective for
// real on N ranks (threads of this process, each with its own Gloo group: local_ranks.h),
// prints every rank's buffer before and after and the bytes each rank moved, and checks
// the result against the collective's closed form (an error, exit status 1, if not).
//
// Inputs: rank r's element i is M r + i, M the smallest power of ten >= 10 that is at
// least the input's length, so that the rank can be read off the leading digits. The
// inputs of scatter, reduce-scatter and all-to-all hold ranks x E elements (scatter's on
// the root only); the others E.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ddp_ring/allreduce_algorithm.h"
#include "ddp_ring/local_ranks.h"
#include "ddp_ring/process_group.h"
#include "experiments/cli/flags.h"
#include "experiments/cli/verbs.h"

namespace ringside {
namespace {

// The most ranks (threads, each with a full mesh of TCP connections to the others).
constexpr int kMaxRanks = 64;
// The most floats all ranks' buffers of one kind may hold together (ranks x ranks x E
// for the collectives whose buffers hold every rank's slice): 512 MiB.
constexpr int64_t kMaxFloats = int64_t{1} << 27;
// Buffers longer than this are printed as their first and last kShownEachSide elements.
constexpr int64_t kShownInFull = 12;
constexpr int64_t kShownEachSide = 6;

enum class Kind {
  kBroadcast,
  kScatter,
  kGather,
  kReduce,
  kAllGather,
  kAllReduce,
  kReduceScatter,
  kAllToAll
};

struct OpInfo {
  const char* name;
  Kind kind;
  bool rooted;
};

// In the order the usage text lists them.
constexpr OpInfo kOps[] = {
    {"broadcast", Kind::kBroadcast, true},     {"scatter", Kind::kScatter, true},
    {"gather", Kind::kGather, true},           {"reduce", Kind::kReduce, true},
    {"all-gather", Kind::kAllGather, false},   {"all-reduce", Kind::kAllReduce, false},
    {"reduce-scatter", Kind::kReduceScatter, false}, {"all-to-all", Kind::kAllToAll, false},
};

std::string OpNames(absl::string_view separator) {
  std::vector<std::string> names;
  for (const OpInfo& op : kOps) names.push_back(op.name);
  return absl::StrJoin(names, separator);
}

// One rank's buffers. `in` is what the rank holds before (for the in-place collectives,
// broadcast, reduce and all-reduce, the initial value of `out`); `out` what it holds
// after. A rank without an input (scatter's non-roots) or an output (gather's) has
// has_in or has_out false and passes null.
struct RankBuffers {
  bool has_in = true;
  bool has_out = true;
  std::vector<float> in;
  std::vector<float> out;
  CollectiveBytes bytes;
};

struct Setup {
  OpInfo op;
  int ranks = 0;
  int64_t elements = 0;
  int root = 0;
  int64_t scale = 10;  // M of "M r + i".
  absl::Duration timeout;  // --timeout_s.
};

bool InPlace(Kind kind) {
  return kind == Kind::kBroadcast || kind == Kind::kReduce || kind == Kind::kAllReduce;
}

// Length of a rank's input: ranks x E where the input holds every rank's slice.
int64_t InputLength(const Setup& s) {
  const Kind k = s.op.kind;
  const bool sliced = k == Kind::kScatter || k == Kind::kReduceScatter || k == Kind::kAllToAll;
  return sliced ? s.ranks * s.elements : s.elements;
}

int64_t OutputLength(const Setup& s) {
  const Kind k = s.op.kind;
  const bool whole = k == Kind::kGather || k == Kind::kAllGather || k == Kind::kAllToAll;
  return whole ? s.ranks * s.elements : s.elements;
}

// Rank r's input element i.
double Input(const Setup& s, int r, int64_t i) { return static_cast<double>(s.scale * r + i); }

// The closed form: rank r's output element j.
double Expected(const Setup& s, int r, int64_t j) {
  const int64_t e = s.elements;
  // Sum over ranks of the inputs' element i, as the floats the ranks hold.
  auto sum = [&](int64_t i) {
    double total = 0;
    for (int q = 0; q < s.ranks; ++q) total += static_cast<float>(Input(s, q, i));
    return total;
  };
  switch (s.op.kind) {
    case Kind::kBroadcast: return Input(s, s.root, j);
    case Kind::kScatter: return Input(s, s.root, r * e + j);
    case Kind::kGather:
    case Kind::kAllGather: return Input(s, static_cast<int>(j / e), j % e);
    case Kind::kReduce: return r == s.root ? sum(j) : Input(s, r, j);
    case Kind::kAllReduce: return sum(j);
    case Kind::kReduceScatter: return sum(r * e + j);
    case Kind::kAllToAll: return Input(s, static_cast<int>(j / e), r * e + j % e);
  }
  return 0;
}

std::string Number(double v) { return absl::StrFormat("%.10g", v); }

// "[v0 v1 ...]", elided in the middle past kShownInFull elements.
std::string FormatBuffer(const std::vector<float>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  std::vector<std::string> parts;
  for (int64_t i = 0; i < n; ++i) {
    if (n > kShownInFull && i == kShownEachSide) {
      parts.push_back("...");
      i = n - kShownEachSide;
    }
    parts.push_back(Number(v[i]));
  }
  std::string text = absl::StrCat("[", absl::StrJoin(parts, " "), "]");
  if (n > kShownInFull) absl::StrAppend(&text, " (", n, " elements)");
  return text;
}

// "60 + 4i": the sum over ranks q of M q + (offset + i), as a formula in i.
std::string SumFormula(const Setup& s, const std::string& offset) {
  const int64_t w = s.ranks;
  const int64_t constant = s.scale * w * (w - 1) / 2;
  std::string variable = offset.empty() ? "i" : absl::StrCat("(", offset, " + i)");
  if (w > 1) variable = absl::StrCat(w, variable);
  return constant == 0 ? variable : absl::StrCat(constant, " + ", variable);
}

// What the output holds, one line, with E spelled out.
std::string ResultLine(const Setup& s) {
  const std::string e = absl::StrCat(s.elements);
  const std::string slice = absl::StrCat("[", e, "r, ", e, "r + ", e, ")");
  switch (s.op.kind) {
    case Kind::kBroadcast:
      return absl::StrCat("result: every rank holds the root's (rank ", s.root, ") buffer");
    case Kind::kScatter:
      return absl::StrCat("result: rank r holds elements ", slice, " of the root's (rank ", s.root,
                          ") buffer");
    case Kind::kGather:
      return absl::StrCat("result: the root (rank ", s.root,
                          ") holds every rank's buffer, in rank order; the others get no output");
    case Kind::kReduce:
      return absl::StrCat("result: the root (rank ", s.root, ") holds the sum over ranks: element i = ",
                          SumFormula(s, ""), "; the other ranks' buffers are left as they were");
    case Kind::kAllGather:
      return "result: every rank holds every rank's buffer, in rank order";
    case Kind::kAllReduce:
      return absl::StrCat("result: every rank holds the sum over ranks: element i = ", SumFormula(s, ""));
    case Kind::kReduceScatter:
      return absl::StrCat("result: rank r holds the sum over ranks of elements ", slice,
                          ": element i = ", SumFormula(s, absl::StrCat(e, "r")));
    case Kind::kAllToAll:
      return absl::StrCat("result: rank r's slice s (elements [", e, "s, ", e, "s + ", e,
                          ")) = rank s's slice r (a transpose of the ranks' slices)");
  }
  return "";
}

// Reads and checks the verb's words and flags (every error is a usage error).
absl::StatusOr<Setup> ParseSetup(const CommandArgs& args) {
  Setup s;
  const std::string& name = args.positional[0];
  const OpInfo* found = nullptr;
  for (const OpInfo& op : kOps) {
    if (name == op.name) found = &op;
  }
  if (found == nullptr) {
    return UsageError(
        absl::StrCat("unknown collective '", name, "' (expected one of: ", OpNames(", "), ")"));
  }
  s.op = *found;
  s.ranks = absl::GetFlag(FLAGS_ranks);
  s.elements = absl::GetFlag(FLAGS_elements);
  s.root = absl::GetFlag(FLAGS_root);
  if (s.ranks < 1) return UsageError(absl::StrCat("--ranks must be >= 1 (got ", s.ranks, ")"));
  if (s.ranks > kMaxRanks) {
    return UsageError(absl::StrCat("--ranks must be at most ", kMaxRanks, " (got ", s.ranks,
                                   "): each rank is a thread of this process"));
  }
  if (s.elements < 0) {
    return UsageError(absl::StrCat("--elements must be >= 0 (got ", s.elements, ")"));
  }
  if (s.elements > kMaxFloats / (int64_t{s.ranks} * s.ranks)) {
    return UsageError(absl::StrCat("--elements=", s.elements, " is too large for --ranks=", s.ranks,
                                   ": the ranks' buffers would hold ranks x ranks x elements > ",
                                   kMaxFloats, " floats"));
  }
  if (!s.op.rooted && args.flags_given.count("root") > 0) {
    return UsageError(absl::StrCat(s.op.name,
                                   " has no root (--root is for broadcast, scatter, gather and reduce)"));
  }
  if (s.root < 0 || s.root >= s.ranks) {
    return UsageError(absl::StrCat("--root=", s.root, " is not a rank: it must be in [0, ", s.ranks,
                                   ") with --ranks=", s.ranks));
  }
  const int timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (timeout_s < 1) return UsageError(absl::StrCat("--timeout_s must be >= 1 (got ", timeout_s, ")"));
  s.timeout = absl::Seconds(timeout_s);
  const int64_t longest = std::max<int64_t>(InputLength(s), 10);
  while (s.scale < longest) s.scale *= 10;
  return s;
}

// Rank r's buffers before the collective runs.
RankBuffers Prepare(const Setup& s, int r) {
  RankBuffers b;
  const Kind k = s.op.kind;
  b.has_in = k != Kind::kScatter || r == s.root;
  b.has_out = k != Kind::kGather || r == s.root;
  if (b.has_in) {
    b.in.resize(InputLength(s));
    for (int64_t i = 0; i < static_cast<int64_t>(b.in.size()); ++i) {
      b.in[i] = static_cast<float>(Input(s, r, i));
    }
  }
  if (InPlace(k)) {
    b.out = b.in;
  } else if (b.has_out) {
    // Unwritten elements stay NaN and fail the check.
    b.out.assign(OutputLength(s), std::numeric_limits<float>::quiet_NaN());
  }
  return b;
}

std::shared_ptr<Work> Issue(const Setup& s, ProcessGroup& pg, RankBuffers& b) {
  const int64_t e = s.elements;
  const float* in = b.has_in ? b.in.data() : nullptr;
  float* out = b.has_out ? b.out.data() : nullptr;
  switch (s.op.kind) {
    case Kind::kBroadcast: return pg.Broadcast(out, e, s.root);
    case Kind::kScatter: return pg.Scatter(in, out, e, s.root);
    case Kind::kGather: return pg.Gather(in, e, out, s.root);
    case Kind::kReduce: return pg.Reduce(out, e, ReduceOp::kSum, s.root);
    case Kind::kAllGather: return pg.AllGather(in, e, out);
    case Kind::kAllReduce: return pg.AllReduce(out, e, ReduceOp::kSum);
    case Kind::kReduceScatter: return pg.ReduceScatter(in, out, e, ReduceOp::kSum);
    case Kind::kAllToAll: return pg.AllToAll(in, out, e);
  }
  return nullptr;
}

// The first element of any rank's output that differs from the closed form (relative
// tolerance for sums of inputs too large to be exact in float), as an error.
absl::Status Check(const Setup& s, const std::vector<RankBuffers>& ranks) {
  for (int r = 0; r < s.ranks; ++r) {
    const RankBuffers& b = ranks[r];
    if (!b.has_out) continue;
    for (int64_t j = 0; j < static_cast<int64_t>(b.out.size()); ++j) {
      const double want = Expected(s, r, j);
      const double got = b.out[j];
      if (!(std::fabs(got - want) <= 1e-6 * s.ranks * std::fabs(want))) {
        return absl::InternalError(absl::StrCat("collective ", s.op.name, ": rank ", r, " element ", j,
                                                " is ", Number(got), ", the closed form says ",
                                                Number(want)));
      }
    }
  }
  return absl::OkStatus();
}

void PrintBuffers(const std::vector<RankBuffers>& ranks, bool after) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankBuffers& b = ranks[r];
    std::string text;
    if (after) {
      text = b.has_out ? FormatBuffer(b.out) : "(no output: only the root receives)";
    } else {
      text = b.has_in ? FormatBuffer(b.in) : "(no input: only the root's is read)";
    }
    absl::PrintF("  rank %d: %s\n", r, text);
  }
}

}  // namespace

absl::Status RunCollectiveVerb(const CommandArgs& args) {
  absl::StatusOr<Setup> setup = ParseSetup(args);
  if (!setup.ok()) return setup.status();
  const Setup& s = *setup;

  std::vector<RankBuffers> ranks;
  for (int r = 0; r < s.ranks; ++r) ranks.push_back(Prepare(s, r));
  std::vector<RankBuffers> before = ranks;

  ProcessGroupOptions options;
  options.timeout = s.timeout;
  std::string backend = "?";
  RINGSIDE_RETURN_IF_ERROR(RunLocalGlooRanks(s.ranks, options, [&](ProcessGroup& pg) {
    RankBuffers& mine = ranks[pg.rank()];
    if (pg.rank() == 0) backend = pg.backend();
    std::shared_ptr<Work> work = Issue(s, pg, mine);
    RINGSIDE_RETURN_IF_ERROR(work->Wait());
    mine.bytes = work->bytes();
    return absl::OkStatus();
  }));

  std::string header = absl::StrCat("collective ", s.op.name, ": ", s.ranks, s.ranks == 1 ? " rank" : " ranks",
                                    ", ", s.elements, s.elements == 1 ? " element" : " elements",
                                    " per rank, backend ", backend);
  if (s.op.rooted) absl::StrAppend(&header, ", root ", s.root);
  if (s.op.kind == Kind::kAllReduce) {
    absl::StrAppend(&header, ", algorithm ",
                    AllReduceAlgorithmName(ResolveAllReduceAlgorithm(
                        options.algorithm, s.ranks, s.elements * static_cast<int64_t>(sizeof(float)))));
  }
  absl::PrintF("%s (ranks are threads of this process)\n", header);
  std::string inputs = absl::StrCat("inputs: rank r holds ", s.scale, "r + i at element i");
  if (InputLength(s) != s.elements) {
    absl::StrAppend(&inputs, " (", s.ranks, " x ", s.elements, " = ", InputLength(s),
                    " elements: one slice of ", s.elements, " per rank",
                    s.op.kind == Kind::kScatter ? ", on the root only)" : ")");
  }
  absl::PrintF("%s\n%s\n", inputs, ResultLine(s));
  absl::PrintF("before:\n");
  PrintBuffers(before, /*after=*/false);
  absl::PrintF("after:\n");
  PrintBuffers(ranks, /*after=*/true);
  absl::PrintF("bytes (payload each rank handed to and took from the transport):\n");
  CollectiveBytes total;
  for (int r = 0; r < s.ranks; ++r) {
    absl::PrintF("  rank %d: sent %d, received %d\n", r, ranks[r].bytes.sent, ranks[r].bytes.received);
    total += ranks[r].bytes;
  }
  absl::PrintF("  total: sent %d, received %d\n", total.sent, total.received);
  RINGSIDE_RETURN_IF_ERROR(Check(s, ranks));
  absl::PrintF("check: every rank's buffer matches the closed form\n");
  return absl::OkStatus();
}

}  // namespace ringside
