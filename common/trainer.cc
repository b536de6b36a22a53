#include "common/trainer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"

namespace ringside {
namespace {

// mkdir -p.
absl::Status MakeDirs(const std::string& dir) {
  std::string prefix;
  for (size_t pos = 0; pos != std::string::npos;) {
    pos = dir.find('/', pos + 1);
    prefix = dir.substr(0, pos);
    if (prefix.empty()) continue;
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create directory ", prefix, ": ", strerror(errno)));
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a directory"));
  }
  return absl::OkStatus();
}

// With a teaching bug on (RunConfig.bugs), rank 0 shows where each epoch starts: the
// first samples of its order, and whether the order repeats the previous epoch's (the
// symptom of a sampler whose epoch is never set).
void PrintEpochOrder(FILE* out, const RunConfig& c, int rank, int64_t epoch,
                     const std::vector<int64_t>& order, const Sharder& shard) {
  constexpr size_t kShown = 6;
  // Epochs counted from 1, as the progress lines do.
  std::string line =
      absl::StrCat("epoch ", epoch + 1, "/", c.epochs(), ": rank ", rank, " visits samples ");
  for (size_t i = 0; i < std::min(order.size(), kShown); ++i) {
    absl::StrAppend(&line, i > 0 ? ", " : "", order[i]);
  }
  if (order.size() > kShown) absl::StrAppend(&line, ", ...");
  if (epoch > 0 && order.size() > 1) {
    if (shard.Indices(epoch - 1) == order) {
      absl::StrAppend(&line, " (the same order as epoch ", epoch,
                      BugListHas(c.bugs(), kBugNoSetEpoch)
                          ? ": set_epoch not called: bug no_set_epoch)"
                          : ")");
    } else {
      absl::StrAppend(&line, " (a new order)");
    }
  }
  absl::FPrintF(out, "%s\n", line);
  fflush(out);
}

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

int64_t BatchesPerEpoch(const Sharder& shard, int64_t batch) {
  return (shard.num_samples() + batch - 1) / batch;
}

// Numerical safety: the first layer whose flag is set (flags [layer_ranges().size() + 1]
// in backend memory, as LocalSgdStrategy::nonfinite_) as a NonFiniteError "<what> in
// layer ..."; OK when none is. Blocks for the flags.
absl::Status CheckUpdateFlags(Ops* ops, const Model& model, const float* flags,
                              absl::string_view what = "non-finite gradient or update") {
  const std::vector<ParamRange>& layers = model.layer_ranges();
  std::vector<float> host(layers.size() + 1);
  RINGSIDE_RETURN_IF_ERROR(ops->CopyToHost(host.data(), flags, host.size() * sizeof(float)));
  for (size_t i = 0; i < host.size(); ++i) {
    if (host[i] == 0.0f) continue;
    const ParamRange r = i < layers.size() ? layers[i] : ParamRange{0, model.num_params()};
    return NonFiniteError(absl::StrCat(what, " in ", DescribeParams(model, r.offset, r.size)));
  }
  return absl::OkStatus();
}

// Numerical safety: NonFiniteError naming the first layer of `model` holding a
// non-finite parameter; one read of the parameters. Run before each checkpoint, so
// that none is written with a non-finite value (a parameter-server worker holds what
// the shards computed, which no update check of its own has seen).
absl::Status CheckParamsFinite(Ops* ops, const Model& model) {
  const std::vector<ParamRange>& layers = model.layer_ranges();
  RINGSIDE_ASSIGN_OR_RETURN(DeviceArray<float> flags,
                            DeviceArray<float>::Create(ops, static_cast<int64_t>(layers.size()) + 1));
  ops->Fill(flags.data(), flags.size(), 0.0f);
  for (size_t i = 0; i < layers.size(); ++i) {
    ops->FlagNonFinite(model.params() + layers[i].offset, layers[i].size, flags.data() + i);
  }
  return CheckUpdateFlags(ops, model, flags.data(), "non-finite parameters");
}
}  // namespace

absl::StatusOr<std::unique_ptr<LocalSgdStrategy>> LocalSgdStrategy::Create(
    const SgdHyper& hyper, Model* model, Ops* ops) {
  // Plain momentum keeps its state in the gradients (one pass over two buffers per
  // update); Nesterov needs the gradient apart from it.
  RINGSIDE_ASSIGN_OR_RETURN(
      Sgd sgd, hyper.nesterov ? Sgd::Create(hyper, model->num_params(), ops)
                              : Sgd::CreateInGradients(hyper, model->grads(),
                                                       model->num_params(), ops));
  std::unique_ptr<LocalSgdStrategy> strategy(new LocalSgdStrategy(std::move(sgd), model, ops));
  RINGSIDE_ASSIGN_OR_RETURN(
      strategy->nonfinite_,
      DeviceArray<float>::Create(ops, static_cast<int64_t>(model->layer_ranges().size()) + 1));
  return strategy;
}

StepHooks LocalSgdStrategy::hooks() {
  StepHooks h;
  h.backward.params_free = [this](const ParamRange& range) { Step(range); };
  // Each step is enqueued on the model's ops after the gradients it reads.
  h.backward.device_ordered = true;
  h.accumulate_gradients = true;
  h.backward_hook_span = "update";
  h.backward_hook_cat = kCatUpdate;
  return h;
}

void LocalSgdStrategy::Step(const ParamRange& range) {
  if (stepped_ == 0) ops_->Fill(nonfinite_.data(), nonfinite_.size(), 0.0f);
  // The flag of the layer holding the range (the last flag for a range across layers).
  const std::vector<ParamRange>& layers = model_->layer_ranges();
  size_t flag = layers.size();
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].offset <= range.offset &&
        range.offset + range.size <= layers[i].offset + layers[i].size) {
      flag = i;
      break;
    }
  }
  sgd_.StepRange(range.offset, range.size, model_->params() + range.offset,
                 model_->grads() + range.offset, /*zero_grads=*/true,
                 nonfinite_.data() + flag);
  stepped_ += range.size;
}


absl::Status LocalSgdStrategy::FinishStep(const HookTimes& hook_times, StepMetrics* m,
                                          TraceWriter* trace) {
  if (m->skipped_nonfinite()) {
    // No backward ran (kSkipBackward): the parameters and the momentum carried in the
    // gradients are as the previous step left them.
    stepped_ = 0;
    return ops_->Synchronize();
  }
  // LocalStep drew the updates backward's hooks ran.
  int64_t update_us = hook_times.backward_us;
  // Ranges nobody announced (none for a full backward) are stepped now.
  if (stepped_ != model_->num_params()) {
    const int64_t t0 = NowMicros();
    Step({0, model_->num_params()});
    const int64_t dur = NowMicros() - t0;
    update_us += dur;
    if (trace != nullptr) trace->Span("update", kCatUpdate, kTrainingTrack, t0, dur);
  }
  stepped_ = 0;
  m->set_update_ms(update_us / 1e3);
  // Backward and its updates were only enqueued (device-ordered hooks): the step ends
  // when the device is done with them. That wait is backward's (and nothing on the
  // CPU backend, whose ops run as they are called).
  const int64_t w0 = NowMicros();
  absl::Status done = ops_->Synchronize();
  const int64_t waited = NowMicros() - w0;
  if (ops_->kind() != DeviceKind::kCpu) {
    m->set_backward_ms(m->backward_ms() + waited / 1e3);
    if (trace != nullptr) trace->Span("backward (device)", kCatCompute, kTrainingTrack, w0, waited);
  }
  RINGSIDE_RETURN_IF_ERROR(done);
  return CheckUpdateFlags(ops_, *model_, nonfinite_.data());
}

Trainer::Trainer(const TrainerOptions& options, Model* model, Ops* ops,
                 const DatasetSplits* data, StepStrategy* strategy, Sharder train_shard,
                 Sharder test_shard)
    : options_(options),
      model_(model),
      ops_(ops),
      strategy_(strategy),
      train_shard_(std::move(train_shard)),
      test_shard_(std::move(test_shard)),
      train_step_(model, ops, data->train.get()),
      test_step_(model, ops, data->test.get()) {}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainerOptions& options,
                                                         Model* model, Ops* ops,
                                                         const DatasetSplits* data,
                                                         StepStrategy* strategy) {
  // The configuration was validated once where the job was described (the command
  // line's ParseJobSpec, ValidateRunConfig); ranks compare it at their trust boundary
  // (the DDP configuration check, the shard's registration). Here only the trainer's own
  // options are checked.
  const RunConfig& c = options.config;
  if (options.eval_batch < 1) {
    return absl::InvalidArgumentError("eval batch must be >= 1");
  }
  if (options.keep_checkpoints < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keep_checkpoints must be >= 1, got ", options.keep_checkpoints));
  }
  // The sharder's teaching bugs (c.bugs(): no_set_epoch, rank_seeds, uneven_shards)
  // apply to the training set only.
  const ShardOptions train_opts = TrainShardOptions(
      data->train->size(), options.world_size, options.rank, c.seed(), c.drop_last(), c.bugs());
  RINGSIDE_ASSIGN_OR_RETURN(Sharder train_shard, Sharder::Create(train_opts));
  ShardOptions test_opts;
  test_opts.dataset_size = data->test->size();
  test_opts.world_size = options.world_size;
  test_opts.rank = options.rank;
  test_opts.seed = c.seed();
  test_opts.shuffle = false;
  test_opts.mode = ShardMode::kExact;
  RINGSIDE_ASSIGN_OR_RETURN(Sharder test_shard, Sharder::Create(test_opts));
  if (train_shard.num_samples() == 0) {
    return absl::InvalidArgumentError("the training set gives this rank no samples");
  }

  std::unique_ptr<Trainer> trainer(new Trainer(options, model, ops, data, strategy,
                                               std::move(train_shard), std::move(test_shard)));
  bool resumed = false;
  if (options.resume) {
    if (options.out_dir.empty()) {
      return absl::InvalidArgumentError("--resume needs an output directory");
    }
    // No checkpoint yet (a first run, or a restart before the first checkpoint): start
    // fresh, so that one command line serves every attempt of a restarted job.
    // Restore is NotFound only when there is no checkpoint file at all
    // (ReadNewestCheckpoint); a damaged newest one falls back to the one before it.
    const absl::Status restored = trainer->Restore();
    if (!restored.ok() && !absl::IsNotFound(restored)) return restored;
    resumed = restored.ok();
    if (!resumed && options.progress != nullptr) {
      absl::FPrintF(options.progress, "resume: no checkpoint in %s yet, starting from step 0\n",
                    options.out_dir);
    }
  }
  // The teaching bug no_broadcast initialises each rank from seed + rank, as
  // unseeded processes would (and DDP skips the broadcast that hides it).
  const uint64_t init_seed =
      c.seed() + (BugListHas(c.bugs(), kBugNoBroadcast) ? static_cast<uint64_t>(options.rank) : 0);
  if (!resumed) RINGSIDE_RETURN_IF_ERROR(model->InitParams(init_seed));
  RINGSIDE_RETURN_IF_ERROR(trainer->OpenOutputs());
  return trainer;
}

absl::Status Trainer::OpenOutputs() {
  if (options_.out_dir.empty()) return absl::OkStatus();
  RINGSIDE_RETURN_IF_ERROR(MakeDirs(options_.out_dir));
  // Metrics of a resumed run continue the file from the checkpoint's step (records of
  // steps a failed attempt ran past it, and a line a kill cut short, are dropped: this
  // run repeats them, so the file holds every step once); its trace goes to a new
  // file (output_files.h).
  const OutputOwner owner = options_.world_size > 1 ? OutputOwner::kRank : OutputOwner::kSingle;
  const std::string metrics_path =
      absl::StrCat(options_.out_dir, "/", OutputFileName(OutputFile::kMetrics, owner, options_.rank));
  RINGSIDE_ASSIGN_OR_RETURN(metrics_,
                            options_.resume ? MetricsWriter::OpenResumed(metrics_path, step_)
                                            : MetricsWriter::Open(metrics_path, false));
  RINGSIDE_ASSIGN_OR_RETURN(
      trace_,
      TraceWriter::Open(TraceFileForNewRun(options_.out_dir, owner, options_.rank, options_.resume),
                        options_.rank, absl::StrCat(strategy_->role(), " ", options_.rank)));
  trace_->NameTrack(kTrainingTrack, "training thread");
  return absl::OkStatus();
}

absl::Status Trainer::Restore() {
  RINGSIDE_ASSIGN_OR_RETURN(NewestCheckpoint newest, ReadNewestCheckpoint(options_.out_dir));
  if (!newest.warning.empty() && options_.rank == 0) {
    // Every rank reads the same files and falls back alike; one of them says so.
    absl::FPrintF(stderr, "ringside: warning: %s\n", newest.warning);
    fflush(stderr);
  }
  const std::string& path = newest.path;
  const Checkpoint& ckpt = newest.checkpoint;
  const CheckpointHeader& h = ckpt.header;
  if (h.model() != model_->spec() || h.num_params() != model_->num_params()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " holds model '", h.model(), "' (", h.num_params(),
        " parameters), but this run trains '", model_->spec(), "' (", model_->num_params(),
        ")"));
  }
  if (h.config().batch() != options_.config.batch() ||
      std::max(1, h.config().grad_accum()) != std::max(1, options_.config.grad_accum()) ||
      h.config().seed() != options_.config.seed() ||
      h.config().world_size() != options_.config.world_size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " was written with batch ", h.config().batch(), ", seed ",
        h.config().seed(), " and ", h.config().world_size(),
        " workers; resume with the same values"));
  }
  RINGSIDE_RETURN_IF_ERROR(ops_->CopyToDevice(model_->params(), ckpt.params.data(),
                                              ckpt.params.size() * sizeof(float)));
  RINGSIDE_RETURN_IF_ERROR(
      Annotate(strategy_->LoadOptimizerState(ckpt.optimizer_state), path));
  step_ = h.step();
  epoch_ = h.epoch();
  batch_in_epoch_ = h.batch_in_epoch();
  return absl::OkStatus();
}

absl::Status Trainer::SaveCheckpoint() {
  if (options_.out_dir.empty()) return absl::OkStatus();
  RINGSIDE_RETURN_IF_ERROR(strategy_->SettleParams());
  if (options_.write_checkpoints && options_.rank == 0) {
    RINGSIDE_RETURN_IF_ERROR(WriteCheckpointNow());
  }
  return strategy_->AfterCheckpoint();
}

absl::Status Trainer::WriteCheckpointNow() {
  std::vector<float> params(model_->num_params());
  RINGSIDE_RETURN_IF_ERROR(
      ops_->CopyToHost(params.data(), model_->params(), params.size() * sizeof(float)));
  RINGSIDE_ASSIGN_OR_RETURN(std::vector<float> opt, strategy_->SaveOptimizerState());
  CheckpointHeader header;
  header.set_model(model_->spec());
  header.set_step(step_);
  header.set_epoch(epoch_);
  header.set_batch_in_epoch(batch_in_epoch_);
  *header.mutable_config() = options_.config;
  return WriteCheckpointKeeping(options_.out_dir, options_.keep_checkpoints, header, params, opt);
}

absl::StatusOr<EvalResult> Trainer::EvaluateTest(const RunState& run) {
  RINGSIDE_RETURN_IF_ERROR(strategy_->SettleParams());
  const std::vector<int64_t> indices = test_shard_.Indices(0);
  RINGSIDE_ASSIGN_OR_RETURN(EvalResult local,
                            test_step_.Evaluate(indices, options_.eval_batch));
  local.train_loss_sum = run.epoch_loss_sum;
  local.train_count = run.epoch_samples;
  // The evaluation's sums cross the group (a collective): a failure names the step it
  // followed, like the step's own.
  absl::StatusOr<EvalResult> total = strategy_->ReduceEval(local);
  if (!total.ok()) {
    return Annotate(total.status(), absl::StrCat("step ", step_, ": evaluation after epoch ",
                                                 epoch_));
  }
  return total;
}

void Trainer::PrintProgress(const StepMetrics& m, int64_t steps_total, double rate,
                            bool force) {
  if (options_.progress == nullptr) return;
  const int64_t now = NowMicros();
  if (!force && now - last_progress_us_ < options_.progress_interval_s * 1e6) return;
  last_progress_us_ = now;
  const double steps_per_sec =
      rate / (std::max(1, options_.config.batch()) * std::max(1, options_.config.grad_accum()));
  const double eta = steps_per_sec > 0 ? (steps_total - step_) / steps_per_sec : 0;
  absl::FPrintF(options_.progress,
                "epoch %d/%d  step %d/%d  loss %.4f  %.0f samples/s  ETA %s\n",
                epoch_ + 1, options_.config.epochs(), step_, steps_total, m.loss(), rate,
                FormatDuration(eta));
  fflush(options_.progress);
}

absl::Status Trainer::RunMicroBatches(absl::Span<const int64_t> samples,
                                      const StepHooks& hooks, StepMetrics* m,
                                      HookTimes* hook_times) {
  const int batch = options_.config.batch();
  const int64_t n = static_cast<int64_t>(samples.size());
  // Every rank has the same count per step, so this is the mean over the global batch.
  const float loss_scale = 1.0f / static_cast<float>(n * options_.world_size);
  if (StepCompute* compute = strategy_->compute(); compute != nullptr) {
    return compute->Run(samples, loss_scale, m, trace_.get());
  }
  // Micro-batches: gradients accumulate; only the last one announces readiness, so
  // the strategy syncs and steps once per step.
  double loss_sum = 0;
  for (int64_t off = 0; off < n; off += batch) {
    const int64_t mn = std::min<int64_t>(batch, n - off);
    const bool last = off + mn >= n;
    StepMetrics part;
    RINGSIDE_RETURN_IF_ERROR(train_step_.Run(samples.subspan(off, mn), loss_scale, hooks,
                                             /*announce=*/last,
                                             hooks.accumulate_gradients || off > 0, &part,
                                             trace_.get(), hook_times));
    m->set_data_ms(m->data_ms() + part.data_ms());
    m->set_forward_ms(m->forward_ms() + part.forward_ms());
    m->set_backward_ms(m->backward_ms() + part.backward_ms());
    m->set_samples(m->samples() + part.samples());
    m->set_correct(m->correct() + part.correct());
    if (part.skipped_nonfinite()) m->set_skipped_nonfinite(true);
    loss_sum += static_cast<double>(part.loss()) * mn;
  }
  m->set_loss(static_cast<float>(loss_sum / n));
  return absl::OkStatus();
}

absl::Status Trainer::StopNonFinite(const absl::Status& s) const {
  return NonFiniteError(absl::StrCat(
      "step ", step_, ", ", strategy_->role() == "worker" ? "worker " : "rank ",
      options_.rank, ": ", s.message(),
      options_.config.nan_policy() == kNanPolicySkipStep
          ? " (seen after the update was applied: cannot be skipped)"
          : ""));
}

absl::Status Trainer::CheckParamsBeforeCheckpoint() {
  if (options_.out_dir.empty() || !options_.write_checkpoints || options_.rank != 0) {
    return absl::OkStatus();
  }
  RINGSIDE_RETURN_IF_ERROR(Annotate(strategy_->SettleParams(), absl::StrCat("step ", step_)));
  absl::Status s = CheckParamsFinite(ops_, *model_);
  if (IsNonFiniteError(s)) {
    // The parameters the last step (step_ - 1) left.
    return NonFiniteError(absl::StrCat(
        "step ", step_ - 1, ", ", strategy_->role() == "worker" ? "worker " : "rank ",
        options_.rank, ": ", s.message(), " (checkpoint not written)"));
  }
  return s;
}

absl::Status Trainer::RunStep(const std::vector<int64_t>& order, RunState* run) {
  const RunConfig& c = options_.config;
  const int64_t begin = batch_in_epoch_ * run->step_size;
  const int64_t n = std::min<int64_t>(run->step_size, static_cast<int64_t>(order.size()) - begin);
  StepMetrics& m = run->m;
  m.Clear();
  m.set_step(step_);
  m.set_epoch(epoch_);
  m.set_rank(options_.rank);
  m.set_role(strategy_->role());
  m.set_device(ops_->name());
  m.set_emulated(options_.emulated);
  const int64_t t0 = NowMicros();
  m.set_start_us(t0);
  if (trace_ != nullptr) trace_->SetStep(step_);
  HookTimes hook_times;
  if (absl::Status s = RunMicroBatches(absl::MakeConstSpan(order).subspan(begin, n), run->hooks,
                                       &m, &hook_times);
      !s.ok()) {
    return IsNonFiniteError(s) ? StopNonFinite(s) : s;
  }
  if (c.prefetch() && strategy_->compute() == nullptr && batch_in_epoch_ + 1 < run->per_epoch &&
      step_ + 1 < run->steps_total) {
    // Backward is done with this batch: gather the next step's first micro-batch
    // while the strategy's communication finishes. (The first step of an epoch
    // gathers its own: the epoch's end evaluates and checkpoints first.)
    const int64_t next = begin + run->step_size;
    const int64_t nn = std::min<int64_t>(c.batch(), static_cast<int64_t>(order.size()) - next);
    RINGSIDE_RETURN_IF_ERROR(
        train_step_.Prefetch(absl::MakeConstSpan(order).subspan(next, nn), &m, trace_.get()));
  }
  if (absl::Status s = strategy_->FinishStep(hook_times, &m, trace_.get()); !s.ok()) {
    return IsNonFiniteError(s) ? StopNonFinite(s) : Annotate(s, absl::StrCat("step ", step_));
  }
  if (m.skipped_nonfinite()) {
    absl::FPrintF(stderr,
                  "ringside: warning: step %d, %s %d: non-finite value, step skipped "
                  "(--nan_policy=skip_step)\n",
                  step_, strategy_->role() == "worker" ? "worker" : "rank", options_.rank);
  }
  const int64_t t1 = NowMicros();
  m.set_step_ms((t1 - t0) / 1e3);
  if (metrics_ != nullptr) RINGSIDE_RETURN_IF_ERROR(metrics_->Write(m));
  ++step_;
  ++run->steps_run;
  run->samples += n;
  run->last_loss = m.loss();
  if (!m.skipped_nonfinite()) {
    run->epoch_loss_sum += static_cast<double>(m.loss()) * m.samples();
    run->epoch_samples += m.samples();
  }
  const double elapsed = (t1 - run->start_us) / 1e6;
  PrintProgress(m, run->steps_total, run->samples / std::max(elapsed, 1e-9), false);
  if (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0) {
    RINGSIDE_RETURN_IF_ERROR(CheckParamsBeforeCheckpoint());
    // Record the position after this batch.
    ++batch_in_epoch_;
    absl::Status s = SaveCheckpoint();
    --batch_in_epoch_;
    RINGSIDE_RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

absl::Status Trainer::RunEpoch(RunState* run) {
  const RunConfig& c = options_.config;
  const std::vector<int64_t> order = train_shard_.Indices(epoch_);
  if (!c.bugs().empty() && options_.progress != nullptr) {
    PrintEpochOrder(options_.progress, c, options_.rank, epoch_, order, train_shard_);
  }
  for (; batch_in_epoch_ < run->per_epoch && step_ < run->steps_total; ++batch_in_epoch_) {
    RINGSIDE_RETURN_IF_ERROR(RunStep(order, run));
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalResult> Trainer::EndEpoch(RunState* run) {
  ++epoch_;
  batch_in_epoch_ = 0;
  RINGSIDE_ASSIGN_OR_RETURN(EvalResult eval, EvaluateTest(*run));
  run->epoch_loss_sum = 0;
  run->epoch_samples = 0;
  if (options_.progress != nullptr) {
    // The train loss: the mean over the epoch's steps and the global batch (all
    // workers'), as one process at the global batch prints.
    absl::FPrintF(options_.progress,
                  "epoch %d/%d done  train loss %.4f  test loss %.4f  test accuracy %.4f\n",
                  epoch_, options_.config.epochs(),
                  eval.train_loss_sum / std::max<int64_t>(1, eval.train_count),
                  eval.loss_sum / std::max<int64_t>(1, eval.count),
                  static_cast<double>(eval.correct) / std::max<int64_t>(1, eval.count));
    fflush(options_.progress);
  }
  RINGSIDE_RETURN_IF_ERROR(CheckParamsBeforeCheckpoint());
  RINGSIDE_RETURN_IF_ERROR(SaveCheckpoint());
  return eval;
}

absl::StatusOr<TrainResult> Trainer::Run() {
  const RunConfig& c = options_.config;
  RunState run;
  // One optimizer step consumes grad_accum micro-batches of `batch` samples.
  run.step_size = static_cast<int64_t>(c.batch()) * std::max(1, c.grad_accum());
  run.per_epoch = BatchesPerEpoch(train_shard_, run.step_size);
  run.steps_total = run.per_epoch * c.epochs();
  if (c.max_steps() > 0) run.steps_total = std::min<int64_t>(run.steps_total, c.max_steps());
  run.hooks = strategy_->hooks();
  // Numerical safety (--nan_policy): the step stops at a non-finite value
  // (StopNonFinite), or under skip_step discards the step in the form the strategy's
  // hooks chose.
  run.hooks.skip_nonfinite = c.nan_policy() == kNanPolicySkipStep;
  // Lifecycle start: every process joins and holds the job's parameters for step_.
  RINGSIDE_RETURN_IF_ERROR(strategy_->Start(step_));
  if (const int64_t joined = strategy_->joined_step(); joined > step_) {
    // Elastic PS: this worker rejoined a running job at the shards' step.
    step_ = joined;
    epoch_ = static_cast<int>(joined / run.per_epoch);
    batch_in_epoch_ = joined % run.per_epoch;
  }
  run.start_us = NowMicros();
  EvalResult eval;
  int64_t evaluated_at = -1;  // Step at which `eval` was computed.
  while (step_ < run.steps_total) {
    RINGSIDE_RETURN_IF_ERROR(RunEpoch(&run));
    if (batch_in_epoch_ < run.per_epoch) break;  // Stopped by max_steps mid-epoch.
    // Epoch finished: evaluate and checkpoint at its boundary.
    RINGSIDE_ASSIGN_OR_RETURN(eval, EndEpoch(&run));
    evaluated_at = step_;
  }
  RINGSIDE_RETURN_IF_ERROR(Annotate(strategy_->SettleParams(), absl::StrCat("step ", step_)));
  TrainResult result;
  result.seconds = (NowMicros() - run.start_us) / 1e6;
  result.steps = step_;
  result.steps_this_run = run.steps_run;
  result.samples_per_sec = result.seconds > 0 ? run.samples / result.seconds : 0;
  // Every rank runs the same number of samples per step.
  result.job_samples_per_sec = result.samples_per_sec * options_.world_size;
  if (evaluated_at != step_) {
    RINGSIDE_ASSIGN_OR_RETURN(eval, EvaluateTest(run));
  }
  // Over the global batch (all workers') and the steps of the last epoch this run
  // completed (or of the epoch it stopped in); the last step's own where none ran.
  result.last_loss = eval.train_count > 0 ? eval.train_loss_sum / eval.train_count : run.last_loss;
  result.test_loss = eval.loss_sum / std::max<int64_t>(1, eval.count);
  result.test_accuracy = static_cast<double>(eval.correct) / std::max<int64_t>(1, eval.count);
  RINGSIDE_RETURN_IF_ERROR(CheckParamsBeforeCheckpoint());
  RINGSIDE_RETURN_IF_ERROR(SaveCheckpoint());
  // Lifecycle end: every process is done.
  RINGSIDE_RETURN_IF_ERROR(strategy_->Finish());
  if (metrics_ != nullptr) RINGSIDE_RETURN_IF_ERROR(metrics_->Close());
  if (trace_ != nullptr) RINGSIDE_RETURN_IF_ERROR(trace_->Close());
  return result;
}

}  // namespace ringside
