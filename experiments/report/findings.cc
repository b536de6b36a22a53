#include "experiments/report/findings.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringside {

std::string Findings(const std::vector<ReportPoint>& points, int64_t num_params) {
  std::string out;
  std::map<std::string, std::vector<const ReportPoint*>> by_label;
  std::vector<std::string> order;
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0 || p.kind == "single") continue;
    if (by_label[p.label].empty()) order.push_back(p.label);
    by_label[p.label].push_back(&p);
  }
  const double model_bytes = 4.0 * num_params;
  for (const std::string& label : order) {
    const auto& v = by_label[label];
    const ReportPoint* best = v[0];
    for (const ReportPoint* p : v) {
      if (p->speedup > best->speedup) best = p;
    }
    const ReportPoint* last = v.back();
    absl::StrAppendFormat(&out, "**%s**: speedup %.2fx at %d worker(s) (efficiency %.0f%%)", label,
                          last->speedup, last->workers, 100 * last->efficiency);
    if (best != last) {
      absl::StrAppendFormat(&out, "; it peaks at %.2fx with %d and then falls by %.0f%%", best->speedup,
                            best->workers, 100 * (1 - last->speedup / best->speedup));
    }
    const double comm = last->comm_ms + last->wait_ms;
    const double share = last->step_ms > 0 ? comm / last->step_ms : 0;
    absl::StrAppendFormat(&out, ". At %d workers communication and waiting take %.0f%% of the step (%.2f of %.2f ms)",
                          last->workers, 100 * share, comm, last->step_ms);
    if (model_bytes > 0 && last->busiest_bytes_in > 0) {
      const double ratio = (last->busiest_bytes_in + last->busiest_bytes_out) / 2 / model_bytes;
      if (last->kind == "ps") {
        absl::StrAppendFormat(&out, "; its busiest shard moves %.2f x M in each direction per step (N x M / S predicts the master's load grows with N)",
                              ratio);
      } else {
        absl::StrAppendFormat(&out, "; each ring rank moves %.2f x M per step (2(N-1)/N = %.2f: almost flat in N)",
                              ratio, 2.0 * (last->workers - 1) / last->workers);
      }
    }
    absl::StrAppend(&out, ".\n\n");
  }
  // Side by side at the largest worker count that several strategies reached.
  int top = 0;
  for (const std::string& label : order) top = std::max(top, by_label[label].back()->workers);
  std::vector<const ReportPoint*> at_top;
  for (const std::string& label : order) {
    for (const ReportPoint* p : by_label[label]) {
      if (p->workers == top) at_top.push_back(p);
    }
  }
  if (at_top.size() >= 2) {
    std::sort(at_top.begin(), at_top.end(),
              [](const ReportPoint* a, const ReportPoint* b) { return a->step_ms < b->step_ms; });
    absl::StrAppendFormat(&out, "At %d workers **%s** is the fastest (%.2f ms per step)", top,
                          at_top[0]->label, at_top[0]->step_ms);
    for (size_t i = 1; i < at_top.size(); ++i) {
      absl::StrAppendFormat(&out, "; %s takes %.2fx as long", at_top[i]->label,
                            at_top[i]->step_ms / at_top[0]->step_ms);
    }
    absl::StrAppend(&out, ". In the cost model (docs/cost_model.md) a master's link carries N x M / S "
                          "each way per step while a ring rank's carries 2(N-1)/N x M, so on equal "
                          "links a single master falls behind the ring as N grows.\n\n");
  }
  if (out.empty()) out = "No multi-worker cell finished.\n";
  return out;
}

}  // namespace ringside
