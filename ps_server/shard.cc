#include "ps_server/shard.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <tuple>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/ops_factory.h"
#include "common/sgd.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

// How often blocked waits look at the job-wide abort flag.
constexpr absl::Duration kPoll = absl::Milliseconds(50);

// Floats of a received gradient handled at a time (8 KiB: stays in L1 between the
// copy out of the received buffers and the arithmetic).
constexpr int64_t kGradientBlock = 2048;

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

// Elastic PS, ChunkState::from: a worker there from the start counts in every step; a
// lost (or not yet rejoined) worker in none.
constexpr int64_t kFromStart = std::numeric_limits<int64_t>::min();
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

}  // namespace

// Everything of one chunk that its lock guards (besides its ranges of params_ and
// accumulator_).
struct Shard::ChunkState {
  ChunkState(int num_workers, std::unique_ptr<Ops> chunk_ops)
      : clock(num_workers, 0),
        ops(std::move(chunk_ops)),
        has_parked(num_workers, false),
        parked(num_workers),
        from(num_workers, kFromStart) {}
  absl::Mutex mu;
  ChunkClock clock ABSL_GUARDED_BY(mu);  // Changed only by the policy (and the start).
  // This chunk's own backend and optimizer (over the chunk's floats): neither is
  // thread-safe, and chunks are stepped in parallel.
  const std::unique_ptr<Ops> ops;
  std::optional<Sgd> sgd ABSL_GUARDED_BY(mu);
  // Summing pushes (BSP, several workers), in a fixed order: the accumulator holds
  // g_0 + g_1 + ... + g_{next_sum - 1} of the chunk's current step, added left to right
  // in worker-id order, whatever the order of arrival. A worker whose turn has not come
  // (a lower id is missing) is parked: its gradient is copied to parked[w]
  // (has_parked[w]), and added when the gap closes. The sum is thus the same float
  // sequence every run. parked[w] is allocated at w's first early arrival and kept.
  // Elastic PS: the order skips the workers that do not count in the step (lost ones,
  // see `from`); a rejoined worker whose turn had passed when it began to count is
  // added on arrival (that one step's sum is not in id order).
  int next_sum ABSL_GUARDED_BY(mu) = 0;
  std::vector<bool> has_parked ABSL_GUARDED_BY(mu);
  std::vector<std::vector<float>> parked ABSL_GUARDED_BY(mu);
  bool summed_any ABSL_GUARDED_BY(mu) = false;  // The accumulator holds a push of the step.
  int contributors ABSL_GUARDED_BY(mu) = 0;     // Pushes of the step summed or parked.
  // Elastic PS: per worker, the first step whose pushes of this chunk count
  // (kFromStart; a rejoin's step; kNever while lost). A worker counts in step s iff
  // from <= s, or it pushed s before it was lost.
  std::vector<int64_t> from ABSL_GUARDED_BY(mu);
};

struct Shard::StepRecord {
  int64_t start_us = 0;        // First gradient byte of the step arrived.
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;
  int pushes_done = 0;         // Workers whose whole push of the step arrived.
  int64_t chunks_served = 0;   // Parameter chunks of step + 1 sent back.
  int64_t first_push_done_us = 0;
  int64_t last_push_done_us = 0;
  int late_worker = 0;         // Whose complete push came last (so far).
  double aggregate_ms = 0;
  double update_ms = 0;
  int queue_depth = 0;
};

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const PsShardOptions& options) {
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--workers must be >= 1, got ", options.num_workers));
  }
  if (options.num_shards < 1 || options.shard < 0 || options.shard >= options.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", options.shard, " is outside [0, ",
                                                   options.num_shards, ")"));
  }
  RINGSIDE_ASSIGN_OR_RETURN(int64_t chunk_floats, ChunkFloats(options.chunk_bytes));
  // The optimizer's hyper-parameters are checked now, not at the first registration.
  // The shard's slice lives in host memory: its ops are always the CPU backend.
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> probe_ops, NewOps("cpu", 0, 0));
  RINGSIDE_RETURN_IF_ERROR(Sgd::Create(options.hyper, 0, probe_ops.get()).status());
  return std::unique_ptr<Shard>(new Shard(options, chunk_floats));
}

Shard::Shard(const PsShardOptions& options, int64_t chunk_floats)
    : options_(options),
      chunk_floats_(chunk_floats),
      policy_(ConsistencyPolicy::Create(options.sync, options.num_workers)) {
  last_activity_us_.store(NowUs());
  totals_.set_shard(options.shard);
  const int n = std::max(options.num_workers, 0);
  lost_.assign(n, false);
  joining_.assign(n, false);
  join_step_.assign(n, kFromStart);
  barrier_base_.assign(n, 0);
}

Shard::~Shard() = default;

int64_t Shard::num_chunks() const {
  absl::MutexLock l(&mu_);
  return static_cast<int64_t>(chunks_.size());
}

Slice Shard::slice() const {
  absl::MutexLock l(&mu_);
  return slice_;
}

absl::Status Shard::health() {
  if (!aborted_.load()) return absl::OkStatus();
  return AbortedStatus();
}

absl::Status Shard::AbortedStatus() {
  absl::MutexLock l(&mu_);
  return absl::AbortedError(abort_reason_);
}

absl::Status Shard::Abort(const std::string& why) {
  absl::MutexLock l(&mu_);
  if (!aborted_.load()) {
    abort_reason_ = absl::StrCat("shard ", options_.shard, ": ", why, "; job aborted");
    aborted_.store(true);
  }
  return absl::AbortedError(abort_reason_);
}

namespace {

// The one reply to every registration refused for its contents: it tells a caller
// nothing about the shard's configuration.
constexpr char kConfigMismatch[] = "configuration mismatch";

// A session number no other process can guess: 64 bits from the OS's entropy source
// (never 0, which means "absent" on the wire).
uint64_t NewSession() {
  std::random_device entropy;
  uint64_t session = 0;
  while (session == 0) {
    session = (static_cast<uint64_t>(entropy()) << 32) ^ static_cast<uint64_t>(entropy());
  }
  return session;
}

}  // namespace

absl::Status Shard::Register(const ps::RegisterRequest& r, ps::RegisterResponse* response) {
  const int n = options_.num_workers;
  if (r.worker_id() < 0 || r.worker_id() >= n) {
    return absl::InvalidArgumentError(absl::StrCat("unknown worker id ", r.worker_id()));
  }
  // What differs goes to the shard's own stderr (its operator), never to the caller.
  std::string mismatch;
  if (r.num_workers() != n) {
    mismatch = absl::StrCat("worker ", r.worker_id(), " expects ", r.num_workers(),
                            " workers, the server has ", n);
  } else if (r.model() != options_.model) {
    mismatch = absl::StrCat("worker ", r.worker_id(), " runs model '", r.model(),
                            "', the server serves '", options_.model, "'");
  } else if (absl::Status same = CheckSameConfig(options_.config,
                                                  absl::StrCat("shard ", options_.shard),
                                                  r.config(), absl::StrCat("worker ", r.worker_id()));
             !same.ok()) {
    mismatch = std::string(same.message());
  }
  if (!mismatch.empty()) {
    absl::FPrintF(stderr, "ps: shard %d: refused a registration: %s\n", options_.shard, mismatch);
    return absl::FailedPreconditionError(kConfigMismatch);
  }
  RINGSIDE_RETURN_IF_ERROR(health());
  absl::MutexLock l(&mu_);
  if (num_params_ < 0) {
    RINGSIDE_RETURN_IF_ERROR(ValidateSharding(r.num_params(), options_.num_shards));
    num_params_ = r.num_params();
    slice_ = ShardSlice(num_params_, options_.shard, options_.num_shards);
    params_.assign(slice_.size, 0.0f);
    accumulator_.assign(policy_->sums_pushes() ? slice_.size : 0, 0.0f);
    const int64_t k = NumChunks(slice_.size, chunk_floats_);
    for (int64_t i = 0; i < k; ++i) {
      RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 0));
      auto c = std::make_unique<ChunkState>(n, std::move(ops));
      absl::MutexLock cl(&c->mu);
      absl::StatusOr<Sgd> sgd =
          Sgd::Create(options_.hyper, ChunkOf(slice_.size, chunk_floats_, i).size, c->ops.get());
      if (!sgd.ok()) return sgd.status();
      c->sgd.emplace(std::move(*sgd));
      chunks_.push_back(std::move(c));
    }
    registered_.assign(n, false);
    sessions_.assign(n, 0);
    barriers_passed_.assign(n, 0);
    goodbye_.assign(n, false);
    clock_.assign(n, 0);
    pushed_in_step_.assign(n, 0);
    init_received_.assign(k, false);
  } else if (r.num_params() != num_params_) {
    absl::FPrintF(stderr,
                  "ps: shard %d: refused a registration: worker %d's model has %d parameters, "
                  "worker(s) before it registered %d\n",
                  options_.shard, r.worker_id(), r.num_params(), num_params_);
    return absl::FailedPreconditionError(kConfigMismatch);
  }
  const int w = r.worker_id();
  // Elastic PS: a lost worker registers again (a new session); it counts again once
  // its first PARAMS pull makes it rejoin (Rejoin).
  const bool rejoin = elastic() && lost_[w] && !joining_[w];
  if (registered_[w] && !rejoin) {
    return absl::AlreadyExistsError(absl::StrCat("worker id ", w, " is registered already"));
  }
  registered_[w] = true;
  sessions_[w] = NewSession();
  int64_t newest = start_step_;  // The newest step of the chunks' parameters.
  if (rejoin) {
    joining_[w] = true;
    goodbye_[w] = false;
    barriers_passed_[w] = 0;
    barrier_base_[w] = -1;
    for (auto& ch : chunks_) {
      absl::MutexLock cl(&ch->mu);
      newest = std::max(newest, ch->clock.version);
    }
    absl::FPrintF(stderr, "ps: shard %d: worker %d registered again (rejoins at step %d or later)\n",
                  options_.shard, w, newest);
  }
  response->set_shard(options_.shard);
  response->set_num_shards(options_.num_shards);
  response->set_offset(slice_.offset);
  response->set_size(slice_.size);
  response->set_chunk_floats(chunk_floats_);
  response->set_sync(SyncModeName(policy_->sync().mode));
  response->set_staleness(policy_->sync().staleness);
  response->set_initialized(initialized_);
  response->set_step(newest);
  response->set_session(sessions_[w]);
  response->set_rejoin(rejoin);
  return absl::OkStatus();
}

absl::Status Shard::CheckWorker(int w) const {
  absl::MutexLock l(&mu_);
  if (w < 0 || w >= options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown worker id ", w, " (workers are 0..", options_.num_workers - 1, ")"));
  }
  if (num_params_ < 0 || !registered_[w]) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", w, " has not registered"));
  }
  return absl::OkStatus();
}

absl::Status Shard::CheckSession(int w, uint64_t session) const {
  RINGSIDE_RETURN_IF_ERROR(CheckWorker(w));
  absl::MutexLock l(&mu_);
  // One 64-bit integer comparison (no early exit on a differing byte, so nothing to
  // time); a wrong guess is one refused call among 2^64.
  if (session != sessions_[w]) {
    return absl::PermissionDeniedError(
        absl::StrCat("call for worker ", w, " without its session (not the registered worker)"));
  }
  if (goodbye_[w]) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", w, " said goodbye already"));
  }
  if (lost_[w] && !joining_[w]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", w, " was dropped from the job (lost); start it again to rejoin"));
  }
  return absl::OkStatus();
}

namespace {

ChunkHeader HeaderOf(const ps::Chunk& chunk) {
  ChunkHeader h;
  h.worker_id = chunk.worker_id();
  h.step = chunk.step();
  h.kind = chunk.kind();
  h.offset = chunk.offset();
  return h;
}

}  // namespace

absl::StatusOr<int64_t> Shard::CheckChunk(const ps::Chunk& chunk, int expected_worker) const {
  return CheckChunk(HeaderOf(chunk), chunk.data().size(), expected_worker);
}

absl::StatusOr<int64_t> Shard::CheckChunk(const ChunkHeader& chunk, size_t payload_bytes,
                                          int expected_worker) const {
  const int w = chunk.worker_id;
  RINGSIDE_RETURN_IF_ERROR(CheckWorker(w));
  absl::MutexLock l(&mu_);
  if (expected_worker >= 0 && w != expected_worker) {
    return absl::InvalidArgumentError(absl::StrCat("chunk from worker ", w, " in worker ",
                                                   expected_worker, "'s stream"));
  }
  if (chunk.kind != ps::GRADIENTS && chunk.kind != ps::PARAMS &&
      chunk.kind != ps::OPTIMIZER_STATE) {
    return absl::InvalidArgumentError(absl::StrCat("unknown tensor kind ", chunk.kind));
  }
  if (chunk.offset < 0 || chunk.offset >= slice_.size) {
    return absl::OutOfRangeError(absl::StrCat("chunk offset ", chunk.offset,
                                              " outside the shard's ", slice_.size, " floats"));
  }
  const int64_t k = ChunkIndexAt(slice_.size, chunk_floats_, chunk.offset);
  if (k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("chunk offset ", chunk.offset,
                                                   " is not on the ", chunk_floats_, "-float grid"));
  }
  const Slice c = ChunkOf(slice_.size, chunk_floats_, k);
  const int64_t expected = c.size * static_cast<int64_t>(sizeof(float));
  if (static_cast<int64_t>(payload_bytes) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", k, " carries ", payload_bytes,
                                                   " bytes, expected ", expected));
  }
  if (chunk.step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative step ", chunk.step));
  }
  return k;
}

absl::Status Shard::Accept(ps::Chunk* chunk, int64_t wire_bytes) {
  RINGSIDE_RETURN_IF_ERROR(CheckChunk(*chunk, -1).status());
  return Accept(HeaderOf(*chunk), reinterpret_cast<float*>(chunk->mutable_data()->data()),
                wire_bytes);
}

absl::StatusOr<int64_t> Shard::CheckAccept(const ChunkHeader& header,
                                            std::optional<size_t> payload_bytes) {
  RINGSIDE_RETURN_IF_ERROR(health());
  {
    absl::MutexLock l(&mu_);
    if (num_params_ < 0) return absl::FailedPreconditionError("no worker has registered");
  }
  if (!payload_bytes.has_value()) {
    // The caller checked the payload's length: take the length of the chunk the
    // header names, so that only the header is checked (again) here.
    const int64_t size = static_cast<int64_t>(params_.size());
    const int64_t at = ChunkIndexAt(size, chunk_floats_, header.offset);
    payload_bytes = ChunkOf(size, chunk_floats_, at >= 0 ? at : 0).size * sizeof(float);
  }
  return CheckChunk(header, *payload_bytes, -1);
}

absl::Status Shard::Accept(const ChunkHeader& header, float* payload, int64_t wire_bytes) {
  RINGSIDE_ASSIGN_OR_RETURN(int64_t index, CheckAccept(header, std::nullopt));
  if (header.kind == ps::GRADIENTS) {
    const float* in = payload;
    return AcceptGradient(
        header, [&in, payload]() { in = payload; },
        [&in](float* dst, size_t n) {
          std::memcpy(dst, in, n * sizeof(float));
          in += n;
          return n;
        },
        index, wire_bytes);
  }
  return AcceptInit(header, payload, index, wire_bytes);
}

absl::Status Shard::Accept(const ChunkHeader& header, const WireChunk& chunk) {
  // The payload's length is checked against the chunk before anything is copied.
  RINGSIDE_ASSIGN_OR_RETURN(int64_t index, CheckAccept(header, chunk.payload_size()));
  if (header.kind != ps::GRADIENTS) {
    // Initialisation is not on the hot path: through a contiguous copy.
    std::vector<float> payload(chunk.payload_size() / sizeof(float));
    chunk.CopyPayloadTo(payload.data());
    return AcceptInit(header, payload.data(), index, chunk.wire_bytes());
  }
  std::optional<WireChunk::PayloadReader> reader;
  reader.emplace(chunk);
  return AcceptGradient(
      header, [&reader, &chunk]() { reader.emplace(chunk); },
      [&reader](float* dst, size_t n) { return reader->Read(dst, n * sizeof(float)) / sizeof(float); },
      index, chunk.wire_bytes());
}

absl::Status Shard::AcceptInit(const ChunkHeader& h, const float* data, int64_t k,
                               int64_t wire_bytes) {
  const int w = h.worker_id;
  absl::MutexLock l(&mu_);
  if (w != 0) {
    return absl::PermissionDeniedError(absl::StrCat("worker ", w, " may not set parameters or "
                                                    "optimizer state (worker 0 initialises)"));
  }
  if (gradients_seen_) {
    return absl::FailedPreconditionError("initialisation after training started");
  }
  const Slice c = ChunkOf(slice_.size, chunk_floats_, k);
  totals_.set_bytes_in(totals_.bytes_in() + wire_bytes);
  if (h.kind == ps::OPTIMIZER_STATE) {
    absl::MutexLock cl(&chunks_[k]->mu);
    return chunks_[k]->sgd->LoadStateRange(0, absl::MakeConstSpan(data, c.size));
  }
  if (init_chunks_ > 0 && h.step != init_step_) {
    return absl::InvalidArgumentError(absl::StrCat("initial parameters of step ", h.step,
                                                   " mixed with step ", init_step_));
  }
  init_step_ = h.step;
  {
    absl::MutexLock cl(&chunks_[k]->mu);  // Readers of the chunk hold only its lock.
    std::memcpy(params_.data() + c.offset, data, c.size * sizeof(float));
  }
  if (!init_received_[k]) {
    init_received_[k] = true;
    ++init_chunks_;
  }
  if (!initialized_ && init_chunks_ == static_cast<int64_t>(chunks_.size())) {
    start_step_ = h.step;
    for (auto& ch : chunks_) {
      absl::MutexLock cl(&ch->mu);
      ch->clock.version = start_step_;
    }
    std::fill(clock_.begin(), clock_.end(), start_step_);
    initialized_ = true;
  }
  return absl::OkStatus();
}

namespace {

// The index of the first non-finite float of x[0, n), or -1. The common case (none)
// is one branch-free integer pass that vectorises: a float is NaN or infinite iff its
// exponent bits are all ones, and then (bits & kExp) + 2^23 carries into bit 31. (A
// float sum such as x * 0 would be a serial dependency chain: several times slower.)
int64_t FirstNonFinite(const float* x, int64_t n) {
  constexpr uint32_t kExp = 0x7f800000u;
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    any |= (bits & kExp) + 0x00800000u;
  }
  if ((any & 0x80000000u) == 0) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

}  // namespace

absl::Status Shard::AcceptGradient(const ChunkHeader& h, const std::function<void()>& rewind,
                                   BlockSource next, int64_t k, int64_t wire_bytes) {
  const int w = h.worker_id;
  const int64_t step = h.step;
  int64_t slice_offset;
  {
    absl::MutexLock l(&mu_);
    slice_offset = slice_.offset;
    if (!initialized_) {
      return absl::FailedPreconditionError("gradients before worker 0 initialised the parameters");
    }
    if (lost_[w]) {  // Elastic PS.
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", w, " was dropped from the job (lost); push refused"));
    }
    // Every mode: a worker pushes the steps in order, each completely (under BSP a
    // worker cannot pull step t + 1, so cannot compute it, before finishing step t).
    if (step != clock_[w]) {
      return absl::FailedPreconditionError(absl::StrCat("worker ", w, " pushed step ", step,
                                                        ", its current step is ", clock_[w]));
    }
  }
  const Slice c = ChunkOf(static_cast<int64_t>(params_.size()), chunk_floats_, k);
  float block[kGradientBlock];
  // Reads the payload front to back in L1-sized blocks: apply(at, len) for each.
  const auto for_each_block = [&](const auto& apply) {
    for (int64_t done = 0; done < c.size;) {
      const int64_t got = static_cast<int64_t>(
          next(block, static_cast<size_t>(std::min(kGradientBlock, c.size - done))));
      // CheckChunk fixed the payload's length before this call.
      ABSL_RAW_CHECK(got > 0, "gradient payload shorter than its chunk");
      apply(done, got);
      done += got;
    }
  };
  // Numerical safety: a gradient with a NaN or an infinity is refused before anything
  // is applied (a sum or an SGD step cannot be undone), by one read of the payload that
  // stays in L1 and a branch-free test per block.
  int64_t bad = -1;
  float bad_value = 0.0f;
  for_each_block([&](int64_t at, int64_t len) {
    if (bad >= 0) return;
    const int64_t i = FirstNonFinite(block, len);
    if (i >= 0) {
      bad = at + i;
      bad_value = block[i];
    }
  });
  if (bad >= 0) {
    const int64_t first = slice_offset + c.offset;
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %d pushed a non-finite gradient in step %d: elements [%d, %d) of the "
        "parameters (first at %d: %g); push refused, nothing applied",
        w, step, first, first + c.size, first + bad, bad_value));
  }
  rewind();
  {
    absl::MutexLock l(&mu_);
    gradients_seen_ = true;
  }
  float* params = params_.data() + c.offset;
  ChunkState& cs = *chunks_[k];
  TraceInterval aggregate, update;  // Empty when not done.
  {
    absl::MutexLock cl(&cs.mu);
    if (cs.from[w] > step) {
      // Elastic PS: dropped after the check above (a push racing its loss).
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", w, " was dropped from the job (lost); push refused"));
    }
    RINGSIDE_ASSIGN_OR_RETURN(const PushAction action, policy_->OnPush(w, step, k, &cs.clock));
    // The gradient arrives in blocks that stay in L1 (the received payload is never
    // copied whole); each block is stepped or summed where it belongs. SGD is
    // element-wise, so stepping block by block equals stepping the chunk at once.
    int64_t t = NowUs();
    if (!action.sum) {
      // The push is the update.
      for_each_block([&](int64_t at, int64_t len) {
        if (action.scale != 1.0f) cs.ops->Scale(block, len, action.scale);
        cs.sgd->StepRange(at, len, params + at, block);
      });
      update = {t, NowUs()};
    } else {
      // In worker-id order (ChunkState::next_sum): the same sum every run.
      float* acc = accumulator_.data() + c.offset;
      AdvanceSum(cs, k, step, /*complete=*/false);  // Past workers that do not count.
      if (w <= cs.next_sum) {
        // Its turn (or, for a rejoined worker, past it: added on arrival).
        const bool first = !cs.summed_any;
        for_each_block([&](int64_t at, int64_t len) {
          if (first) {
            std::memcpy(acc + at, block, len * sizeof(float));
          } else {
            cs.ops->Axpy(len, 1.0f, block, acc + at);
          }
        });
        cs.summed_any = true;
        if (w == cs.next_sum) ++cs.next_sum;
      } else {
        std::vector<float>& slot = cs.parked[w];
        slot.resize(c.size);
        for_each_block([&](int64_t at, int64_t len) {
          std::memcpy(slot.data() + at, block, len * sizeof(float));
        });
        cs.has_parked[w] = true;
      }
      ++cs.contributors;
      // The workers parked behind w follow, in order, up to the next gap; the push that
      // completes the step (every worker that counts is in) steps SGD.
      update = AdvanceSum(cs, k, step, action.complete);
      aggregate = {t, update.end_us > update.start_us ? update.start_us : NowUs()};
    }
  }
  if (options_.trace != nullptr) TraceChunk(w, step, k, wire_bytes, aggregate, update);
  absl::MutexLock l(&mu_);
  StepRecord& r = Record(step);
  r.bytes_in += wire_bytes;
  r.queue_depth = std::max(r.queue_depth, active_streams_.load());
  r.aggregate_ms += (aggregate.end_us - aggregate.start_us) / 1e3;
  r.update_ms += (update.end_us - update.start_us) / 1e3;
  if (++pushed_in_step_[w] == static_cast<int64_t>(chunks_.size())) {
    // Worker w's whole push of `step` is here: its clock advances.
    pushed_in_step_[w] = 0;
    clock_[w] = step + 1;
    const int64_t now = NowUs();
    if (r.pushes_done++ == 0) r.first_push_done_us = now;
    r.last_push_done_us = now;
    r.late_worker = w;
    MaybeFinishRecord(step);
  }
  return absl::OkStatus();
}

TraceInterval Shard::AdvanceSum(ChunkState& cs, int64_t k, int64_t step, bool complete) {
  const int n = options_.num_workers;
  const Slice c = ChunkOf(static_cast<int64_t>(params_.size()), chunk_floats_, k);
  float* acc = accumulator_.data() + c.offset;
  while (cs.next_sum < n) {
    const int u = cs.next_sum;
    if (cs.has_parked[u]) {
      if (cs.summed_any) {
        cs.ops->Axpy(c.size, 1.0f, cs.parked[u].data(), acc);
      } else {
        std::memcpy(acc, cs.parked[u].data(), c.size * sizeof(float));
      }
      cs.summed_any = true;
      cs.has_parked[u] = false;
    } else if (cs.from[u] <= step || cs.clock.pushed[u] == step) {
      break;  // u counts in the step and has not pushed: a gap.
    }
    ++cs.next_sum;
  }
  if (!complete) return {};
  ABSL_RAW_CHECK(cs.next_sum == n, "a complete chunk with a worker not summed");
  const int64_t t = NowUs();
  // Workers scale their loss by 1/N: the sum of N pushes is the mean gradient. Fewer
  // contributors (elastic PS): the mean over those that pushed.
  if (cs.contributors != n && cs.contributors > 0) {
    cs.ops->Scale(acc, c.size, static_cast<float>(n) / static_cast<float>(cs.contributors));
  }
  cs.sgd->StepRange(0, c.size, params_.data() + c.offset, acc);
  cs.next_sum = 0;
  cs.summed_any = false;
  cs.contributors = 0;
  CountParticipants(cs);
  return {t, NowUs()};
}

void Shard::CountParticipants(ChunkState& cs) {
  int count = 0;
  for (size_t u = 0; u < cs.from.size(); ++u) {
    if (cs.from[u] <= cs.clock.version || cs.clock.pushed[u] == cs.clock.version) ++count;
  }
  cs.clock.participants = count;
}

int Shard::live_workers() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(std::count(lost_.begin(), lost_.end(), false));
}

absl::Status Shard::Lose(const std::vector<int>& workers, const std::string& why,
                         uint64_t session) {
  const int n = options_.num_workers;
  std::vector<int> dropped;
  int live = 0;
  {
    absl::MutexLock l(&mu_);
    if (aborted_.load()) return absl::AbortedError(abort_reason_);
    for (int w : workers) {
      if (w < 0 || w >= n) continue;
      if (session != 0 && !sessions_.empty() && session != sessions_[w]) continue;  // Stale.
      if (joining_[w]) {
        // Registered again and lost before it rejoined: it did not count anyway.
        joining_[w] = false;
        continue;
      }
      if (lost_[w]) continue;  // Dropped already.
      dropped.push_back(w);
    }
    if (dropped.empty()) return absl::OkStatus();
    live = static_cast<int>(std::count(lost_.begin(), lost_.end(), false)) -
           static_cast<int>(dropped.size());
    std::vector<int> all_lost = dropped;
    for (int w = 0; w < n; ++w) {
      if (lost_[w]) all_lost.push_back(w);
    }
    std::sort(all_lost.begin(), all_lost.end());
    const int m = options_.config.ps_min_workers();
    std::string abort;
    if (!elastic()) {
      abort = why;
    } else if (dropped.front() == 0) {
      abort = absl::StrCat(why, "; worker 0 initialises the shards and writes the checkpoints: "
                                "the job cannot go on without it (--ps_min_workers)");
    } else if (live < m) {
      abort = absl::StrCat(why, "; lost worker(s) ", absl::StrJoin(all_lost, ", "), ": ", live,
                           " live worker(s) left, fewer than --ps_min_workers=", m);
    }
    if (!abort.empty()) {
      mu_.Unlock();
      absl::Status s = Abort(abort);
      mu_.Lock();
      return s;
    }
    for (int w : dropped) lost_[w] = true;
    absl::FPrintF(stderr,
                  "ps: shard %d: worker(s) %s dropped (%s); going on with %d live worker(s) "
                  "(--ps_min_workers=%d)\n",
                  options_.shard, absl::StrJoin(dropped, ", "), why, live, m);
    // The chunks' steps stop waiting for them; a step they already pushed (in part)
    // keeps those pushes.
    for (int64_t k = 0; k < static_cast<int64_t>(chunks_.size()); ++k) {
      ChunkState& cs = *chunks_[k];
      absl::MutexLock cl(&cs.mu);
      bool fewer = false;
      for (int w : dropped) {
        if (cs.from[w] <= cs.clock.version && cs.clock.pushed[w] != cs.clock.version) fewer = true;
        cs.from[w] = kNever;
      }
      if (!fewer) continue;
      const int64_t step = cs.clock.version;
      CountParticipants(cs);
      const bool complete = policy_->CompleteIfDue(&cs.clock);
      AdvanceSum(cs, k, step, complete);
    }
    std::vector<int64_t> open;
    for (const auto& [step, r] : records_) open.push_back(step);
    for (int64_t step : open) MaybeFinishRecord(step);
  }
  return absl::OkStatus();
}

absl::Status Shard::Rejoin(int w, int64_t step) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  absl::MutexLock l(&mu_);
  if (!elastic() || w < 0 || w >= options_.num_workers || registered_.empty()) {
    return absl::OkStatus();
  }
  // A rejoined worker that has pushed nothing since may move to a later step (another
  // shard was past the first one it tried).
  const bool joining = joining_[w];
  const bool moving = !joining && !lost_[w] && join_step_[w] != kFromStart &&
                      clock_[w] == join_step_[w] && pushed_in_step_[w] == 0 &&
                      step > join_step_[w];
  if (!joining && !moving) return absl::OkStatus();
  if (!initialized_) return absl::FailedPreconditionError("rejoin before the shard was initialised");
  // Every chunk, locked in index order, is at `step` or before: none has summed a push
  // of `step` without this worker being counted... except at `step` itself, where a
  // late arrival is summed on arrival (AcceptGradient).
  std::vector<std::unique_ptr<absl::MutexLock>> locks;
  for (auto& ch : chunks_) locks.push_back(std::make_unique<absl::MutexLock>(&ch->mu));
  for (size_t k = 0; k < chunks_.size(); ++k) {
    if (chunks_[k]->clock.version > step) {
      return absl::OutOfRangeError(absl::StrCat("worker ", w, " cannot rejoin at step ", step,
                                                ": chunk ", k, " is at step ",
                                                chunks_[k]->clock.version, " (pull a later step)"));
    }
  }
  for (int64_t k = 0; k < static_cast<int64_t>(chunks_.size()); ++k) {
    ChunkState& cs = *chunks_[k];
    if (moving && cs.from[w] <= cs.clock.version) {
      // No longer counted in the step it was to rejoin at.
      const int64_t at = cs.clock.version;
      cs.from[w] = kNever;
      CountParticipants(cs);
      AdvanceSum(cs, k, at, policy_->CompleteIfDue(&cs.clock));
    }
    cs.from[w] = step;
    CountParticipants(cs);
  }
  locks.clear();
  lost_[w] = false;
  joining_[w] = false;
  join_step_[w] = step;
  clock_[w] = step;
  pushed_in_step_[w] = 0;
  absl::FPrintF(stderr, "ps: shard %d: worker %d rejoins at step %d (%d live workers)\n",
                options_.shard, w, step, std::count(lost_.begin(), lost_.end(), false));
  return absl::OkStatus();
}

int64_t Shard::MinClock() const { return *std::min_element(clock_.begin(), clock_.end()); }

absl::StatusOr<bool> Shard::ServeIfReadyWith(int worker, int64_t step, ps::TensorKind kind,
                                             int64_t k, const FillFn& fill) {
  RINGSIDE_RETURN_IF_ERROR(health());
  int64_t start_step;
  bool behind;
  {
    absl::MutexLock l(&mu_);
    if (!initialized_) return false;
    if (k < 0 || k >= static_cast<int64_t>(chunks_.size())) {
      return absl::OutOfRangeError(absl::StrCat("chunk ", k, " does not exist"));
    }
    if (lost_[worker]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", worker, " was dropped from the job (lost)", joining_[worker] ? " and has not rejoined" : ""));
    }
    // A rejoined worker starts at its rejoin step (elastic PS).
    start_step = std::max(start_step_, join_step_[worker]);
    // Decided after the chunk's check below: a pull that must be refused is refused
    // rather than held back.
    behind = kind == ps::PARAMS && MinClock() < policy_->StepsNeeded(step);
  }
  ChunkState& cs = *chunks_[k];
  absl::MutexLock cl(&cs.mu);
  if (kind == ps::PARAMS && step > start_step && cs.clock.pushed[worker] < step - 1) {
    // Nobody may make a worker's pull wait for a step it cannot be about to run (it
    // would time out and abort the job, blaming the others): refused at once.
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker, " asked for the parameters of step ", step, " (chunk ", k,
        "), but has pushed that chunk only ",
        cs.clock.pushed[worker] < 0 ? std::string("for no step")
                                    : absl::StrCat("through step ", cs.clock.pushed[worker])));
  }
  if (behind) return false;
  if (kind == ps::PARAMS) {
    switch (policy_->ReleaseOf(cs.clock, step)) {
      case ChunkRelease::kNow:
        break;
      case ChunkRelease::kWait:
        return false;
      case ChunkRelease::kStale:
        return absl::FailedPreconditionError(absl::StrCat("worker ", worker, " asked for step ",
                                                          step, " of chunk ", k,
                                                          ", which is at step ", cs.clock.version));
    }
  }
  const Slice c = ChunkOf(static_cast<int64_t>(params_.size()), chunk_floats_, k);
  if (kind == ps::OPTIMIZER_STATE) {
    std::vector<float> state(c.size);
    RINGSIDE_RETURN_IF_ERROR(cs.sgd->SaveStateRange(0, absl::MakeSpan(state)));
    fill(state.data(), c);
  } else {
    fill(params_.data() + c.offset, c);
  }
  return true;
}

Shard::FillFn Shard::ChunkFiller(int worker, int64_t step, ps::TensorKind kind,
                                 ps::Chunk* out) {
  return [=](const float* data, const Slice& c) {
    out->set_worker_id(worker);
    out->set_step(step);
    out->set_kind(kind);
    out->set_offset(c.offset);
    out->mutable_data()->assign(reinterpret_cast<const char*>(data), c.size * sizeof(float));
  };
}

Shard::FillFn Shard::WireFiller(int worker, int64_t step, ps::TensorKind kind,
                                WireChunk* out) const {
  const bool borrow = kind == ps::PARAMS && policy_->replies_borrow();
  return [=](const float* data, const Slice& c) {
    out->worker_id = worker;
    out->step = step;
    out->kind = kind;
    out->offset = c.offset;
    if (borrow) {
      out->BorrowPayload(data, c.size * sizeof(float));
    } else {
      out->CopyPayload(data, c.size * sizeof(float));
    }
  };
}

absl::StatusOr<bool> Shard::ServeIfReady(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                                         ps::Chunk* out) {
  return ServeIfReadyWith(worker, step, kind, k, ChunkFiller(worker, step, kind, out));
}

absl::StatusOr<bool> Shard::ServeIfReady(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                                         WireChunk* out) {
  return ServeIfReadyWith(worker, step, kind, k, WireFiller(worker, step, kind, out));
}

absl::Status Shard::Serve(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                          ps::Chunk* out) {
  return ServeWith(worker, step, kind, k, ChunkFiller(worker, step, kind, out));
}

absl::Status Shard::Serve(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                          WireChunk* out, const std::function<bool()>& cancelled) {
  return ServeWith(worker, step, kind, k, WireFiller(worker, step, kind, out), cancelled);
}

absl::Status Shard::ServeWith(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                              const FillFn& fill, const std::function<bool()>& cancelled) {
  absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    if (cancelled && cancelled()) return absl::CancelledError("serve cancelled");
    RINGSIDE_ASSIGN_OR_RETURN(bool ready, ServeIfReadyWith(worker, step, kind, k, fill));
    if (ready) return absl::OkStatus();
    // Sleep until something changes (or the poll interval passes), then look again.
    const bool initialized = AwaitRelease(step, k);
    if (absl::Now() > deadline) {
      if (!initialized) {
        return Abort(absl::StrCat("worker 0 did not initialise the parameters within ",
                                  absl::FormatDuration(options_.timeout)));
      }
      const std::vector<int> late = LateWorkers(step, k);
      if (elastic()) {
        // Elastic PS: the late workers are dropped (or the job aborted, below M); none
        // left when another call dropped them meanwhile: look again.
        if (!late.empty()) {
          RINGSIDE_RETURN_IF_ERROR(
              Lose(late,
                   absl::StrCat(policy_->LateReason(worker, step, late, options_.timeout),
                                WhereAre(late)),
                   0));
        }
        RINGSIDE_ASSIGN_OR_RETURN(bool now_ready, ServeIfReadyWith(worker, step, kind, k, fill));
        if (now_ready) return absl::OkStatus();
        if (!late.empty()) {
          deadline = absl::Now() + options_.timeout;
          continue;
        }
      }
      return Abort(absl::StrCat(policy_->LateReason(worker, step, late, options_.timeout),
                                WhereAre(late)));
    }
  }
}

bool Shard::AwaitRelease(int64_t step, int64_t k) {
  const int64_t need = policy_->StepsNeeded(step);
  {
    absl::MutexLock l(&mu_);
    if (!initialized_) {
      mu_.AwaitWithTimeout(absl::Condition(&initialized_), kPoll);
      return initialized_;
    }
    // The policy's bound on the workers' clocks (SSP); met at once without one.
    auto caught_up = [this, need]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return MinClock() >= need || aborted_.load();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&caught_up), kPoll)) return true;
  }
  // The policy's condition on the chunk (BSP: its update); met at once without one.
  ChunkState& cs = *chunks_[k];
  absl::MutexLock cl(&cs.mu);
  auto released = [this, &cs, step]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cs.mu) {
    return policy_->ReleaseOf(cs.clock, step) != ChunkRelease::kWait || aborted_.load();
  };
  cs.mu.AwaitWithTimeout(absl::Condition(&released), kPoll);
  return true;
}

std::vector<int> Shard::LateWorkers(int64_t step, int64_t k) {
  std::vector<int64_t> clocks;
  std::vector<bool> lost;
  {
    absl::MutexLock l(&mu_);
    clocks = clock_;
    lost = lost_;
  }
  ChunkState& cs = *chunks_[k];
  absl::MutexLock cl(&cs.mu);
  std::vector<int> late = policy_->LateWorkers(step, clocks, cs.clock);
  // Elastic PS: only the workers the step waits for (not lost, counted in step - 1).
  late.erase(std::remove_if(late.begin(), late.end(),
                            [&](int u) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                              return lost[u] || cs.from[u] > step - 1;
                            }),
             late.end());
  return late;
}

void Shard::CountServed(int worker, int64_t step, ps::TensorKind kind, int64_t wire_bytes) {
  absl::MutexLock l(&mu_);
  totals_.set_bytes_out(totals_.bytes_out() + wire_bytes);
  // Start-up, rejoin and checkpoint pulls.
  if (kind != ps::PARAMS || step <= std::max(start_step_, join_step_[worker])) return;
  StepRecord& r = Record(step - 1);
  r.bytes_out += wire_bytes;
  ++r.chunks_served;
  MaybeFinishRecord(step - 1);
}

Shard::StepRecord& Shard::Record(int64_t step) {
  auto [it, inserted] = records_.try_emplace(step);
  if (inserted) it->second.start_us = NowUs();
  return it->second;
}

void Shard::MaybeFinishRecord(int64_t step) {
  auto it = records_.find(step);
  if (it == records_.end()) return;
  const StepRecord& r = it->second;
  // The workers the step waits for: all of them, unless an elastic shard lost some.
  int expected = 0;
  for (int w = 0; w < options_.num_workers; ++w) {
    if (!lost_[w] && join_step_[w] <= step) ++expected;
  }
  if (r.pushes_done < expected ||
      r.chunks_served < expected * static_cast<int64_t>(chunks_.size())) {
    return;
  }
  StepMetrics m;
  m.set_step(step);
  m.set_rank(options_.shard);
  m.set_role("server");
  m.set_start_us(r.start_us);
  m.set_step_ms((NowUs() - r.start_us) / 1e3);
  m.set_bytes_received(r.bytes_in);
  m.set_bytes_sent(r.bytes_out);
  m.set_wait_ms((r.last_push_done_us - r.first_push_done_us) / 1e3);
  m.set_late_worker(r.late_worker);
  m.set_aggregate_ms(r.aggregate_ms);
  m.set_update_ms(r.update_ms);
  m.set_queue_depth(r.queue_depth);
  m.set_live_workers(r.pushes_done);  // Elastic PS: the workers whose push counted.
  m.set_samples(0);
  totals_.set_steps_completed(totals_.steps_completed() + 1);
  totals_.set_bytes_in(totals_.bytes_in() + r.bytes_in);
  totals_.set_wait_ms(totals_.wait_ms() + m.wait_ms());
  totals_.set_aggregate_ms(totals_.aggregate_ms() + r.aggregate_ms);
  totals_.set_update_ms(totals_.update_ms() + r.update_ms);
  totals_.set_max_queue_depth(std::max(totals_.max_queue_depth(), r.queue_depth));
  *totals_.mutable_last_step() = m;
  if (options_.trace != nullptr) TraceStep(step, r);
  records_.erase(it);
  if (options_.metrics != nullptr) options_.metrics->Write(m).IgnoreError();
}

void Shard::TraceChunk(int worker, int64_t step, int64_t k, int64_t wire_bytes,
                       const TraceInterval& aggregate, const TraceInterval& update) const {
  TraceWriter* trace = options_.trace;
  const TraceArgs args = {{"step", static_cast<double>(step)},
                          {"worker", static_cast<double>(worker)},
                          {"chunk", static_cast<double>(k)},
                          {"bytes", static_cast<double>(wire_bytes)}};
  // Chunks of one worker arrive on one stream at a time, but another worker's push may
  // complete (and update) a chunk meanwhile: lanes keep the spans apart.
  const std::string group = absl::StrCat("pushes of worker ", worker);
  for (const auto& [name, cat, span] :
       {std::make_tuple("aggregate", kCatCompute, aggregate),
        std::make_tuple("update", kCatUpdate, update)}) {
    if (span.end_us <= span.start_us) continue;
    trace->Span(name, cat, trace->Lane(group, span.start_us, span.end_us), span.start_us,
                span.end_us - span.start_us, args);
  }
}

void Shard::TraceStep(int64_t step, const StepRecord& r) const {
  TraceWriter* trace = options_.trace;
  const int64_t now = NowUs();
  trace->Span("step", kCatComm, trace->Lane("steps", r.start_us, now), r.start_us,
              now - r.start_us,
              {{"step", static_cast<double>(step)},
               {"bytes_received", static_cast<double>(r.bytes_in)},
               {"bytes_sent", static_cast<double>(r.bytes_out)},
               {"bytes", static_cast<double>(r.bytes_in + r.bytes_out)},
               {"queue_depth", static_cast<double>(r.queue_depth)}});
  if (r.last_push_done_us > r.first_push_done_us) {
    trace->Span("wait for workers", kCatWait,
                trace->Lane("wait for workers", r.first_push_done_us, r.last_push_done_us),
                r.first_push_done_us, r.last_push_done_us - r.first_push_done_us,
                {{"step", static_cast<double>(step)},
                 {"late_worker", static_cast<double>(r.late_worker)}});
  }
}

namespace {

// Whether `name` is worker w's next barrier (ps.proto's BarrierRequest): "end", or
// "<eval|checkpoint>/<passed>". InvalidArgument for a name outside the protocol,
// FailedPrecondition for another number.
absl::Status CheckBarrierName(int w, const std::string& name, int64_t passed) {
  if (name == "end") return absl::OkStatus();
  const size_t slash = name.find('/');
  int64_t number = -1;
  const std::string kind = name.substr(0, slash);
  if (slash == std::string::npos || (kind != "eval" && kind != "checkpoint") ||
      !absl::SimpleAtoi(name.substr(slash + 1), &number) || number < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", w, ": '", name, "' is not a barrier of the protocol (end, eval/N, checkpoint/N)"));
  }
  if (number != passed) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", w, " entered barrier '", name,
                                                      "', its next barrier is number ", passed));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<double>> Shard::Barrier(int worker, const std::string& name,
                                                   const std::vector<double>& values) {
  RINGSIDE_RETURN_IF_ERROR(health());
  absl::Time deadline = absl::Now() + options_.timeout;
  absl::MutexLock l(&mu_);
  if (worker < 0 || worker >= options_.num_workers || registered_.empty() || !registered_[worker]) {
    return absl::InvalidArgumentError(absl::StrCat("barrier '", name, "' from unknown worker ", worker));
  }
  RINGSIDE_RETURN_IF_ERROR(CheckBarrierName(worker, name, barriers_passed_[worker]));
  // Elastic PS: a rejoined worker numbers its barriers from 0 again; the job's number
  // of its first is the count of barriers begun at or before its rejoin step (the
  // others pass those before pushing that step, so all are known by now).
  std::string key = name;
  int64_t number = -1;
  if (name != "end") {
    if (barrier_base_[worker] < 0) {
      barrier_base_[worker] = std::count_if(
          barrier_positions_.begin(), barrier_positions_.end(),
          [this, worker](int64_t p) ABSL_NO_THREAD_SAFETY_ANALYSIS { return p <= join_step_[worker]; });
    }
    number = barriers_passed_[worker] + barrier_base_[worker];
    key = absl::StrCat(name.substr(0, name.find('/') + 1), number);
  }
  auto found = barriers_.find(key);
  if (found != barriers_.end()) {
    const BarrierState& b = found->second;
    if (b.arrived[worker]) {
      return absl::FailedPreconditionError(absl::StrCat("worker ", worker, " entered barrier '",
                                                        name, "' twice"));
    }
    if (values.size() != b.values[b.first].size()) {
      return absl::InvalidArgumentError(absl::StrCat("barrier '", name, "': worker ", worker,
                                                     " sent ", values.size(), " values, others ",
                                                     b.values[b.first].size()));
    }
  }
  BarrierState& b = barriers_[key];
  if (b.arrived.empty()) {
    b.arrived.assign(options_.num_workers, false);
    b.values.resize(options_.num_workers);
    b.first = worker;
    b.left = options_.num_workers;
    b.position = clock_[worker];
    if (number == static_cast<int64_t>(barrier_positions_.size())) {
      barrier_positions_.push_back(b.position);
    }
  }
  b.arrived[worker] = true;
  b.values[worker] = values;
  ++barriers_passed_[worker];
  // Who takes part: every worker, unless an elastic shard lost it; a rejoined worker in
  // the barriers after its rejoin step.
  auto takes_part = [&b, this](int w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !lost_[w] && join_step_[w] < b.position;
  };
  auto all_arrived = [&b, &takes_part, this]() {
    if (aborted_.load()) return true;
    for (int w = 0; w < options_.num_workers; ++w) {
      if (!b.arrived[w] && takes_part(w)) return false;
    }
    return true;
  };
  while (!all_arrived()) {
    if (absl::Now() > deadline) {
      std::vector<int> missing;
      for (int w = 0; w < options_.num_workers; ++w) {
        if (!b.arrived[w] && takes_part(w)) missing.push_back(w);
      }
      const std::string why = absl::StrCat("worker(s) ", absl::StrJoin(missing, ", "),
                                           " did not reach barrier '", name, "' within ",
                                           absl::FormatDuration(options_.timeout));
      mu_.Unlock();
      const std::string where = absl::StrCat(why, WhereAre(missing));
      absl::Status s = elastic() ? Lose(missing, where, 0) : Abort(where);
      mu_.Lock();
      if (!s.ok() || !elastic()) return s;
      deadline = absl::Now() + options_.timeout;  // Elastic: went on without them.
      continue;
    }
    mu_.AwaitWithTimeout(absl::Condition(&all_arrived), kPoll);
  }
  if (aborted_.load()) return absl::AbortedError(abort_reason_);
  if (!b.done) {
    b.done = true;
    // Each worker that arrived reads the result once (all of them, unless elastic).
    b.left = static_cast<int>(std::count(b.arrived.begin(), b.arrived.end(), true));
    if (!values.empty()) {
      // In worker-id order: the same sums whatever the order of arrival.
      b.sums.assign(values.size(), 0.0);
      for (int w = 0; w < options_.num_workers; ++w) {
        if (!b.arrived[w]) continue;
        for (size_t i = 0; i < values.size(); ++i) b.sums[i] += b.values[w][i];
      }
    }
  }
  std::vector<double> sums = b.sums;
  if (--b.left == 0) barriers_.erase(key);
  return sums;
}

ps::ShardStats Shard::Stats() {
  absl::MutexLock l(&mu_);
  return totals_;
}

void Shard::StreamStarted() { active_streams_.fetch_add(1); }
void Shard::StreamEnded() { active_streams_.fetch_sub(1); }

void Shard::WorkerLost(int worker, const std::string& why, uint64_t session) {
  const std::string reason = absl::StrCat("worker ", worker, " lost: ", why);
  if (!elastic()) {
    Abort(reason).IgnoreError();
    return;
  }
  Lose({worker}, reason, session).IgnoreError();
}

void Shard::NotePeer(int worker, const std::string& address) {
  absl::MutexLock l(&mu_);
  peers_[worker] = address;
}

std::string Shard::WhereAre(const std::vector<int>& workers) {
  absl::MutexLock l(&mu_);
  std::vector<std::string> known;
  for (int w : workers) {
    auto it = peers_.find(w);
    if (it != peers_.end()) known.push_back(absl::StrCat("worker ", w, " at ", it->second));
  }
  return known.empty() ? "" : absl::StrCat(" (", absl::StrJoin(known, ", "), ")");
}

absl::Status Shard::WorkerReported(int worker, const std::string& reason) {
  RINGSIDE_RETURN_IF_ERROR(CheckWorker(worker));
  std::string why = reason.substr(0, kMaxAbortReasonBytes);
  // One line: the reason ends up in this shard's error line, which names the worker
  // and ends with "; job aborted" itself.
  std::replace(why.begin(), why.end(), '\n', ' ');
  why = std::string(absl::StripSuffix(absl::StripPrefix(why, absl::StrCat("worker ", worker, ": ")),
                                     "; job aborted"));
  const std::string what = absl::StrCat("worker ", worker, " reports: ", why);
  // An elastic shard loses the worker (it goes on while at least M stay live).
  (elastic() ? Lose({worker}, what, 0) : Abort(what)).IgnoreError();
  return absl::OkStatus();
}

absl::Status Shard::Goodbye(int worker) {
  RINGSIDE_RETURN_IF_ERROR(CheckWorker(worker));
  absl::MutexLock l(&mu_);
  if (goodbye_[worker]) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker, " said goodbye twice"));
  }
  if (pushed_in_step_[worker] != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " said goodbye in the middle of pushing step ",
                     clock_[worker]));
  }
  goodbye_[worker] = true;
  return absl::OkStatus();
}

void Shard::CallStarted() {
  calls_in_flight_.fetch_add(1);
  last_activity_us_.store(NowUs());
}

void Shard::CallEnded() {
  last_activity_us_.store(NowUs());
  calls_in_flight_.fetch_sub(1);
}

absl::Status Shard::WaitUntilDone() {
  bool idle = false;
  {
    absl::MutexLock l(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      int gone = 0;  // Said goodbye, or (elastic PS) lost.
      for (size_t w = 0; w < goodbye_.size(); ++w) gone += goodbye_[w] || lost_[w];
      return aborted_.load() || (!goodbye_.empty() && gone == options_.num_workers);
    };
    while (!done()) {
      mu_.AwaitWithTimeout(absl::Condition(&done), kPoll);
      // Workers that vanish between calls leave nobody waiting here to time out:
      // a shard nobody has called for 1.5 x the timeout gives up. (The extra half
      // leaves time for a worker's AbortRequest naming the cause, e.g. another shard
      // that hangs, which the worker's keepalive finds within 3/4 x the timeout.)
      if (!done() && calls_in_flight_.load() == 0 &&
          NowUs() - last_activity_us_.load() > absl::ToInt64Microseconds(IdleLimit())) {
        idle = true;
        break;
      }
    }
    if (!idle && aborted_.load()) return absl::AbortedError(abort_reason_);
    if (!idle) return absl::OkStatus();
  }
  const bool anyone = [this] {
    absl::MutexLock l(&mu_);
    return std::count(registered_.begin(), registered_.end(), true) > 0;
  }();
  return Abort(absl::StrCat(anyone ? "no worker has called for " : "no worker registered within ",
                            absl::FormatDuration(IdleLimit()),
                            anyone ? " (workers lost?)" : ""));
}

}  // namespace ringside
