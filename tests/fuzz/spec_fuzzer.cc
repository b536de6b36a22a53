// Fuzz entry point for the experiment spec parser (experiments/matrix/spec.h): the
// input is a spec's text. A spec that ParseSpec accepts must expand into cells whose
// ids are distinct and whose `ringside train` flags can be written, in bounded time
// and memory.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "experiments/matrix/spec.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ringside::ExperimentSpec> spec = ringside::ParseSpec(text, "fuzz.textproto");
  if (!spec.ok()) return 0;
  std::vector<ringside::Cell> cells = ringside::ExpandCells(*spec);
  ringside::fuzz::Require(!cells.empty(), "a valid spec has cells");
  // A 2-core machine, as the CI's.
  if (!ringside::ResolveCellEmulation(*spec, 2, &cells).ok()) return 0;
  std::set<std::string> ids;
  for (const ringside::Cell& c : cells) {
    ringside::fuzz::Require(ids.insert(c.id).second, "cell ids are distinct");
    ringside::fuzz::Require(!ringside::CellTrainArgs(*spec, c, "/nonexistent").empty(), "flags");
  }
  ringside::DescribeEmulation(*spec, cells[0].node_cpus);
  ringside::DescribeEmulationShort(*spec, cells[0].node_cpus);
  return 0;
}
