// experiments/costmodel/: the calibrated cost model. Door of the folder.
//   cost_model.h  closed-form step times of the parameter server and the all-reduce
//                 algorithms from a handful of constants (docs/cost_model.md)
//   calibrate.h   `ringside calibrate`: those constants measured on this machine
//   calibration_check.h  CheckCalibrationFits: whether a calibration's model and batch
//                 are a run's, and how far off predictions are when not
//   calibration_json.h, calibration.proto  the calibration file (protobuf's JSON)
//   model_presets.h  published models by name (resnet-50, vgg-16, bert-large): layer
//                 sizes and FLOPs for `simulate --model`
//   simulate.h    `ringside simulate`: predicted step time, speedup, bound and used
//                 bandwidth up to 1024 workers, from a calibration or for a described
//                 cluster (--cluster), and where the strategies' curves cross
#ifndef RINGSIDE_EXPERIMENTS_COSTMODEL_COSTMODEL_H_
#define RINGSIDE_EXPERIMENTS_COSTMODEL_COSTMODEL_H_

#include "experiments/costmodel/calibrate.h"
#include "experiments/costmodel/calibration_check.h"
#include "experiments/costmodel/calibration_json.h"
#include "experiments/costmodel/cost_model.h"
#include "experiments/costmodel/model_presets.h"
#include "experiments/costmodel/simulate.h"

#endif  // RINGSIDE_EXPERIMENTS_COSTMODEL_COSTMODEL_H_
