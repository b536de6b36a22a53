// experiments/explain/: `ringside explain`, step-by-step views of the two ways to
// synchronise data-parallel training, each checked against the real thing. Door of the
// package:
//   ring_explainer.h  the Gloo backend's ring all-reduce, step by step, with values;
//                     checked bit for bit against the backend on the same input
//   ps_explainer.h    one BSP step of the parameter server: push, aggregate, update,
//                     pull and the bytes through each node; checked against a real
//                     run's shard metrics
//   frames.h          either as a sequence of frames: one SVG, or an HTML page that
//                     steps through them
#ifndef RINGSIDE_EXPERIMENTS_EXPLAIN_EXPLAIN_H_
#define RINGSIDE_EXPERIMENTS_EXPLAIN_EXPLAIN_H_

#include "experiments/explain/frames.h"
#include "experiments/explain/ps_explainer.h"
#include "experiments/explain/ring_explainer.h"

#endif  // RINGSIDE_EXPERIMENTS_EXPLAIN_EXPLAIN_H_
