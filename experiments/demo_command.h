// `ringside demo`: the preset comparison behind the README's main command. Single
// process, a parameter server with one master, and DDP, with 1, 2 and 4 workers,
// training the Fashion-MNIST MLP; runs the matrix (`compare`), writes the report
// (`report`), prints the summary table and where the report is.
#ifndef RINGSIDE_EXPERIMENTS_DEMO_COMMAND_H_
#define RINGSIDE_EXPERIMENTS_DEMO_COMMAND_H_

#include <string>

#include "absl/status/status.h"

namespace ringside {

// The demo's spec (text format), on `network` links ("" for loopback); the loopback
// version is also shipped as experiments/demo.textproto.
std::string DemoSpec(const std::string& network);

// Blocks until the matrix and the report are done (resuming an interrupted demo in
// `out_dir`).
absl::Status RunDemo(const std::string& out_dir);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_DEMO_COMMAND_H_
