#include "experiments/report/plots.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "experiments/sys/sys.h"

namespace ringside {
namespace {

// A label as gnuplot text: quotes would end gnuplot's strings.
std::string G(const std::string& text) {
  return absl::StrReplaceAll(text, {{"'", "_"}, {"\"", "_"}, {"\\", "_"}});
}

// One line plot: x = workers, one series per strategy label.
struct Series {
  std::string label;
  std::vector<std::pair<double, double>> xy;
  int colour = 1;  // gnuplot's line colour index: one per strategy across every plot.
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

// x is log 2 (workers 1, 2, 4, ...); y is log 2 too when `log_y` (so that y = x, the
// ideal speedup, is a straight line).
std::string LinePlot(const std::string& name, const std::string& title, const std::string& ylabel,
                     const std::vector<Series>& series, const std::string& extra_plot, bool log_y) {
  std::string s = DataBlock(name, series);
  absl::StrAppend(&s, "set output '", name, ".svg'\n", "set title '", title, "'\n",
                  "set xlabel 'workers'\nset ylabel '", ylabel, "'\n", "set logscale x 2\n",
                  log_y ? "set logscale y 2\n" : "unset logscale y\n", "set key top left\n", "plot ");
  std::vector<std::string> parts;
  for (size_t i = 0; i < series.size(); ++i) {
    parts.push_back(absl::StrCat("$", name, i, " using 1:2 with linespoints lw 2 pt 7 lc ", series[i].colour,
                                 " title '", G(series[i].label), "'"));
  }
  if (!extra_plot.empty()) parts.push_back(extra_plot);
  absl::StrAppend(&s, absl::StrJoin(parts, ", "), "\n", log_y ? "unset logscale y\n" : "");
  return s;
}


// Series per strategy label (multi-worker strategies; single is the baseline).
struct SeriesSet {
  std::vector<std::string> labels;  // In the points' order.
  std::map<std::string, Series> speed, eff, thr, bytes;

  std::vector<Series> Ordered(std::map<std::string, Series>& m, bool skip_single) const {
    std::vector<Series> v;
    for (const std::string& l : labels) {
      if (skip_single && m[l].xy.size() == 1 && m[l].xy[0].first == 1 && l == "single") continue;
      v.push_back(m[l]);
    }
    return v;
  }
};

SeriesSet CollectSeries(const std::vector<ReportPoint>& points) {
  SeriesSet s;
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0) continue;
    if (std::find(s.labels.begin(), s.labels.end(), p.label) == s.labels.end()) s.labels.push_back(p.label);
    const int colour = static_cast<int>(std::find(s.labels.begin(), s.labels.end(), p.label) - s.labels.begin()) + 1;
    for (auto* m : {&s.speed, &s.eff, &s.thr, &s.bytes}) {
      (*m)[p.label].label = p.label;
      (*m)[p.label].colour = colour;
    }
    s.speed[p.label].xy.push_back({p.workers, p.speedup});
    s.eff[p.label].xy.push_back({p.workers, p.efficiency});
    s.thr[p.label].xy.push_back({p.workers, p.samples_per_sec});
    s.bytes[p.label].xy.push_back({p.workers, (p.busiest_bytes_in + p.busiest_bytes_out) / 2 / 1e6});
  }
  return s;
}

// Step time, measured (solid) and predicted by the cost model (dashed, same colour).
std::string StepTimePlot(const ReportData& data, const std::vector<std::string>& labels) {
  std::vector<Series> measured, model;
  for (const std::string& l : labels) {
    Series m{l, {}}, q{absl::StrCat(l, " (model)"), {}};
    for (const ReportPoint& p : data.points) {
      if (p.label != l || p.ok_repeats == 0) continue;
      m.xy.push_back({p.workers, p.step_ms});
      if (p.predicted_step_ms > 0) q.xy.push_back({p.workers, p.predicted_step_ms});
    }
    measured.push_back(m);
    model.push_back(q);
  }
  std::string script = absl::StrCat(
      DataBlock("stepm", measured), DataBlock("stepq", model), "set output 'steptime.svg'\nset title '",
      data.predicted ? "Step time: measured and as the cost model predicts"
                     : "Step time (no predictions: see the note under the table)",
      "'\nset xlabel 'workers'\nset ylabel 'ms per step'\nset logscale x 2\nset key top left\nplot ");
  std::vector<std::string> parts;
  for (size_t i = 0; i < measured.size(); ++i) {
    // Colour i + 1: the strategy's colour in every plot (labels in CollectSeries's order).
    parts.push_back(absl::StrCat("$stepm", i, " using 1:2 with linespoints lw 2 pt 7 lc ", i + 1,
                                 " title '", G(measured[i].label), "'"));
    if (!model[i].xy.empty()) {
      parts.push_back(absl::StrCat("$stepq", i, " using 1:2 with linespoints dt 2 pt 6 lc ", i + 1,
                                   " title '", G(model[i].label), "'"));
    }
  }
  absl::StrAppend(&script, absl::StrJoin(parts, ", "), "\n");
  return script;
}

// Stacked breakdown (one bar per point) and accuracy vs wall time. The breakdown's parts
// take colours of their own (pastels, none of gnuplot's strategy colours); each accuracy
// point takes its strategy's colour (index in `labels` + 1, as every other plot).
std::string BreakdownAndAccuracyPlots(const std::vector<ReportPoint>& points,
                                      const std::vector<std::string>& labels) {
  std::string script = "$breakdown << EOD\n";
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0) continue;
    absl::StrAppendFormat(&script, "\"%s n%d\" %g %g %g %g %g\n", G(p.label), p.workers, p.data_ms,
                          p.compute_ms, p.comm_ms, p.wait_ms, p.update_ms);
  }
  absl::StrAppend(&script, "EOD\n",
                  "set output 'breakdown.svg'\nset title 'Per-step time (medians, worker 0 / rank 0)'\n"
                  "unset logscale x\nset style data histograms\nset style histogram rowstacked\n"
                  "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset xtics rotate by -40\n"
                  "set xlabel ''\nset ylabel 'ms'\nset key outside right top\n"
                  "plot $breakdown using 2:xtic(1) lc rgb '#cccccc' title 'data', '' using 3 lc rgb '#a6cee3' "
                  "title 'compute', '' using 4 lc rgb '#fb9a99' title 'communicate', '' using 5 lc rgb '#fdbf6f' "
                  "title 'wait', '' using 6 lc rgb '#cab2d6' title 'update'\n"
                  "set style data linespoints\nset xtics norotate\nset key top left\nunset style histogram\n");
  absl::StrAppend(&script, "$acc << EOD\n");
  for (const ReportPoint& p : points) {
    if (p.ok_repeats == 0) continue;
    const int colour = static_cast<int>(std::find(labels.begin(), labels.end(), p.label) - labels.begin()) + 1;
    absl::StrAppendFormat(&script, "%g %g \"%s n%d\" %d\n", p.wall_s, p.test_accuracy, G(p.label), p.workers,
                          colour);
  }
  absl::StrAppend(&script, "EOD\n",
                  "set output 'accuracy.svg'\nset title 'Test accuracy vs wall time of the cell'\n"
                  "set xlabel 'wall time (s)'\nset ylabel 'test accuracy'\nunset logscale x\n"
                  "plot $acc using 1:2:4 with points pt 7 ps 1.2 lc variable notitle, "
                  "'' using 1:2:3:4 with labels offset 0,1 font ',9' tc variable notitle\n");
  return script;
}

}  // namespace

std::string PlotScript(const ReportData& data) {
  SeriesSet s = CollectSeries(data.points);
  std::string script = "set terminal svg size 640,400 enhanced font 'sans,11' background '#ffffff'\n"
                       "set grid\n";
  // The emulation in force, at the foot of every plot (labels persist across plots).
  if (!data.emulation_short.empty()) {
    absl::StrAppend(&script, "set bmargin 5\nset label 1000 '", G(data.emulation_short),
                    "' at screen 0.5, screen 0.03 center font ',9' tc rgb '#a00000'\n");
  }
  const std::string scaling = data.strong_scaling ? "strong scaling" : "weak scaling";
  absl::StrAppend(&script, LinePlot("speedup", absl::StrCat("Speedup vs workers (", scaling, ", log-log axes)"),
                                    "speedup over single process", s.Ordered(s.speed, true),
                                    "x with lines dt 2 lc rgb '#888888' title 'ideal'", true));
  absl::StrAppend(&script, "set yrange [0:*]\n",
                  LinePlot("efficiency", absl::StrCat("Scaling efficiency (", scaling, ")"), "speedup / workers",
                           s.Ordered(s.eff, true), "1 with lines dt 2 lc rgb '#888888' title 'ideal'", false),
                  "set yrange [*:*]\n");
  absl::StrAppend(&script, LinePlot("throughput", absl::StrCat("Throughput (", scaling, ")"),
                                    "samples/s (all workers)", s.Ordered(s.thr, false), "", false));
  absl::StrAppend(&script, LinePlot("bytes", "Bytes per step through the busiest node (each direction)",
                                    "MB per step", s.Ordered(s.bytes, true), "", false));
  absl::StrAppend(&script, StepTimePlot(data, s.labels), BreakdownAndAccuracyPlots(data.points, s.labels));
  return script;
}

absl::Status RenderPlots(const ReportData& data, const std::string& plot_dir) {
  const std::string gnuplot = "/usr/bin/gnuplot";
  if (!std::filesystem::exists(gnuplot)) {
    return absl::FailedPreconditionError("gnuplot is not installed (apt-get install gnuplot-nox)");
  }
  std::error_code error;
  std::filesystem::create_directories(plot_dir, error);
  RINGSIDE_RETURN_IF_ERROR(WriteFileAtomically(plot_dir + "/plots.gp", PlotScript(data)));
  // gnuplot writes its SVGs into its working directory.
  SpawnOptions so;
  so.argv = {gnuplot, "plots.gp"};
  so.cwd = plot_dir;
  so.err = ChildStream::kFile;
  so.err_path = plot_dir + "/gnuplot.log";
  RINGSIDE_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> child, Subprocess::Spawn(so));
  child->Wait();
  if (!child->succeeded()) {
    return absl::InternalError(absl::StrCat("gnuplot ", child->ExitDescription(), "; see ", so.err_path));
  }
  return absl::OkStatus();
}

}  // namespace ringside
