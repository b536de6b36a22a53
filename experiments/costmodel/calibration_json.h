// The calibration file's JSON: cost_model.h's Calibration as a CalibrationMessage
// (calibration.proto), written and read with protobuf's JSON support.
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATION_JSON_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATION_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "experiments/costmodel/calibration_spread.h"
#include "experiments/costmodel/cost_model.h"

namespace ringside {

// One JSON object, fields in calibration.proto's order and names, every number printed
// so that a round trip is exact.
std::string CalibrationToJson(const Calibration& calibration);
// The same with how it was measured (repeats, spreads, the sweeps' largest messages);
// fields of `measurement` left at zero are written as absent.
std::string CalibrationToJson(const Calibration& calibration,
                              const CalibrationMeasurement& measurement);
// Parses JSON in that mapping (any key order and whitespace). compute_s, push_pull and
// allreduce (each with both fields) are required, the rest default to 0 (model to "":
// files written before model, batch and threads were recorded; see
// CheckCalibrationFits).
// InvalidArgument for malformed JSON, an unknown key, a non-number value, a missing
// required field or a failing sanity check (ValidateCalibration).
absl::StatusOr<Calibration> CalibrationFromJson(const std::string& json);
// The same, and sets `*measurement` (not null) from the file's repeats, spreads and
// sweep extents (zero / empty in a file written before they were recorded; each
// spread's median and spread recomputed from its values). Also InvalidArgument for
// negative repeats or sweep bytes, or a spread without a name or values.
absl::StatusOr<Calibration> CalibrationFromJson(const std::string& json,
                                                CalibrationMeasurement* measurement);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_CALIBRATION_JSON_H_
