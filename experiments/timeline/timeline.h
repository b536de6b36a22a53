// experiments/timeline/: one Perfetto timeline per run. Door header: what the rest of
// the tree includes (the merge of a run's per-process traces, merge.h).
#ifndef RINGSIDE_EXPERIMENTS_TIMELINE_TIMELINE_H_
#define RINGSIDE_EXPERIMENTS_TIMELINE_TIMELINE_H_

#include "experiments/timeline/merge.h"  // IWYU pragma: export

#endif  // RINGSIDE_EXPERIMENTS_TIMELINE_TIMELINE_H_
