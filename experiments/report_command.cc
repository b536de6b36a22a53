#include "experiments/report_command.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "experiments/compare_command.h"
#include "experiments/file_util.h"
#include "experiments/network_emulator.h"
#include "google/protobuf/text_format.h"

extern char** environ;

namespace ringside {
namespace {

namespace fs = std::filesystem;

std::string HtmlEscape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

// Runs gnuplot on `script` (cwd = `dir`). FailedPrecondition if it is not installed.
absl::Status RunGnuplot(const std::string& dir, const std::string& script_path) {
  const std::string gnuplot = "/usr/bin/gnuplot";
  if (!fs::exists(gnuplot)) {
    return absl::FailedPreconditionError("gnuplot is not installed (apt-get install gnuplot-nox)");
  }
  std::vector<std::string> args = {gnuplot, script_path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log = dir + "/gnuplot.log";
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return absl::InternalError(absl::StrCat("cannot run gnuplot: ", strerror(rc)));
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed; see ", log));
  }
  return absl::OkStatus();
}

// A label as gnuplot text: quotes would end gnuplot's strings.
std::string G(const std::string& text) {
  return absl::StrReplaceAll(text, {{"'", "_"}, {"\"", "_"}, {"\\", "_"}});
}

// One line plot: x = workers, one series per strategy label.
struct Series {
  std::string label;
  std::vector<std::pair<double, double>> xy;
};

std::string DataBlock(const std::string& name, const std::vector<Series>& series) {
  std::string out;
  for (size_t i = 0; i < series.size(); ++i) {
    absl::StrAppend(&out, "$", name, i, " << EOD\n");
    for (const auto& [x, y] : series[i].xy) absl::StrAppendFormat(&out, "%g %g\n", x, y);
    absl::StrAppend(&out, "EOD\n");
  }
  return out;
}

std::string LinePlot(const std::string& name, const std::string& title, const std::string& ylabel,
                     const std::vector<Series>& series, const std::string& extra_plot,
                     bool log_x) {
  std::string s = DataBlock(name, series);
  absl::StrAppend(&s, "set output '", name, ".svg'\n", "set title '", title, "'\n",
                  "set xlabel 'workers'\nset ylabel '", ylabel, "'\n",
                  log_x ? "set logscale x 2\n" : "unset logscale x\n", "set key top left\n",
                  "plot ");
  std::vector<std::string> parts;
  for (size_t i = 0; i < series.size(); ++i) {
    parts.push_back(absl::StrCat("$", name, i, " using 1:2 with linespoints lw 2 pt 7 title '",
                                 G(series[i].label), "'"));
  }
  if (!extra_plot.empty()) parts.push_back(extra_plot);
  absl::StrAppend(&s, absl::StrJoin(parts, ", "), "\n");
  return s;
}

std::string PredictionCell(const ReportPoint& p) {
  if (p.predicted_step_ms <= 0 || p.step_ms <= 0) return "";
  return absl::StrFormat("%.2f (%+.0f%%)", p.predicted_step_ms,
                         100 * (p.predicted_step_ms - p.step_ms) / p.step_ms);
}

}  // namespace

absl::StatusOr<std::vector<CellResult>> ReadCellResults(const std::string& dir) {
  std::vector<CellResult> out;
  std::error_code error;
  const fs::path cells = fs::path(dir) / "cells";
  if (!fs::is_directory(cells, error)) {
    return absl::NotFoundError(absl::StrCat(dir, " has no cells/ (run `ringside compare` first)"));
  }
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(cells, error)) paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  for (const fs::path& p : paths) {
    absl::StatusOr<std::string> text = ReadFile((p / "result.textproto").string());
    if (!text.ok()) continue;  // Unfinished cell.
    CellResult r;
    if (google::protobuf::TextFormat::ParseFromString(*text, &r)) out.push_back(r);
  }
  if (out.empty()) return absl::NotFoundError(absl::StrCat(dir, " has no finished cells"));
  return out;
}

std::vector<ReportPoint> BuildPoints(const std::vector<CellResult>& results) {
  std::vector<std::string> order;
  std::map<std::pair<std::string, int>, std::vector<const CellResult*>> groups;
  for (const CellResult& r : results) {
    if (std::find(order.begin(), order.end(), r.label()) == order.end()) order.push_back(r.label());
    groups[{r.label(), r.workers()}].push_back(&r);
  }
  // Single-process baseline throughput.
  std::vector<double> single;
  for (const CellResult& r : results) {
    if (r.kind() == "single" && r.status() == "ok") single.push_back(r.samples_per_sec());
  }
  const double base_single = Median(single);
  std::vector<ReportPoint> points;
  for (const std::string& label : order) {
    double base_own = 0;
    if (auto it = groups.find({label, 1}); it != groups.end()) {
      std::vector<double> v;
      for (const CellResult* r : it->second) {
        if (r->status() == "ok") v.push_back(r->samples_per_sec());
      }
      base_own = Median(v);
    }
    const double base = base_single > 0 ? base_single : base_own;
    for (auto& [key, cells] : groups) {
      if (key.first != label) continue;
      ReportPoint p;
      p.label = label;
      p.kind = cells[0]->kind();
      p.workers = key.second;
      std::map<std::string, std::vector<double>> v;
      for (const CellResult* r : cells) {
        p.cells.push_back(r->cell());
        if (r->status() != "ok") {
          ++p.failed_repeats;
          p.failure = r->reason();
          continue;
        }
        ++p.ok_repeats;
        v["step"].push_back(r->median_step_ms());
        v["sps"].push_back(r->samples_per_sec());
        v["compute"].push_back(r->compute_ms());
        v["comm"].push_back(r->comm_ms());
        v["wait"].push_back(r->wait_ms());
        v["update"].push_back(r->update_ms());
        v["in"].push_back(r->busiest_bytes_in());
        v["out"].push_back(r->busiest_bytes_out());
        v["acc"].push_back(r->test_accuracy());
        v["wall"].push_back(r->wall_s());
      }
      p.step_ms = Median(v["step"]);
      p.samples_per_sec = Median(v["sps"]);
      p.speedup = base > 0 ? p.samples_per_sec / base : 0;
      p.efficiency = p.speedup / p.workers;
      p.compute_ms = Median(v["compute"]);
      p.comm_ms = Median(v["comm"]);
      p.wait_ms = Median(v["wait"]);
      p.update_ms = Median(v["update"]);
      p.busiest_bytes_in = Median(v["in"]);
      p.busiest_bytes_out = Median(v["out"]);
      p.test_accuracy = Median(v["acc"]);
      p.wall_s = Median(v["wall"]);
      points.push_back(p);
    }
  }
  return points;
}

void SortPointsBySpec(const std::string& spec_text, std::vector<ReportPoint>* points) {
  std::vector<std::string> spec_order;
  if (ExperimentSpec parsed; google::protobuf::TextFormat::ParseFromString(spec_text, &parsed)) {
    for (const StrategySpec& s : parsed.strategies()) spec_order.push_back(StrategyLabel(s));
  }
  auto rank = [&](const std::string& label) {
    return std::find(spec_order.begin(), spec_order.end(), label) - spec_order.begin();
  };
  std::stable_sort(points->begin(), points->end(), [&](const ReportPoint& a, const ReportPoint& b) {
    return std::make_pair(rank(a.label), a.workers) < std::make_pair(rank(b.label), b.workers);
  });
}

void PredictPoints(const Calibration& calibration, const ExperimentSpec& spec, int cores,
                   std::vector<ReportPoint>* points) {
  absl::StatusOr<NetworkProfile> profile = ParseNetworkProfile(spec.network());
  double link = 0, master_link = 0;
  if (profile.ok() && profile->enabled) {
    link = profile->link.bits_per_sec / 8;
    master_link = LinkForRole(*profile, "master").bits_per_sec / 8;
  }
  for (ReportPoint& p : *points) {
    const StrategySpec* strategy = nullptr;
    for (const StrategySpec& s : spec.strategies()) {
      if (StrategyLabel(s) == p.label) strategy = &s;
    }
    if (strategy == nullptr || p.ok_repeats == 0) continue;
    Calibration c = calibration;
    // Workers compute at the same time under BSP; more of them than cores share.
    c.compute_s *= std::max(1.0, static_cast<double>(p.workers) / std::max(1, cores));
    c.backward_s *= std::max(1.0, static_cast<double>(p.workers) / std::max(1, cores));
    if (p.kind == "single") {
      p.predicted_step_ms = SingleProcessStepSeconds(c, calibration.model_bytes) * 1e3;
      continue;
    }
    Scenario s;
    s.workers = p.workers;
    s.model_bytes = calibration.model_bytes;
    s.link_bytes_per_s = link;
    s.master_link_bytes_per_s = master_link != link ? master_link : 0;
    if (p.kind == "ps") {
      s.strategy = Strategy::kPs;
      s.shards = std::max(1, strategy->ps_shards());
      s.colocated = strategy->ps_colocated();
      if (s.colocated) s.colocated_hosts = 1;  // --ps_colocated: every shard in worker 0.
      s.chunk_bytes = 1 << 20;
    } else {
      // "auto" and "recursive-doubling" are predicted as the ring: at 2 ranks (where
      // auto picks recursive doubling) both move M bytes each way per rank, and the
      // ring's two latency terms make the prediction an upper bound.
      s.strategy = strategy->allreduce() == "halving-doubling" ? Strategy::kHalvingDoubling
                                                               : Strategy::kRing;
      s.overlap = !strategy->no_overlap();
    }
    absl::StatusOr<Prediction> prediction = Predict(c, s);
    if (prediction.ok()) p.predicted_step_ms = prediction->step_s * 1e3;
  }
}

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

absl::Status RunReport(const std::string& dir) {
  absl::StatusOr<std::vector<CellResult>> results = ReadCellResults(dir);
  if (!results.ok()) return results.status();
  std::vector<ReportPoint> points = BuildPoints(*results);
  int64_t num_params = 0;
  for (const CellResult& r : *results) num_params = std::max(num_params, r.num_params());
  const std::string spec = ReadFile(dir + "/spec.textproto").value_or("");
  SortPointsBySpec(spec, &points);
  bool predicted = false;
  if (fs::exists(dir + "/calibration.json")) {
    absl::StatusOr<std::string> text = ReadFile(dir + "/calibration.json");
    absl::StatusOr<Calibration> calibration =
        text.ok() ? CalibrationFromJson(*text) : absl::StatusOr<Calibration>(text.status());
    ExperimentSpec parsed;
    if (calibration.ok() && google::protobuf::TextFormat::ParseFromString(spec, &parsed)) {
      PredictPoints(*calibration, parsed, static_cast<int>(std::thread::hardware_concurrency()), &points);
      predicted = true;
    }
  }

  // Series per strategy label (multi-worker strategies; single is the baseline).
  std::map<std::string, Series> speed, eff, thr, bytes;
  std::vector<std::string> labels;
  int max_workers = 1;
  for (const ReportPoint& p : points) {
    max_workers = std::max(max_workers, p.workers);
    if (p.ok_repeats == 0) continue;
    if (std::find(labels.begin(), labels.end(), p.label) == labels.end()) labels.push_back(p.label);
    speed[p.label].label = eff[p.label].label = thr[p.label].label = bytes[p.label].label = p.label;
    speed[p.label].xy.push_back({p.workers, p.speedup});
    eff[p.label].xy.push_back({p.workers, p.efficiency});
    thr[p.label].xy.push_back({p.workers, p.samples_per_sec});
    bytes[p.label].xy.push_back({p.workers, (p.busiest_bytes_in + p.busiest_bytes_out) / 2 / 1e6});
  }
  auto ordered = [&](std::map<std::string, Series>& m, bool skip_single) {
    std::vector<Series> v;
    for (const std::string& l : labels) {
      if (skip_single && m[l].xy.size() == 1 && m[l].xy[0].first == 1 && l == "single") continue;
      v.push_back(m[l]);
    }
    return v;
  };
  const std::string plot_dir = dir + "/report_plots";
  std::error_code error;
  fs::create_directories(plot_dir, error);
  std::string script = "set terminal svg size 640,400 enhanced font 'sans,11' background '#ffffff'\n"
                       "set grid\n";
  absl::StrAppend(&script, LinePlot("speedup", "Speedup vs workers (weak scaling)", "speedup over single process",
                                    ordered(speed, true), "x with lines dt 2 lc rgb '#888888' title 'ideal'", true));
  absl::StrAppend(&script, "set yrange [0:*]\n",
                  LinePlot("efficiency", "Scaling efficiency", "speedup / workers", ordered(eff, true),
                           "1 with lines dt 2 lc rgb '#888888' title 'ideal'", true),
                  "set yrange [*:*]\n");
  absl::StrAppend(&script, LinePlot("throughput", "Throughput", "samples/s (all workers)", ordered(thr, false), "", true));
  absl::StrAppend(&script, LinePlot("bytes", "Bytes per step through the busiest node (each direction)",
                                    "MB per step", ordered(bytes, true), "", true));
  // Step time, measured (solid) and predicted by the cost model (dashed, same colour).
  {
    std::vector<Series> measured, model;
    for (const std::string& l : labels) {
      Series m{l, {}}, q{absl::StrCat(l, " (model)"), {}};
      for (const ReportPoint& p : points) {
        if (p.label != l || p.ok_repeats == 0) continue;
        m.xy.push_back({p.workers, p.step_ms});
        if (p.predicted_step_ms > 0) q.xy.push_back({p.workers, p.predicted_step_ms});
      }
      measured.push_back(m);
      model.push_back(q);
    }
    absl::StrAppend(&script, DataBlock("stepm", measured), DataBlock("stepq", model),
                    "set output 'steptime.svg'\nset title '", predicted ? "Step time: measured and as the cost model predicts"
                                                                      : "Step time (no calibration.json: no predictions)",
                    "'\nset xlabel 'workers'\nset ylabel 'ms per step'\nset logscale x 2\nset key top left\nplot ");
    std::vector<std::string> parts;
    for (size_t i = 0; i < measured.size(); ++i) {
      parts.push_back(absl::StrCat("$stepm", i, " using 1:2 with linespoints lw 2 pt 7 lc ", i + 1,
                                   " title '", G(measured[i].label), "'"));
      if (!model[i].xy.empty()) {
        parts.push_back(absl::StrCat("$stepq", i, " using 1:2 with linespoints dt 2 pt 6 lc ", i + 1,
                                     " title '", G(model[i].label), "'"));
      }
    }
    absl::StrAppend(&script, absl::StrJoin(parts, ", "), "\n");
  }
  // Stacked breakdown: one bar per point.
  absl::StrAppend(&script, "$breakdown << EOD\n");
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0) continue;
    absl::StrAppendFormat(&script, "\"%s n%d\" %g %g %g %g\n", G(p.label), p.workers, p.compute_ms, p.comm_ms,
                          p.wait_ms, p.update_ms);
  }
  absl::StrAppend(&script, "EOD\n",
                  "set output 'breakdown.svg'\nset title 'Per-step time (medians, worker 0 / rank 0)'\n"
                  "unset logscale x\nset style data histograms\nset style histogram rowstacked\n"
                  "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset xtics rotate by -40\n"
                  "set xlabel ''\nset ylabel 'ms'\nset key outside right top\n"
                  "plot $breakdown using 2:xtic(1) title 'compute', '' using 3 title 'communicate', "
                  "'' using 4 title 'wait', '' using 5 title 'update'\n"
                  "set style data linespoints\nset xtics norotate\nset key top left\nunset style histogram\n");
  // Accuracy vs wall time.
  absl::StrAppend(&script, "$acc << EOD\n");
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0) continue;
    absl::StrAppendFormat(&script, "%g %g \"%s n%d\"\n", p.wall_s, p.test_accuracy, G(p.label), p.workers);
  }
  absl::StrAppend(&script, "EOD\n",
                  "set output 'accuracy.svg'\nset title 'Test accuracy vs wall time of the cell'\n"
                  "set xlabel 'wall time (s)'\nset ylabel 'test accuracy'\nunset logscale x\n"
                  "plot $acc using 1:2 with points pt 7 ps 1.2 notitle, '' using 1:2:3 with labels offset 0,1 font ',9' notitle\n");
  const std::string script_path = plot_dir + "/plots.gp";
  if (absl::Status s = WriteFileAtomically(script_path, script); !s.ok()) return s;
  // gnuplot writes its SVGs next to the script.
  const fs::path cwd = fs::current_path(error);
  fs::current_path(plot_dir, error);
  if (error) return absl::InternalError(absl::StrCat("cannot enter ", plot_dir));
  absl::Status plotted = RunGnuplot(".", "plots.gp");
  fs::current_path(cwd, error);
  if (!plotted.ok()) return plotted;

  // Markdown.
  std::string network = "loopback (no emulated links)";
  if (ExperimentSpec parsed; google::protobuf::TextFormat::ParseFromString(spec, &parsed) &&
                             !parsed.network().empty()) {
    network = absl::StrCat("emulated links `", parsed.network(),
                           "`, every process in its own network namespace");
  }
  std::string md = absl::StrCat("# ringside report: ", fs::path(dir).filename().string(), "\n\n",
                                "Network: ", network, ".\n\n");
  absl::StrAppend(&md, "## Findings\n\n", Findings(points, num_params), "## Summary\n\n",
                  "| strategy | workers | step ms | predicted ms (error) | samples/s | speedup | efficiency | compute | communicate | wait | update | busiest node MB in/out | test acc | repeats |\n",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0) {
      absl::StrAppendFormat(&md, "| %s | %d | failed: %s | | | | | | | | | | | 0/%d |\n", p.label, p.workers,
                            p.failure, p.failed_repeats);
      continue;
    }
    absl::StrAppendFormat(&md, "| %s | %d | %.2f | %s | %.0f | %.2f | %.0f%% | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f | %.4f | %d/%d |\n",
                          p.label, p.workers, p.step_ms, PredictionCell(p), p.samples_per_sec, p.speedup,
                          100 * p.efficiency, p.compute_ms, p.comm_ms, p.wait_ms, p.update_ms,
                          p.busiest_bytes_in / 1e6, p.busiest_bytes_out / 1e6, p.test_accuracy,
                          p.ok_repeats, p.ok_repeats + p.failed_repeats);
  }
  absl::StrAppendFormat(&md, "\nModel: %d parameters (M = %.2f MB). %s Plots: report.html. Spec:\n\n```\n%s```\n",
                        num_params, 4.0 * num_params / 1e6,
                        predicted ? "Predictions: the cost model (docs/cost_model.md) with calibration.json "
                                    "(measured on loopback by `ringside calibrate`), the spec's links, and "
                                    "compute slowed by workers / cores where workers outnumber cores; error = "
                                    "(predicted - measured) / measured."
                                  : "No calibration.json: run `ringside calibrate --out=DIR/calibration.json` "
                                    "for the cost model's predictions.",
                        spec);
  if (absl::Status s = WriteFileAtomically(dir + "/report.md", md); !s.ok()) return s;

  // HTML with the SVGs inline.
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ringside report</title>\n"
      "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
      "table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
      "th{background:#f0f0f0}.plots{display:flex;flex-wrap:wrap;gap:12px}.plot svg{max-width:100%;height:auto}"
      "pre{background:#f6f6f6;padding:8px}</style></head><body>\n",
      "<h1>ringside report: ", HtmlEscape(fs::path(dir).filename().string()), "</h1>\n<p>Network: ",
      HtmlEscape(absl::StrReplaceAll(network, {{"`", ""}})), ".</p>\n<h2>Findings</h2>\n");
  const std::string findings = Findings(points, num_params);
  for (absl::string_view para : absl::StrSplit(findings, "\n\n", absl::SkipEmpty())) {
    std::string p = HtmlEscape(std::string(para));
    // **label** -> <b>label</b>
    for (size_t at; (at = p.find("**")) != std::string::npos;) {
      const size_t end = p.find("**", at + 2);
      if (end == std::string::npos) break;
      p = absl::StrCat(p.substr(0, at), "<b>", p.substr(at + 2, end - at - 2), "</b>", p.substr(end + 2));
    }
    absl::StrAppend(&html, "<p>", p, "</p>\n");
  }
  absl::StrAppend(&html, "<h2>Plots</h2>\n<div class=\"plots\">\n");
  for (const char* name :
       {"speedup", "efficiency", "throughput", "steptime", "breakdown", "bytes", "accuracy"}) {
    absl::StatusOr<std::string> svg = ReadFile(absl::StrCat(plot_dir, "/", name, ".svg"));
    if (!svg.ok()) return absl::InternalError(absl::StrCat("gnuplot wrote no ", name, ".svg"));
    std::string body = *svg;
    if (const size_t at = body.find("<svg"); at != std::string::npos) body = body.substr(at);
    absl::StrAppend(&html, "<div class=\"plot\" id=\"plot-", name, "\">", body, "</div>\n");
  }
  absl::StrAppend(&html, "</div>\n<h2>Summary</h2>\n<table><tr><th>strategy</th><th>workers</th><th>step ms</th>"
                  "<th>predicted ms (error)</th><th>samples/s</th><th>speedup</th><th>efficiency</th><th>compute</th><th>communicate</th>"
                  "<th>wait</th><th>update</th><th>busiest node MB in/out</th><th>test acc</th><th>traces</th></tr>\n");
  for (const ReportPoint& p : points) {
    std::string traces;
    for (const std::string& c : p.cells) {
      const std::string rel = fs::exists(absl::StrCat(dir, "/cells/", c, "/trace.json.rank0"))
                                  ? absl::StrCat("cells/", c, "/trace.json.rank0")
                                  : absl::StrCat("cells/", c, "/trace.json");
      absl::StrAppend(&traces, "<a href=\"", HtmlEscape(rel), "\">", HtmlEscape(c), "</a> ");
    }
    if (p.ok_repeats == 0) {
      absl::StrAppendFormat(&html, "<tr><td>%s</td><td>%d</td><td colspan=\"11\">failed: %s</td><td>%s</td></tr>\n",
                            HtmlEscape(p.label), p.workers, HtmlEscape(p.failure), traces);
      continue;
    }
    absl::StrAppendFormat(&html, "<tr><td>%s</td><td>%d</td><td>%.2f</td><td>%s</td><td>%.0f</td><td>%.2f</td><td>%.0f%%</td>"
                          "<td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f / %.2f</td><td>%.4f</td><td>%s</td></tr>\n",
                          HtmlEscape(p.label), p.workers, p.step_ms, PredictionCell(p), p.samples_per_sec, p.speedup,
                          100 * p.efficiency, p.compute_ms, p.comm_ms, p.wait_ms, p.update_ms,
                          p.busiest_bytes_in / 1e6, p.busiest_bytes_out / 1e6, p.test_accuracy, traces);
  }
  // After layout, each plot records its rendered size in data-rendered (checked by
  // tests/report_html_test.sh through headless Chromium's DOM dump).
  absl::StrAppendFormat(&html, "</table>\n<p>Model: %d parameters (M = %.2f MB). Chrome traces open in "
                        "<a href=\"https://ui.perfetto.dev\">Perfetto</a> or chrome://tracing.</p>\n"
                        "<h2>Spec</h2>\n<pre>%s</pre>\n"
                        "<script>window.addEventListener('load', function () {\n"
                        "  document.querySelectorAll('.plot').forEach(function (plot) {\n"
                        "    var box = plot.querySelector('svg').getBoundingClientRect();\n"
                        "    plot.setAttribute('data-rendered', Math.round(box.width) + 'x' + Math.round(box.height));\n"
                        "  });\n});</script>\n</body></html>\n",
                        num_params, 4.0 * num_params / 1e6, HtmlEscape(spec));
  return WriteFileAtomically(dir + "/report.html", html);
}

}  // namespace ringside
