// The compiled-in cluster presets: each file under presets/ embedded at build time
// (BUILD: presets_gen), so the file a user reads and the preset `--cluster=NAME` loads
// cannot differ. Internal to experiments/cluster/ (profile.h is the interface).
#ifndef RINGSIDE_EXPERIMENTS_CLUSTER_PRESETS_H_
#define RINGSIDE_EXPERIMENTS_CLUSTER_PRESETS_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace ringside {

struct ClusterPresetFile {
  absl::string_view name;  // The file's name without ".textproto".
  absl::string_view text;
};

// Every preset, in file-name order. The views point at static storage.
const std::vector<ClusterPresetFile>& ClusterPresetFiles();

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_CLUSTER_PRESETS_H_
