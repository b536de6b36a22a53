// The report's findings paragraph, computed from its numbers.
#ifndef RINGSIDE_EXPERIMENTS_REPORT_FINDINGS_H_
#define RINGSIDE_EXPERIMENTS_REPORT_FINDINGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/report/points.h"

namespace ringside {

// The findings paragraph: where each strategy stops scaling and by how much, and what
// dominates its step there.
std::string Findings(const std::vector<ReportPoint>& points, int64_t num_params);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_REPORT_FINDINGS_H_
