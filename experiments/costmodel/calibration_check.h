// Whether a calibration applies to a run: its compute times were measured on one model
// at one per-worker batch, and its model bytes are that model's, so a prediction for
// another model or batch is off by roughly the ratio of their work and sizes.
// `ringside simulate` and `ringside report` call it before predicting anything.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATION_CHECK_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATION_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ddp_ring/lossy_compressor.h"
#include "experiments/costmodel/cost_model.h"

namespace ringside {

// What a model spec weighs: one step's GEMM work at a batch (Model::GemmFlops) and
// its parameter bytes (in all and per layer), built for 28x28x1 inputs and 10 classes (every dataset ringside
// reads). InvalidArgument from Model::Create for a spec that does not build.
struct ModelWeight {
  double gemm_flops = 0;
  double bytes = 0;
  std::vector<double> layer_bytes;  // Each layer with parameters, in layer order.
};
absl::StatusOr<ModelWeight> WeighModel(const std::string& spec, int batch);

// The share of the model's floats the busiest of `shards` standalone shards holds under
// `placement` (RunConfig.ps_placement; common/ps_placement.h), the model built as
// WeighModel builds it. 1 / S-ish for balanced; errors as the model's or the
// placement's.
absl::StatusOr<double> BusiestShardFraction(const std::string& spec, int shards, const std::string& placement);
// The model's tensors (Model::TensorRanges), in bytes, model order, built as WeighModel
// builds it.
absl::StatusOr<std::vector<double>> ModelTensorBytes(const std::string& spec);

// DDP's buckets of the model (the reducer's ComputeBuckets at these caps, 0: its
// defaults) in launch order, in bytes, and under --compress=`compress` (topk:F or
// powersgd:R) each one's payload (LossyPayloadOf): Scenario's bucket_bytes and
// lossy_buckets. The model built as WeighModel builds it; errors as its and the
// compression's.
struct LossyBuckets {
  std::vector<double> bucket_bytes;
  std::vector<LossyPayload> payloads;
};
absl::StatusOr<LossyBuckets> LossyBucketsOf(const std::string& spec, const std::string& compress,
                                            int64_t first_bucket_bytes, int64_t bucket_cap_bytes);

// OK when `calibration` was measured on `model` at per-worker `batch`. Otherwise
// FailedPrecondition with one message that names both and estimates the error the
// mismatch causes:
//   - a different model or batch: the calibrated compute time is for k times this run's
//     GEMM work (WeighModel), so predicted compute is off by about (k - 1) x 100%, and
//     the calibrated model bytes are j times this model's, so predicted communication
//     is off by about (j - 1) x 100% (where a model cannot be built, the message says
//     the size of the error is unknown);
//   - a calibration without model or batch (written by an older `ringside calibrate`):
//     says so.
// Every message ends with the calibrate command that fits the run. The caller decides
// whether to refuse (simulate) or warn (a report of runs already made).
absl::Status CheckCalibrationFits(const Calibration& calibration, const std::string& model,
                                  int batch);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATION_CHECK_H_
