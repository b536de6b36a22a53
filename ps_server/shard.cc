#include "ps_server/shard.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/ops_factory.h"
#include "common/nonfinite.h"
#include "common/ps_layout.h"
#include "common/ps_placement.h"
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

// The one reply to every registration refused for its contents: it tells a caller
// nothing about the shard's configuration.
constexpr char kConfigMismatch[] = "configuration mismatch";

}  // namespace

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const PsShardOptions& options) {
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--workers must be >= 1, got ", options.num_workers));
  }
  if (options.num_shards < 1 || options.shard < 0 || options.shard >= options.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", options.shard, " is outside [0, ",
                                                   options.num_shards, ")"));
  }
  RINGSIDE_ASSIGN_OR_RETURN(int64_t chunk_floats, ChunkFloats(options.chunk_bytes));
  if (options.summation && options.sync.mode != SyncMode::kBsp) {
    return absl::InvalidArgumentError(absl::StrCat("--ps_mode=summation needs --ps_sync=bsp, got ",
                                                   SyncPolicyText(options.sync)));
  }
  // The optimizer's hyper-parameters are checked now, not at the first registration.
  // The shard's slice lives in host memory: its ops are always the CPU backend.
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> probe_ops, NewOps("cpu", 0, 0));
  RINGSIDE_RETURN_IF_ERROR(Sgd::Create(options.hyper, 0, probe_ops.get()).status());
  return std::unique_ptr<Shard>(new Shard(options, chunk_floats));
}

Shard::Shard(const PsShardOptions& options, int64_t chunk_floats)
    : options_(options),
      chunk_floats_(chunk_floats),
      policy_(ConsistencyPolicy::Create(options.sync, options.num_workers)),
      members_(options.num_workers, options.config.ps_min_workers() > 0),
      barriers_(options.num_workers),
      records_(options.shard, options.metrics, options.trace) {
  last_activity_us_.store(NowUs());
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
  return AbortLocked(why);
}

absl::Status Shard::AbortLocked(const std::string& why) {
  if (!aborted_.load()) {
    abort_reason_ = absl::StrCat("shard ", options_.shard, ": ", why, "; job aborted");
    aborted_.store(true);
  }
  return absl::AbortedError(abort_reason_);
}

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
    RINGSIDE_RETURN_IF_ERROR(Layout(r));
  } else if (r.num_params() != num_params_ ||
             !std::equal(r.tensor_sizes().begin(), r.tensor_sizes().end(), tensor_sizes_.begin(),
                         tensor_sizes_.end())) {
    absl::FPrintF(stderr,
                  "ps: shard %d: refused a registration: worker %d's model has %d parameters in %d tensors, "
                  "worker(s) before it registered %d in %d\n",
                  options_.shard, r.worker_id(), r.num_params(), r.tensor_sizes_size(), num_params_,
                  tensor_sizes_.size());
    return absl::FailedPreconditionError(kConfigMismatch);
  }
  const int w = r.worker_id();
  // Elastic PS: a lost worker registers again; it counts again once its first PARAMS
  // pull makes it rejoin (Rejoin).
  RINGSIDE_ASSIGN_OR_RETURN(const bool rejoin, members_.Register(w));
  int64_t newest = start_step_;  // The newest step of the chunks' parameters.
  if (rejoin) {
    barriers_.Restart(w);
    for (const auto& chunk : chunks_) newest = std::max(newest, chunk->version());
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
  response->set_session(members_.session(w));
  response->set_rejoin(rejoin);
  return absl::OkStatus();
}

absl::Status Shard::Layout(const ps::RegisterRequest& r) {
  const int64_t num_params = r.num_params();
  RINGSIDE_RETURN_IF_ERROR(ValidateSharding(num_params, options_.num_shards));
  const std::vector<int64_t> tensors(r.tensor_sizes().begin(), r.tensor_sizes().end());
  RINGSIDE_ASSIGN_OR_RETURN(const PsPartition partition,
                            JobPartition(options_.config, options_.num_shards, num_params, tensors));
  const PsRange mine = partition.shard(options_.shard);
  slice_ = Slice{mine.offset, mine.size};
  num_params_ = num_params;
  tensor_sizes_ = tensors;
  params_.assign(slice_.size, 0.0f);
  const int64_t k = NumChunks(slice_.size, chunk_floats_);
  for (int64_t i = 0; i < k; ++i) {
    const Slice c = ChunkOf(slice_.size, chunk_floats_, i);
    RINGSIDE_ASSIGN_OR_RETURN(
        std::unique_ptr<ShardChunk> chunk,
        ShardChunk::Create(i, c, params_.data() + c.offset, options_.num_workers,
                           options_.hyper, policy_->sums_pushes(), options_.summation));
    chunks_.push_back(std::move(chunk));
  }
  init_received_.assign(k, false);
  return absl::OkStatus();
}

absl::Status Shard::CheckWorker(int w) const {
  absl::MutexLock l(&mu_);
  return members_.CheckWorker(w);
}

absl::Status Shard::CheckSession(int w, uint64_t session) const {
  absl::MutexLock l(&mu_);
  return members_.CheckSession(w, session);
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
  absl::MutexLock l(&mu_);
  return CheckChunkLocked(chunk, payload_bytes, expected_worker);
}

absl::StatusOr<int64_t> Shard::CheckChunkLocked(const ChunkHeader& chunk, size_t payload_bytes,
                                                int expected_worker) const {
  const int w = chunk.worker_id;
  RINGSIDE_RETURN_IF_ERROR(members_.CheckWorker(w));
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
  absl::MutexLock l(&mu_);
  if (num_params_ < 0) return absl::FailedPreconditionError("no worker has registered");
  if (!payload_bytes.has_value()) {
    // The caller checked the payload's length: take the length of the chunk the
    // header names, so that only the header is checked (again) here.
    const int64_t at = ChunkIndexAt(slice_.size, chunk_floats_, header.offset);
    payload_bytes = ChunkOf(slice_.size, chunk_floats_, at >= 0 ? at : 0).size * sizeof(float);
  }
  return CheckChunkLocked(header, *payload_bytes, -1);
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
  records_.CountInit(wire_bytes);
  if (h.kind == ps::OPTIMIZER_STATE) return chunks_[k]->LoadState(data);
  if (init_chunks_ > 0 && h.step != init_step_) {
    return absl::InvalidArgumentError(absl::StrCat("initial parameters of step ", h.step,
                                                   " mixed with step ", init_step_));
  }
  init_step_ = h.step;
  chunks_[k]->LoadParams(data);
  if (!init_received_[k]) {
    init_received_[k] = true;
    ++init_chunks_;
  }
  if (!initialized_ && init_chunks_ == static_cast<int64_t>(chunks_.size())) {
    start_step_ = h.step;
    for (const auto& chunk : chunks_) chunk->Start(start_step_);
    members_.StartAt(start_step_);
    initialized_ = true;
  }
  return absl::OkStatus();
}


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
    RINGSIDE_RETURN_IF_ERROR(members_.CheckPush(w, step));
  }
  ShardChunk& chunk = *chunks_[k];
  const Slice c = chunk.range();
  float block[kGradientBlock];
  // Reads the payload front to back in L1-sized blocks: apply(at, block, len) for
  // each. The received payload is never copied whole.
  const auto for_each_block = [&](const auto& apply) {
    for (int64_t done = 0; done < c.size;) {
      const int64_t got = static_cast<int64_t>(
          next(block, static_cast<size_t>(std::min(kGradientBlock, c.size - done))));
      // CheckChunk fixed the payload's length before this call.
      ABSL_RAW_CHECK(got > 0, "gradient payload shorter than its chunk");
      apply(done, block, got);
      done += got;
    }
  };
  // Numerical safety: a gradient with a NaN or an infinity is refused before anything
  // is applied (a sum or an SGD step cannot be undone), by one read of the payload that
  // stays in L1 and a branch-free test per block.
  int64_t bad = -1;
  float bad_value = 0.0f;
  for_each_block([&](int64_t at, const float* data, int64_t len) {
    if (bad >= 0) return;
    const int64_t i = FirstNonFinite(data, len);
    if (i >= 0) {
      bad = at + i;
      bad_value = data[i];
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
  RINGSIDE_ASSIGN_OR_RETURN(
      const ShardChunk::PushSpans spans,
      chunk.Push(*policy_, w, step, [&](OrderedSum::Block apply) { for_each_block(apply); }));
  if (options_.trace != nullptr) {
    TracePush(options_.trace, w, step, k, wire_bytes, spans.aggregate, spans.update);
  }
  absl::MutexLock l(&mu_);
  records_.CountPush(step, wire_bytes, active_streams_.load(), spans.aggregate, spans.update);
  if (members_.ChunkPushed(w, step, static_cast<int64_t>(chunks_.size()))) {
    // Worker w's whole push of `step` is here: its clock advanced.
    records_.PushDone(step, w);
    MaybeFinishRecord(step);
  }
  return absl::OkStatus();
}

int Shard::live_workers() const {
  absl::MutexLock l(&mu_);
  return members_.live();
}

absl::Status Shard::Lose(const std::vector<int>& workers, const std::string& why,
                         uint64_t session) {
  absl::MutexLock l(&mu_);
  return LoseLocked(workers, why, session);
}

absl::Status Shard::LoseLocked(const std::vector<int>& workers, const std::string& why,
                               uint64_t session) {
  if (aborted_.load()) return absl::AbortedError(abort_reason_);
  const std::vector<int> dropped = members_.ToDrop(workers, session);
  if (dropped.empty()) return absl::OkStatus();
  const int live = members_.live() - static_cast<int>(dropped.size());
  const int m = options_.config.ps_min_workers();
  if (!elastic()) return AbortLocked(why);
  if (dropped.front() == 0) {
    return AbortLocked(absl::StrCat(why, "; worker 0 initialises the shards and writes the "
                                         "checkpoints: the job cannot go on without it "
                                         "(--ps_min_workers)"));
  }
  if (live < m) {
    return AbortLocked(absl::StrCat(why, "; lost worker(s) ",
                                    absl::StrJoin(members_.LostWith(dropped), ", "), ": ", live,
                                    " live worker(s) left, fewer than --ps_min_workers=", m));
  }
  members_.MarkLost(dropped);
  absl::FPrintF(stderr,
                "ps: shard %d: worker(s) %s dropped (%s); going on with %d live worker(s) "
                "(--ps_min_workers=%d)\n",
                options_.shard, absl::StrJoin(dropped, ", "), why, live, m);
  // The chunks' steps stop waiting for them; a step they already pushed (in part)
  // keeps those pushes.
  for (const auto& chunk : chunks_) chunk->Drop(*policy_, dropped);
  for (int64_t step : records_.OpenSteps()) MaybeFinishRecord(step);
  return absl::OkStatus();
}

absl::Status Shard::Rejoin(int w, int64_t step) {
  absl::MutexLock l(&mu_);
  const Membership::Rejoin rejoin = members_.RejoinOf(w, step);
  if (rejoin == Membership::Rejoin::kNone) return absl::OkStatus();
  if (!initialized_) return absl::FailedPreconditionError("rejoin before the shard was initialised");
  {
    // Every chunk, locked in index order, is at `step` or before: none has summed a
    // push of `step` without this worker being counted... except at `step` itself,
    // where a late arrival is summed on arrival (OrderedSum).
    ChunkSetLock all(chunks_);
    for (const auto& chunk : chunks_) {
      chunk->AssertHeld();
      if (chunk->VersionLocked() > step) {
        return absl::OutOfRangeError(absl::StrCat("worker ", w, " cannot rejoin at step ", step,
                                                  ": chunk ", chunk->index(), " is at step ",
                                                  chunk->VersionLocked(), " (pull a later step)"));
      }
    }
    for (const auto& chunk : chunks_) {
      chunk->AssertHeld();
      chunk->RejoinLocked(*policy_, w, step, rejoin == Membership::Rejoin::kMove);
    }
  }
  members_.Rejoined(w, step);
  absl::FPrintF(stderr, "ps: shard %d: worker %d rejoins at step %d (%d live workers)\n",
                options_.shard, w, step, members_.live());
  return absl::OkStatus();
}

absl::StatusOr<bool> Shard::ServeIfReadyWith(int worker, int64_t step, ps::TensorKind kind,
                                             int64_t k, const FillFn& fill) {
  RINGSIDE_RETURN_IF_ERROR(health());
  ShardChunk::Pull pull;
  pull.worker = worker;
  pull.step = step;
  pull.kind = kind;
  {
    absl::MutexLock l(&mu_);
    if (!initialized_) return false;
    if (k < 0 || k >= static_cast<int64_t>(chunks_.size())) {
      return absl::OutOfRangeError(absl::StrCat("chunk ", k, " does not exist"));
    }
    RINGSIDE_RETURN_IF_ERROR(members_.CheckPull(worker));
    // A rejoined worker starts at its rejoin step (elastic PS).
    pull.start_step = members_.StartOf(worker, start_step_);
    // Applied after the chunk's own check (ShardChunk::Serve): a pull that must be
    // refused is refused rather than held back.
    pull.behind = kind == ps::PARAMS && members_.MinClock() < policy_->StepsNeeded(step);
  }
  return chunks_[k]->Serve(*policy_, pull, fill);
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

Shard::FillFn Shard::RawFiller(ps::TensorKind kind, RawChunk* out) const {
  const bool borrow = kind == ps::PARAMS && policy_->replies_borrow();
  return [=](const float* data, const Slice& c) {
    out->chunk = c;
    if (borrow) {
      out->data = data;
    } else {
      out->copy.assign(data, data + c.size);
      out->data = out->copy.data();
    }
  };
}

absl::StatusOr<bool> Shard::ServeIfReady(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                                         RawChunk* out) {
  return ServeIfReadyWith(worker, step, kind, k, RawFiller(kind, out));
}

absl::Status Shard::Serve(int worker, int64_t step, ps::TensorKind kind, int64_t k,
                          RawChunk* out, const std::function<bool()>& cancelled) {
  return ServeWith(worker, step, kind, k, RawFiller(kind, out), cancelled);
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
      return members_.MinClock() >= need || aborted_.load();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&caught_up), kPoll)) return true;
  }
  // The policy's condition on the chunk (BSP: its update); met at once without one.
  chunks_[k]->AwaitRelease(*policy_, step, aborted_, kPoll);
  return true;
}

std::vector<int> Shard::LateWorkers(int64_t step, int64_t k) {
  std::vector<int64_t> clocks;
  std::vector<bool> lost;
  {
    absl::MutexLock l(&mu_);
    clocks = members_.clocks();
    lost = members_.lost();
  }
  return chunks_[k]->LateWorkers(*policy_, step, clocks, lost);
}

void Shard::CountServed(int worker, int64_t step, ps::TensorKind kind, int64_t wire_bytes) {
  absl::MutexLock l(&mu_);
  records_.CountServedBytes(wire_bytes);
  // Start-up, rejoin and checkpoint pulls.
  if (kind != ps::PARAMS || step <= members_.StartOf(worker, start_step_)) return;
  records_.CountServed(step - 1, wire_bytes);
  MaybeFinishRecord(step - 1);
}

void Shard::MaybeFinishRecord(int64_t step) {
  // The workers the step waits for: all of them, unless an elastic shard lost some.
  records_.MaybeFinish(step, members_.CountingIn(step), static_cast<int64_t>(chunks_.size()));
}

absl::StatusOr<std::vector<double>> Shard::Barrier(int worker, const std::string& name,
                                                   const std::vector<double>& values) {
  RINGSIDE_RETURN_IF_ERROR(health());
  const absl::Time deadline = absl::Now() + options_.timeout;
  absl::MutexLock l(&mu_);
  if (worker < 0 || worker >= options_.num_workers || !members_.registered(worker)) {
    return absl::InvalidArgumentError(absl::StrCat("barrier '", name, "' from unknown worker ", worker));
  }
  RINGSIDE_ASSIGN_OR_RETURN(const std::string key,
                            barriers_.Enter(worker, name, values, members_.clocks()[worker],
                                            members_.join_step(worker)));
  RINGSIDE_RETURN_IF_ERROR(AwaitBarrier(key, name, deadline));
  return barriers_.Leave(key);
}

absl::Status Shard::AwaitBarrier(const std::string& key, const std::string& name,
                                 absl::Time deadline) {
  // Who takes part: every worker, unless an elastic shard lost it; a rejoined worker in
  // the barriers after its rejoin step.
  auto missing = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return barriers_.Missing(key, [this](int w, int64_t position) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                      mu_) { return members_.TakesPart(w, position); });
  };
  auto all_arrived = [this, &missing]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return aborted_.load() || missing().empty();
  };
  while (!all_arrived()) {
    if (absl::Now() > deadline) {
      const std::vector<int> late = missing();
      const std::string why =
          absl::StrCat("worker(s) ", absl::StrJoin(late, ", "), " did not reach barrier '", name,
                       "' within ", absl::FormatDuration(options_.timeout), members_.WhereAre(late));
      // Decided and acted on under the lock: nothing else moves meanwhile.
      RINGSIDE_RETURN_IF_ERROR(elastic() ? LoseLocked(late, why, 0) : AbortLocked(why));
      deadline = absl::Now() + options_.timeout;  // Elastic: went on without them.
      continue;
    }
    mu_.AwaitWithTimeout(absl::Condition(&all_arrived), kPoll);
  }
  if (aborted_.load()) return absl::AbortedError(abort_reason_);
  return absl::OkStatus();
}

ps::ShardStats Shard::Stats() {
  absl::MutexLock l(&mu_);
  return records_.totals();
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
  members_.NotePeer(worker, address);
}

std::string Shard::WhereAre(const std::vector<int>& workers) {
  absl::MutexLock l(&mu_);
  return members_.WhereAre(workers);
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
  absl::MutexLock l(&mu_);
  RINGSIDE_RETURN_IF_ERROR(members_.CheckWorker(worker));
  return members_.Goodbye(worker);
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
  bool anyone = false;
  {
    absl::MutexLock l(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return aborted_.load() || members_.AllGone();
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
        anyone = members_.any_registered();
        break;
      }
    }
    if (!idle && aborted_.load()) return absl::AbortedError(abort_reason_);
    if (!idle) return absl::OkStatus();
  }
  return Abort(absl::StrCat(anyone ? "no worker has called for " : "no worker registered within ",
                            absl::FormatDuration(IdleLimit()),
                            anyone ? " (workers lost?)" : ""));
}

}  // namespace ringside
