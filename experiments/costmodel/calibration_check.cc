#include "experiments/costmodel/calibration_check.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model.h"
#include "common/ps_placement.h"
#include "common/status_macros.h"
#include "ddp_ring/reducer.h"
#include "common/ops_factory.h"

namespace ringside {
namespace {

// "+130%", "-57%".
std::string Percent(double ratio) { return absl::StrFormat("%+.0f%%", (ratio - 1) * 100); }

}  // namespace

absl::StatusOr<ModelWeight> WeighModel(const std::string& spec, int batch) {
  // Threads 0: leaves the process's BLAS setting alone; nothing is computed.
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 0));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                            Model::Create(spec, Shape{1, 28, 28}, 10, ops.get()));
  ModelWeight weight{model->GemmFlops(batch), 4.0 * model->num_params(), {}};
  for (const ParamRange& layer : model->layer_ranges()) weight.layer_bytes.push_back(4.0 * layer.size);
  return weight;
}

absl::StatusOr<double> BusiestShardFraction(const std::string& spec, int shards, const std::string& placement) {
  RINGSIDE_ASSIGN_OR_RETURN(const PsPlacement p, ParsePsPlacement(placement));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 0));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(spec, Shape{1, 28, 28}, 10, ops.get()));
  std::vector<int64_t> tensors;
  for (const ParamRange& t : model->TensorRanges()) tensors.push_back(t.size);
  RINGSIDE_ASSIGN_OR_RETURN(const PsPartition partition, PsPartition::Create(tensors, shards, p));
  int64_t busiest = 0;
  for (int s = 0; s < shards; ++s) busiest = std::max(busiest, partition.shard(s).size);
  return static_cast<double>(busiest) / partition.num_params();
}

absl::StatusOr<LossyBuckets> LossyBucketsOf(const std::string& spec, const std::string& compress,
                                            int64_t first_bucket_bytes, int64_t bucket_cap_bytes) {
  RINGSIDE_ASSIGN_OR_RETURN(const Compression compression, ParseCompressionSpec(compress));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 0));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(spec, Shape{1, 28, 28}, 10, ops.get()));
  const std::vector<Bucket> buckets =
      ComputeBuckets(model->layer_ranges(), first_bucket_bytes > 0 ? first_bucket_bytes : kDefaultFirstBucketBytes,
                     bucket_cap_bytes > 0 ? bucket_cap_bytes : kDefaultBucketCapBytes);
  const std::vector<ParamTensor> tensors = model->Tensors();
  LossyBuckets out;
  for (const Bucket& b : buckets) {
    out.bucket_bytes.push_back(4.0 * b.size);
    RINGSIDE_ASSIGN_OR_RETURN(LossyPayload payload, LossyPayloadOf(compression, {b.offset, b.size}, tensors));
    out.payloads.push_back(payload);
  }
  return out;
}

absl::StatusOr<std::vector<double>> ModelTensorBytes(const std::string& spec) {
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Ops> ops, NewOps("cpu", 0, 0));
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(spec, Shape{1, 28, 28}, 10, ops.get()));
  std::vector<double> bytes;
  for (const ParamRange& t : model->TensorRanges()) bytes.push_back(4.0 * t.size);
  return bytes;
}

absl::Status CheckCalibrationFits(const Calibration& c, const std::string& model, int batch) {
  const std::string fix = absl::StrCat("; re-run `ringside calibrate",
                                       model.empty() ? "" : absl::StrCat(" --model=", model),
                                       batch > 0 ? absl::StrCat(" --batch=", batch) : "", "`");
  if (c.model.empty() || c.batch <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the calibration does not say which model and batch it was measured with (written by an "
        "older ringside calibrate): its compute time may belong to another model and batch than ",
        model.empty() ? "this run's model" : model, batch > 0 ? absl::StrCat(" at batch ", batch) : "",
        fix));
  }
  if (c.model == model && c.batch == batch) return absl::OkStatus();
  std::string error = absl::StrCat("the calibration was measured with ", c.model, " at batch ",
                                   c.batch, ", this run is ", model, " at batch ", batch, ": ");
  const absl::StatusOr<ModelWeight> measured = WeighModel(c.model, c.batch);
  const absl::StatusOr<ModelWeight> run = WeighModel(model, batch);
  if (!measured.ok() || !run.ok() || run->gemm_flops <= 0 || run->bytes <= 0) {
    absl::StrAppend(&error, "predictions for it are off by an unknown amount");
  } else {
    const double work = measured->gemm_flops / run->gemm_flops;
    // The file's own model bytes (what predictions use), else its model's.
    const double bytes = (c.model_bytes > 0 ? c.model_bytes : measured->bytes) / run->bytes;
    absl::StrAppendFormat(&error, "its compute time is for %.2fx this run's GEMM work (predicted compute off by about %s)",
                          work, Percent(work));
    if (std::abs(bytes - 1) > 1e-9) {
      absl::StrAppendFormat(&error, " and its model bytes %.2fx this model's (predicted communication off by about %s)",
                            bytes, Percent(bytes));
    }
  }
  return absl::FailedPreconditionError(error + fix);
}

}  // namespace ringside
